#include "graph/schema.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include <coil/error.h>

namespace coil {

namespace {
std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Splits on commas that are not inside brackets or quotes.
std::vector<std::string> split_top(const std::string& s) {
  std::vector<std::string> out;
  int depth = 0;
  bool quoted = false;
  std::string cur;
  for (char c : s) {
    if (c == '"') quoted = !quoted;
    if (!quoted && (c == '[' || c == '(')) ++depth;
    if (!quoted && (c == ']' || c == ')')) --depth;
    if (c == ',' && depth == 0 && !quoted) {
      out.push_back(trim(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!trim(cur).empty()) out.push_back(trim(cur));
  return out;
}

bool parse_int(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0') return false;
  out = v;
  return true;
}

bool parse_float(const std::string& s, double& out) {
  if (s == "inf") return out = INFINITY, true;
  if (s == "-inf") return out = -INFINITY, true;
  if (s == "nan") return out = NAN, true;
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return *end == '\0';
}

[[noreturn]] void bad_literal(const std::string& text, const std::string& type) {
  throw Error("cannot read '" + text + "' as a value of type " + type);
}
}  // namespace

Arg parse_literal(const std::string& raw, const std::string& type) {
  std::string text = trim(raw);
  bool optional = !type.empty() && type.back() == '?';
  std::string base = optional ? type.substr(0, type.size() - 1) : type;
  if (text == "None") {
    if (optional) return Arg();
    bad_literal(text, type);
  }
  if (base == "int") {
    int64_t v;
    if (parse_int(text, v)) return v;
  } else if (base == "float") {
    double v;
    if (parse_float(text, v)) return v;
  } else if (base == "Scalar" || base == "Tensor") {
    int64_t i;
    double d;
    if (text == "True" || text == "False") return Scalar(text == "True");
    if (parse_int(text, i)) return Scalar(i);
    if (parse_float(text, d)) return Scalar(d);
  } else if (base == "bool") {
    if (text == "True" || text == "False") return text == "True";
  } else if (base == "int[]") {
    if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
      Shape out;
      for (const auto& item : split_top(text.substr(1, text.size() - 2))) {
        int64_t v;
        if (!parse_int(item, v)) bad_literal(text, type);
        out.push_back(v);
      }
      return out;
    }
  } else if (base == "str") {
    if (text.size() >= 2 && text.front() == '"' && text.back() == '"')
      return text.substr(1, text.size() - 2);
  } else if (base == "ScalarType") {
    std::string name = text.rfind("coil.", 0) == 0 ? text.substr(5) : text;
    return dtype_from_name(name);
  } else if (base == "Device") {
    std::string name = text;
    if (name.size() >= 2 && name.front() == '"') name = name.substr(1, name.size() - 2);
    return Device(name);
  }
  bad_literal(text, type);
}

std::string format_literal(const Arg& a) {
  struct V {
    std::string operator()(std::monostate) const { return "None"; }
    std::string operator()(const Tensor&) const { return "<tensor>"; }
    std::string operator()(const std::vector<Tensor>&) const { return "<tensors>"; }
    std::string operator()(const Scalar& s) const { return s.str(); }
    std::string operator()(int64_t v) const { return std::to_string(v); }
    std::string operator()(double v) const { return Scalar(v).str(); }
    std::string operator()(bool v) const { return v ? "True" : "False"; }
    std::string operator()(const Shape& s) const { return shape_str(s); }
    std::string operator()(DType t) const { return std::string("coil.") + dtype_name(t); }
    std::string operator()(const std::string& s) const { return "\"" + s + "\""; }
    std::string operator()(const Device& d) const { return "\"" + d.str() + "\""; }
    std::string operator()(const SymIntArg& s) const { return sym::to_string(s.expr); }
    std::string operator()(const SymIntsArg& s) const {
      std::string out = "[";
      for (size_t i = 0; i < s.exprs.size(); ++i)
        out += (i ? ", " : "") + sym::to_string(s.exprs[i]);
      return out + "]";
    }
  };
  return std::visit(V{}, a);
}

const char* arg_kind_name(const Arg& a) {
  static const char* names[] = {"None",  "Tensor",     "Tensor[]", "Scalar", "int", "float", "bool",
                                "int[]", "ScalarType", "str",      "Device", "int", "int[]"};
  return names[a.index()];
}

bool arg_matches(const Arg& a, const std::string& type, bool allow_scalar_tensor) {
  bool optional = !type.empty() && type.back() == '?';
  std::string base = optional ? type.substr(0, type.size() - 1) : type;
  if (std::holds_alternative<std::monostate>(a)) return optional;
  if (base == "Tensor")
    return std::holds_alternative<Tensor>(a) ||
           (allow_scalar_tensor && std::holds_alternative<Scalar>(a));
  if (base == "Tensor[]") return std::holds_alternative<std::vector<Tensor>>(a);
  const bool sym_int = std::holds_alternative<SymIntArg>(a);
  if (base == "Scalar")
    return std::holds_alternative<Scalar>(a) || std::holds_alternative<int64_t>(a) ||
           std::holds_alternative<double>(a) || std::holds_alternative<bool>(a) || sym_int;
  if (base == "int")
    return std::holds_alternative<int64_t>(a) || sym_int ||
           (std::holds_alternative<Scalar>(a) && std::get<Scalar>(a).is_integral());
  if (base == "float")
    return std::holds_alternative<double>(a) || std::holds_alternative<int64_t>(a) ||
           (std::holds_alternative<Scalar>(a) && !std::get<Scalar>(a).is_bool());
  if (base == "bool") return std::holds_alternative<bool>(a);
  if (base == "int[]")
    return std::holds_alternative<Shape>(a) || std::holds_alternative<SymIntsArg>(a);
  if (base == "str") return std::holds_alternative<std::string>(a);
  if (base == "ScalarType") return std::holds_alternative<DType>(a);
  if (base == "Device") return std::holds_alternative<Device>(a);
  return false;
}

Schema parse_schema(const std::string& text) {
  Schema s;
  size_t open = text.find('('), close = text.rfind(')'), arrow = text.find("->");
  COIL_ASSERT(open != std::string::npos && close != std::string::npos && arrow != std::string::npos,
              "malformed schema: ", text);
  s.name = trim(text.substr(0, open));
  s.returns = trim(text.substr(arrow + 2));
  for (const auto& item : split_top(text.substr(open + 1, close - open - 1))) {
    ArgSchema a;
    std::string decl = item;
    if (auto eq = item.find('='); eq != std::string::npos) {
      decl = trim(item.substr(0, eq));
      a.type = trim(decl.substr(0, decl.rfind(' ')));
      a.default_value = parse_literal(item.substr(eq + 1), a.type);
    }
    auto space = decl.rfind(' ');
    COIL_ASSERT(space != std::string::npos, "malformed schema argument '", item, "' in ", text);
    a.type = trim(decl.substr(0, space));
    a.name = trim(decl.substr(space + 1));
    s.args.push_back(std::move(a));
  }
  return s;
}

std::string Schema::str() const {
  std::string out = name + "(";
  for (size_t i = 0; i < args.size(); ++i) {
    out += (i ? ", " : "") + args[i].type + " " + args[i].name;
    if (args[i].default_value) out += "=" + format_literal(*args[i].default_value);
  }
  return out + ") -> " + returns;
}

int Schema::index_of(const std::string& arg_name) const {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == arg_name) return static_cast<int>(i);
  return -1;
}

}  // namespace coil
