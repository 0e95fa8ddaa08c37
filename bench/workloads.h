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
};

std::vector<Workload> workloads();
// The flops of a matmul-bound workload's products for these inputs (0 for the others).
double workload_flops(const std::string& name, const std::vector<Tensor>& inputs);

}  // namespace coil::bench
