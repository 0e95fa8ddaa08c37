// Loop-IR values to C++ expressions, in two modes: scalar (one element) and vector (COIL_VEC
// consecutive points of the innermost loop, as GCC vector types, with SLEEF for the
// transcendentals). In vector mode a value that does not depend on the lane ("uniform": a
// broadcast load, a constant, an outer index) stays scalar and is splatted where it meets a
// varying one. Each distinct expression is computed once per body (CSE by its text).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "codegen/c_expr.h"
#include "codegen/code_writer.h"
#include "codegen/kernel_source.h"
#include "ir/value.h"

namespace coil::cpu {

using codegen::IndexCheck;

using codegen::compute_type;
// The type buffers of `t` hold (_Float16 and the prelude's bf16 for the 16-bit floats).
const char* memory_type(DType t);
// The spellings of the header-free C++ source: GCC's builtins.
codegen::CDialect cpp_dialect();

struct Emitted {
  std::string text;      // a temporary's name or a literal
  bool varying = false;  // a vector (vector mode only)
};

// Whether vector lanes hold values of `t`: float32, and the 16-bit floats (as float32 rounded
// to them, read and written by the prelude's vload_bf16/vstore_bf16 and the float16 pair).
bool vector_lane_type(DType t);
// The prelude's vector read of consecutive elements of a `t` buffer ("vload", "vload_bf16"...),
// and its write.
std::string vector_load(DType t);
std::string vector_store(DType t);

// Whether every node of `v` can run in vector mode along `lane`: varying values must be of a
// vector lane type or bool (as masks), varying loads must read a vector lane type's buffers.
bool vectorizable(const ir::Value& v, sym::Expr lane);

// A comparison of an index that steps by one with the lane (a one-hot's arange) against an
// integer the same for every lane: vector mode compares the lanes' offsets, as a mask. `op`
// reads index op other; `other` is the operand's position.
struct LaneComparison {
  ir::Op op;
  sym::Expr index;
  int other;
};
std::optional<LaneComparison> lane_comparison(const ir::ValueNode& v, sym::Expr lane);

class BodyEmitter {
 public:
  // `lane` is the vectorised loop variable, nullptr for scalar code. Statements go to `w`.
  // `counter` numbers the temporaries, shared by all bodies of one function.
  BodyEmitter(codegen::CodeWriter& w, sym::Expr lane, int& counter);

  Emitted emit(const ir::Value& v);
  // A value as a vector (splatting a uniform one); vector mode only.
  std::string varying(const Emitted& e, DType dtype);
  // `buffer`'s value at the current point is already in a variable.
  void forward(const std::string& buffer, Emitted e) { forwarded_[buffer] = std::move(e); }
  // For buffers computed in this kernel but not stored and not forwarded here: their body
  // (recomputed).
  std::function<std::optional<ir::Value>(const std::string&)> recompute;
  // The value whose text is `key` lives in `array[index]` (a float32 row array): the body that
  // `defines` it computes and stores it there, other bodies load it instead of recomputing.
  void keep(const std::string& key, const std::string& array, const std::string& index,
            bool defines) {
    kept_[key] = Kept{array, index, defines};
  }
  // Where indirect loads register their checks (shared by the bodies of one kernel).
  std::vector<IndexCheck>* checks = nullptr;
  // Appends a statement.
  void line(const std::string& s) { w_.line(s); }

 private:
  Emitted temp(const std::string& type, const std::string& expr, bool varying);
  Emitted emit_node(const ir::ValueNode& v, const std::vector<Emitted>& args);
  Emitted emit_load(const ir::ValueNode& v, const std::vector<Emitted>& args);
  sym::Expr checked_index(const ir::ValueNode& v, const std::vector<Emitted>& args);
  Emitted emit_scalar_op(const ir::ValueNode& v, const std::vector<Emitted>& a);
  Emitted emit_vector_op(const ir::ValueNode& v, const std::vector<Emitted>& a);

  codegen::CodeWriter& w_;
  sym::Expr lane_;
  struct Kept {
    std::string array, index;
    bool defines;
  };

  std::map<std::string, Emitted> forwarded_;
  std::map<std::string, Kept> kept_;
  std::unordered_map<const ir::ValueNode*, Emitted> memo_;
  std::unordered_map<std::string, Emitted> cse_;
  int& counter_;
};

// A C literal of `s` in `dtype`'s compute type.
std::string c_literal(const Scalar& s, DType dtype);

}  // namespace coil::cpu
