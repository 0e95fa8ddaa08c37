// Reading expressions back from to_string's text: sums, products, Python's // and %, min and
// max, integers and variable names (resolved by the caller), with Python's precedence.
#include <cctype>

#include <coil/error.h>

#include "sym/expr.h"

namespace coil::sym {
namespace {

class Parser {
 public:
  Parser(const std::string& text, const std::function<Expr(const std::string&)>& var_of)
      : s_(text), var_of_(var_of) {}

  Expr all() {
    Expr e = sum();
    skip();
    if (i_ != s_.size()) fail("unexpected '" + std::string(1, s_[i_]) + "'");
    return e;
  }

 private:
  void skip() {
    while (i_ < s_.size() && s_[i_] == ' ') ++i_;
  }
  bool eat(const char* tok) {
    skip();
    size_t n = std::char_traits<char>::length(tok);
    if (s_.compare(i_, n, tok) != 0) return false;
    i_ += n;
    return true;
  }
  [[noreturn]] void fail(const std::string& why) const {
    throw Error(detail::str_cat("cannot read the size expression '", s_, "' at column ", i_ + 1,
                                ": ", why));
  }

  Expr sum() {
    Expr e = product();
    while (true) {
      if (eat("+"))
        e = e + product();
      else if (eat("-"))
        e = e - product();
      else
        return e;
    }
  }
  Expr product() {
    Expr e = unary();
    while (true) {
      if (eat("//"))
        e = floordiv(e, unary());
      else if (eat("*"))
        e = e * unary();
      else if (eat("%"))
        e = mod(e, unary());
      else
        return e;
    }
  }
  Expr unary() { return eat("-") ? -unary() : atom(); }
  Expr atom() {
    skip();
    if (eat("(")) {
      Expr e = sum();
      if (!eat(")")) fail("expected ')'");
      return e;
    }
    if (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      int64_t v = 0;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s_[i_] - '0', &v))
          fail("a number beyond int64");
        ++i_;
      }
      return constant(v);
    }
    size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
      ++i_;
    if (start == i_) fail("expected a number, a name or '('");
    std::string name = s_.substr(start, i_ - start);
    if ((name == "min" || name == "max") && eat("(")) {
      Expr a = sum();
      if (!eat(",")) fail("expected ','");
      Expr b = sum();
      if (!eat(")")) fail("expected ')'");
      return name == "min" ? min(a, b) : max(a, b);
    }
    Expr v = var_of_(name);
    if (!v) fail("unknown name '" + name + "'");
    return v;
  }

  const std::string& s_;
  const std::function<Expr(const std::string&)>& var_of_;
  size_t i_ = 0;
};

}  // namespace

Expr parse(const std::string& text, const std::function<Expr(const std::string&)>& var_of) {
  return Parser(text, var_of).all();
}

}  // namespace coil::sym
