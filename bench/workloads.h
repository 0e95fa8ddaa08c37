// The workloads of TARGETS.md, each a program over tensors with its inputs at CPU or GPU size,
// and what it must move or compute (the roofline).
#pragma once

#include <coil/coil.h>

#include <functional>
#include <string>
#include <vector>

namespace coil::bench {

using Program = std::function<Tensor(const std::vector<Tensor>&)>;

struct Workload {
  std::string name;
  std::string program;  // as TARGETS.md writes it
  std::function<std::vector<Tensor>(bool gpu)> inputs;
  Program fn;
  bool matmul_bound = false;  // the roofline is the BLAS rate, not the copy bandwidth
  // A workload with state (a training step: model, optimizer) makes its eager and compiled
  // programs here instead, each with the same initial state; fn is then unused.
  std::function<Program(bool compiled)> make;
  // The eager and the compiled program of `w`.
  Program eager() const { return make ? make(false) : fn; }
  Program compiled() const;
};

std::vector<Workload> workloads();
// The flops of a matmul-bound workload's products for these inputs (0 for the others).
double workload_flops(const std::string& name, const std::vector<Tensor>& inputs);

}  // namespace coil::bench
