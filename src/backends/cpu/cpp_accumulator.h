// A reduction's accumulators in a generated kernel: declared before a pass over the inner
// loops, updated at each point, merged and read after it. A vector kernel keeps a vector
// accumulator beside the scalar one (the remainder's); a long row's sum, product, maximum or
// minimum splits its vector accumulator into parts (row_kernel.cpp's split_accumulators),
// each updated by one of the unrolled vector steps and merged into the first after the loop.
#pragma once

#include <string>

#include "backends/cpu/cpp_expr.h"
#include "codegen/code_writer.h"
#include "schedule/kernel.h"

namespace coil::cpu {

class Accumulator {
 public:
  // `n` is a reduction node of kernel `k`; `vector`: its inner loop runs in vector steps.
  Accumulator(const schedule::Kernel& k, const schedule::KernelNode& n, bool vector)
      : k_(k), n_(n), vector_(vector) {}

  // The variable: the scalar one, or part `part` of the vector one.
  std::string name(bool vector, int part = 0) const;
  // Declarations of the scalar accumulator, the vector one and its other `parts` - 1 parts.
  void declare(codegen::CodeWriter& w, int parts) const;
  // Folds value `v` of the body into the scalar accumulator or the vector part `part`.
  void update(BodyEmitter& em, const Emitted& v, bool vector, int part) const;
  // Statements that merge parts 1 .. `parts` - 1 into part 0.
  void merge_parts(codegen::CodeWriter& w, int parts) const;
  // The reduction's value once the pass is done.
  std::string final_value() const;

  // Whether the vector accumulator may be split into parts: a plain vf32 folded by one operation.
  static bool splittable(ir::ReduceKind k);

 private:
  const schedule::Kernel& k_;
  const schedule::KernelNode& n_;
  bool vector_;
};

}  // namespace coil::cpu
