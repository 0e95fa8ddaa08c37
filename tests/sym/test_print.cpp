// to_string and to_c: exact text for the forms code generation relies on, and a fuzz check
// that the printed text means the expression: a small evaluator below reads it back (Python's
// `//` and `%` for to_string; C's truncating `/` and `%` plus coil_floordiv/coil_mod and
// conditionals for to_c) and must agree with evaluate() at random points.
#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "coil/error.h"
#include "sym/random_expr.h"

using namespace coil::sym;
using namespace coil::sym::testing;

namespace {

// Reads back the subset of Python or C that the printers write.
class Reader {
 public:
  Reader(const std::string& text, bool c, const int64_t* env) : s_(text), c_(c), env_(env) {}

  int64_t read() {
    int64_t v = conditional();
    EXPECT_EQ(pos_, s_.size()) << "trailing text in " << s_;
    return v;
  }

 private:
  int64_t conditional() {
    int64_t v = comparison();
    if (!eat("?")) return v;
    int64_t a = conditional();
    EXPECT_TRUE(eat(":")) << s_;
    int64_t b = conditional();
    return v ? a : b;
  }

  int64_t comparison() {
    int64_t v = sum();
    if (eat("<")) return v < sum();
    if (eat(">")) return v > sum();
    return v;
  }

  int64_t sum() {
    int64_t v = product();
    while (true) {
      if (eat("+"))
        v += product();
      else if (eat("-"))
        v -= product();
      else
        return v;
    }
  }

  int64_t product() {
    int64_t v = unary();
    while (true) {
      if (eat("*")) {
        v *= unary();
      } else if (!c_ && eat("//")) {
        v = py_div(v, unary());
      } else if (c_ && eat("/")) {
        v /= unary();
      } else if (eat("%")) {
        int64_t d = unary();
        v = c_ ? v % d : py_mod(v, d);
      } else {
        return v;
      }
    }
  }

  int64_t unary() { return eat("-") ? -unary() : primary(); }

  int64_t primary() {
    skip_space();
    if (eat("(")) {
      int64_t v = conditional();
      EXPECT_TRUE(eat(")")) << s_;
      return v;
    }
    size_t start = pos_;
    if (std::isdigit(static_cast<unsigned char>(s_[pos_]))) {
      while (pos_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[pos_]))) ++pos_;
      int64_t v = std::stoll(s_.substr(start, pos_ - start));
      if (c_) eat("LL");
      return v;
    }
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
      ++pos_;
    std::string name = s_.substr(start, pos_ - start);
    if (eat("(")) {
      int64_t a = conditional();
      EXPECT_TRUE(eat(",")) << s_;
      int64_t b = conditional();
      EXPECT_TRUE(eat(")")) << s_;
      if (c_ && name == "coil_floordiv") return py_div(a, b);
      if (c_ && name == "coil_mod") return py_mod(a, b);
      if (!c_ && name == "min") return std::min(a, b);
      if (!c_ && name == "max") return std::max(a, b);
      ADD_FAILURE() << "unknown function " << name << " in " << s_;
      return 0;
    }
    for (int i = 0; i < kNumVars; ++i)
      if (name == kNames[i]) return env_[i];
    ADD_FAILURE() << "unknown name '" << name << "' in " << s_;
    return 0;
  }

  void skip_space() {
    while (pos_ < s_.size() && s_[pos_] == ' ') ++pos_;
  }
  bool eat(const std::string& token) {
    skip_space();
    if (s_.compare(pos_, token.size(), token) != 0) return false;
    pos_ += token.size();
    return true;
  }

  std::string s_;
  bool c_;
  const int64_t* env_;
  size_t pos_ = 0;
};

const Expr x = index_var("x", 100);
const Expr z = index_var("z", 32);
const Expr n = var("n", {-8, 8});

}  // namespace

