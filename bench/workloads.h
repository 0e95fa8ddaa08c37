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
  // programs here instead, each with the same initial state, built before the first call (as
  // PyTorch's side builds its model before timing); fn is then unused.
  std::function<Program(bool compiled, bool gpu)> make;
  // The eager and the compiled program of `w` at the CPU or the GPU size.
  Program eager(bool gpu) const;
  Program compiled(bool gpu) const;
};

std::vector<Workload> workloads();

// Where the workloads' inputs and models are made (the CPU unless coil-bench --device says).
void use_device(Device device);
Device bench_device();
// coil-bench --dynamic: the compiled programs over size symbols (CompileOptions::dynamic).
void use_dynamic_shapes(bool dynamic);
// coil-bench --mode: CompileOptions::mode of the compiled programs ("reduce-overhead").
void use_mode(const std::string& mode);
CompileOptions bench_options(const std::string& name);
// coil-bench --dtype: the floating dtype of the workloads' inputs and of train_mlp's model
// (float32 unless given); with --amp, the inputs and model stay float32 and each call runs under
// autocast in that dtype instead.
void use_precision(DType dtype, bool amp);
DType bench_dtype();
bool bench_amp();

// One matrix product of a workload: `batch` products of (m x k) by (k x n).
struct Product {
  int64_t batch, m, n, k;
  double flops() const { return 2.0 * static_cast<double>(batch * m * n * k); }
};
// The products a matmul-bound workload computes for these inputs (none for the others).
std::vector<Product> workload_products(const std::string& name, const std::vector<Tensor>& in);

}  // namespace coil::bench
