// Op schemas: "add(Tensor self, Tensor other) -> Tensor", parsed once at start-up. They give
// argument names, types and defaults to the dispatcher, the graph printer and the parser.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/arg.h"

namespace coil {

struct ArgSchema {
  std::string name;
  std::string type;  // "Tensor", "int[]?", ...: as written, with the '?' of optional types
  std::optional<Arg> default_value;
  bool is_optional() const { return !type.empty() && type.back() == '?'; }
  std::string base_type() const { return is_optional() ? type.substr(0, type.size() - 1) : type; }
};

struct Schema {
  std::string name;
  std::vector<ArgSchema> args;
  std::string returns;  // "Tensor" or "Tensor[]"
  std::string str() const;
  int index_of(const std::string& arg_name) const;  // -1 when absent
};

Schema parse_schema(const std::string& text);  // throws InternalError on a malformed schema

// Reads a literal of the given schema type ("1e-05", "[1, 1]", "None", "\"tanh\"", "float32",
// "cpu"); throws coil::Error saying what was expected.
Arg parse_literal(const std::string& text, const std::string& type);
// Writes a non-tensor argument the way parse_literal reads it back.
std::string format_literal(const Arg& a);
// Does `a` hold a value of schema type `type`? (Plain numbers pass for Tensor in pointwise
// ops; ints pass for float and Scalar.)
bool arg_matches(const Arg& a, const std::string& type, bool allow_scalar_tensor);
const char* arg_kind_name(const Arg& a);

}  // namespace coil