TEST(SymPrint, Text) {
  Expr x0 = index_var("x0", 16), x1 = index_var("x1", 16);
  EXPECT_EQ(to_string(x0 + x1 * 8), "x0 + 8*x1");
  EXPECT_EQ(to_string(mod(floordiv(x, 8), 4)), "(x % 32) // 8");
  EXPECT_EQ(to_string(min(x, constant(3))), "min(x, 3)");
  EXPECT_EQ(to_string(x - z * 8 - 3), "x - 8*z - 3");
  EXPECT_EQ(to_string(-x + 3), "-x + 3");
  EXPECT_EQ(to_string(-(x * z)), "-x*z");
  EXPECT_EQ(to_string(z * floordiv(x, 4)), "z*(x // 4)");
  EXPECT_EQ(to_string(floordiv(x * 3, 2)), "(3*x) // 2");
  EXPECT_EQ(to_string(floordiv(x + z, 8)), "(x + z) // 8");
  EXPECT_EQ(to_string(mod(-x, 8)), "(-x) % 8");
  EXPECT_EQ(to_string(constant(-5)), "-5");
}

TEST(SymPrint, C) {
  Expr x0 = index_var("x0", 16), x1 = index_var("x1", 16);
  EXPECT_EQ(to_c(x0 * 8 + x1), "8*x0 + x1");
  EXPECT_EQ(to_c(floordiv(x, 8)), "x / 8");  // non-negative numerator: C agrees with Python
  EXPECT_EQ(to_c(mod(x, 8)), "x % 8");
  EXPECT_EQ(to_c(floordiv(n, 4)), "coil_floordiv(n, 4)");
  EXPECT_EQ(to_c(mod(n, 4)), "coil_mod(n, 4)");
  EXPECT_EQ(to_c(floordiv(x - z, 4)), "coil_floordiv(x - z, 4)");
  EXPECT_EQ(to_c(floordiv(x - 1, 8)), "(x + 7) / 8 - 1");  // canonical form stays in C's range
  EXPECT_EQ(to_c(floordiv(mod(x, 16), 4) * 4), "4*((x % 16) / 4)");
  EXPECT_EQ(to_c(x - z * 8 - 3), "x - 8*z - 3");
  EXPECT_EQ(to_c(min(x, z)), "(x < z ? x : z)");
  EXPECT_EQ(to_c(max(x - 1, constant(0))), "(x - 1 > 0 ? x - 1 : 0)");
  // Constants beyond int32 carry LL; the int64 minimum has no literal of its own.
  EXPECT_EQ(to_c(x + constant(INT32_MAX)), "x + 2147483647");
  EXPECT_EQ(to_c(x * 5000000000LL), "5000000000LL*x");
  EXPECT_EQ(to_c(constant(-3000000000LL)), "-3000000000LL");
  EXPECT_EQ(to_c(constant(INT64_MIN)), "(-9223372036854775807LL - 1)");
}

TEST(SymPrint, TextAndCMeanTheExpression) {
  Generator gen(5000);
  std::mt19937_64 rng(5001);
  for (int i = 0; i < 1500; ++i) {
    Expr e = build(*gen.tree(4));
    std::string text = to_string(e), c = to_c(e);
    for (int p = 0; p < 8; ++p) {
      int64_t env[kNumVars];
      for (int v = 0; v < kNumVars; ++v)
        env[v] = std::uniform_int_distribution<int64_t>(kRanges[v].lo, kRanges[v].hi)(rng);
      int64_t want = evaluate(e, bindings_of(env));
      ASSERT_EQ(Reader(text, false, env).read(), want) << text << " at " << point_str(env);
      ASSERT_EQ(Reader(c, true, env).read(), want) << c << " at " << point_str(env);
    }
  }
}

TEST(SymPrint, ParseReadsTheTextBack) {
  using namespace coil::sym;
  const Expr s = size_var("s0"), t = size_var("s1"), x = index_var("x", 64);
  auto var_of = [&](const std::string& name) -> Expr {
    return name == "s0" ? s : name == "s1" ? t : name == "x" ? x : nullptr;
  };
  for (Expr e : {s * t + 3, floordiv(s * t, 2) - s, mod(x, s) + floordiv(x, s * 4), min(s, t) * -2,
                 max(s - 3, constant(0)), -s * t + 5 * x, constant(-7)})
    EXPECT_EQ(parse(to_string(e), var_of), e) << to_string(e);
  EXPECT_THROW(parse("s0 + q", var_of), coil::Error);
  EXPECT_THROW(parse("s0 +", var_of), coil::Error);
  EXPECT_THROW(parse("(s0", var_of), coil::Error);
}
