// Loop-IR values as CUDA C++ expressions, one element per thread: the C forms every C-like
// backend shares (codegen/c_expr.h) in CUDA's spelling, loads and stores of 16-bit floats
// through the prelude's conversions, and indirect loads checked against their bounds. Each
// distinct expression is computed once per body (CSE by its text); the sine and cosine of one
// value in one body are one sincos call, which reduces the argument once for both.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "codegen/c_expr.h"
#include "codegen/code_writer.h"
#include "codegen/kernel_source.h"
#include "ir/program.h"
#include "ir/value.h"

namespace coil::cuda {

// The type buffers of `t` hold in device code (16-bit floats as their bits).
const char* memory_type(DType t);
codegen::CDialect cuda_dialect();
std::string cuda_literal(const Scalar& s, DType dtype);
// `value` (of compute type) as stored in a buffer of `dtype`.
std::string to_memory(DType dtype, const std::string& value);
// The element at `at` of a buffer of `dtype`, in its compute type.
std::string from_memory(DType dtype, const std::string& at);
// The value a reduction of `k` over values of `t` starts from, and the prelude's functor that
// folds one value into it (coil_sum{}, ...; not for argmax/argmin or Welford's).
std::string reduce_identity(ir::ReduceKind k, DType t);
const char* reduce_fold(ir::ReduceKind k);

class CudaEmitter {
 public:
  // Statements go to `w`; `counter` numbers the temporaries of one kernel.
  CudaEmitter(codegen::CodeWriter& w, int& counter) : w_(w), counter_(counter) {}

  // The value's text: a temporary's name or a literal.
  std::string emit(const ir::Value& v);
  // `buffer`'s value at this point is already in `text`.
  void forward(const std::string& buffer, std::string text) {
    forwarded_[buffer] = std::move(text);
  }
  // For buffers computed in this kernel but not stored: their body (recomputed).
  std::function<std::optional<ir::Value>(const std::string&)> recompute;
  // A load's value from elsewhere than memory (a vectorised kernel's registers), or nullopt.
  std::function<std::optional<std::string>(const ir::ValueNode&)> load_override;
  // Whether a direct load reads its buffer with the streaming hint (coil_ld_stream); unset: no
  // load does.
  std::function<bool(const ir::ValueNode&)> stream_load;
  // An index value's expression as emitted: in a vectorised kernel's lanes, one that is the same
  // for every element of the lanes' run is taken at the run's first element (then computed once
  // for the run, not again in each lane: a channels-last pool's window positions); unset, the
  // expression itself.
  std::function<sym::Expr(sym::Expr)> run_index;
  // Where indirect loads register their checks (a kernel's list).
  std::vector<codegen::IndexCheck>* checks = nullptr;
  // Names the kernel's divider of a run-time divisor (a kernel parameter); unset, indices
  // divide as C does.
  std::function<std::string(sym::Expr divisor)> divider;
  // An index as C: each division by a run-time divisor through its divider, once per body
  // (a temporary, CSE'd as any other), a remainder from its quotient; by a constant in 32 bits
  // where the numerator's range fits.
  std::string index(sym::Expr e);
  void line(const std::string& s) { w_.line(s); }

 private:
  std::string temp(const std::string& type, const std::string& expr);
  // The sine or cosine of `arg` (the text of v's operand) from one sincos call for both.
  std::string sincos(const ir::ValueNode& v, const std::string& arg);
  std::string emit_node(const ir::ValueNode& v, const std::vector<std::string>& args);
  std::string emit_load(const ir::ValueNode& v, const std::vector<std::string>& args);

  codegen::CodeWriter& w_;
  int& counter_;
  std::map<std::string, std::string> forwarded_;
  std::unordered_map<const ir::ValueNode*, std::string> memo_;
  std::unordered_map<std::string, std::string> cse_;
  int depth_ = 0;  // of emit's recursion: 0 at a body's root
  // Operands (as ir::to_string prints them: equal values may be distinct nodes) whose sine and
  // cosine a body emitted so far needs, and the sincos results by the operand's text.
  std::unordered_set<std::string> sincos_args_;
  std::unordered_map<std::string, std::pair<std::string, std::string>> sincos_;
};

}  // namespace coil::cuda
