// Helpers for the CUDA backend's tests. Those that only need NVRTC (the generated source
// compiles for sm_90) run wherever coil was built with CUDA, CI included; those that run
// kernels skip, saying so, where there is no GPU.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <coil/cuda.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>

#include "backends/backend.h"
#include "compile/stages.h"
#include "graph/parser.h"
#include "graph/printer.h"
#include "testing.h"

#include <regex>
#include <sstream>

// Skips the test unless coil was built with CUDA and a GPU is present.
#define COIL_REQUIRE_GPU()                                                      \
  do {                                                                          \
    if (!coil::cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA"; \
    if (!coil::cuda::is_available()) GTEST_SKIP() << "no GPU";                  \
  } while (0)

namespace coil::testing {

// A GPU result against the CPU's. The GPU's sums run in another order than the CPU's: float32
// results agree to a few ulps of the largest value involved, not of each element.
inline void expect_same(const Tensor& gpu, const Tensor& cpu, const std::string& what,
                        double rtol = 2e-5, double atol = 0) {
  SCOPED_TRACE(what);
  ASSERT_EQ(gpu.device(), kCUDA);
  ASSERT_EQ(gpu.dtype(), cpu.dtype());
  ASSERT_EQ(gpu.sizes(), cpu.sizes());
  Tol tol = tol_for(cpu.dtype());
  if (!is_floating(cpu.dtype())) tol = {0, 0};
  expect_close(gpu.cpu(), values(cpu), cpu.sizes(), std::max(tol.rtol, rtol),
               std::max(tol.atol, atol));
}

// Attention written out in ops (products, a mask, softmax), for float64 references on the GPU:
// through the library's products and generated kernels rather than the fused kernels under test.
inline Tensor attention_by_ops(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
  Tensor s = matmul(q, k.transpose(-2, -1)) * (1 / std::sqrt(static_cast<double>(q.size(-1))));
  if (causal) {
    Tensor keep = tril(ones({q.size(-2), k.size(-2)}, kBool, q.device()));
    s = where(keep, s, -std::numeric_limits<double>::infinity());
  }
  return matmul(softmax(s, -1), v);
}

// `got` against `want` relative to want's largest magnitude (a kernel's sums run in another
// order than the reference's, and 16-bit results round at other places), and within `atol` of
// it where that is about 0 (a query's gradient when it sees one key).
inline void expect_near_largest(const Tensor& got, const Tensor& want, double rtol,
                                const std::string& what, double atol = 0) {
  SCOPED_TRACE(what);
  ASSERT_EQ(got.sizes(), want.sizes());
  const Tensor g = got.to(kFloat64).cpu(), w = want.to(kFloat64).cpu();
  const double scale = w.abs().amax().item<double>();
  EXPECT_LE((g - w).abs().amax().item<double>(), rtol * scale + atol) << "largest |want| " << scale;
}

// The CUDA module `graph`'s kernels make after the inductor stages ("" when it has none).
// Needs coil built with CUDA, not a GPU.
// With `autotune`, mode="max-autotune"'s: each kernel's other launches too.
inline std::string cuda_module_source(const Graph& graph, bool autotune = false) {
  const backends::DeviceBackend* be = backends::cuda_backend(-1);
  if (!be) return "";
  Graph g = graph.clone();
  debug::CompileTrace trace("cuda_test", "cuda_test", CompileOptions{}, {});
  stages::graph_stages(g, trace);
  ir::Program program = stages::lowering(g, *be, trace);
  schedule::Schedule sched = stages::scheduling(program, trace);
  std::vector<codegen::KernelSource> kernels =
      stages::codegen(g, program, sched, *be, trace, autotune);
  return kernels.empty() ? "" : be->module_source(kernels);
}

// That source compiled by NVRTC for the default architecture without loading it: "" when it
// compiled (or has no kernels), else the compiler's log and the source.
inline std::string cuda_compile_errors(const Graph& graph, bool autotune = false) {
  const backends::DeviceBackend* be = backends::cuda_backend(-1);
  if (!be) return "coil was built without CUDA";
  const std::string source = cuda_module_source(graph, autotune);
  if (source.empty()) return "";
  std::string dir = ::testing::TempDir() + "coil-nvrtc-XXXXXX";
  if (!mkdtemp(dir.data())) return "cannot make a temporary folder";
  jit::Compiler::Outcome out = be->compiler()->compile(source, dir + "/k.cu", dir + "/k.cubin");
  std::filesystem::remove_all(dir);
  return out.ok ? "" : out.log + "\n" + source;
}

// `graph` printed, its def line (the placeholders' annotations) and each later line rewritten
// (the later lines' annotations dropped, so the parser infers them again; a dynamic graph's
// hints line kept before the def line), parsed back.
inline Graph reparsed(const Graph& graph, const std::function<void(std::string&)>& def_line,
                      const std::function<void(std::string&)>& body_line = {}) {
  std::istringstream text(print_graph(graph));
  std::string line, out;
  while (std::getline(text, line) && line.rfind("def ", 0) != 0) out += line + "\n";
  def_line(line);
  out += line + "\n";
  static const std::regex annotation(R"re(^(\s+\w+): "[^"]*" = )re");
  while (std::getline(text, line)) {
    line = std::regex_replace(line, annotation, "$1 = ");
    if (body_line) body_line(line);
    out += line + "\n";
  }
  return parse_graph(out);
}

// Every occurrence of `from` in `s` replaced by `to`.
inline void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size())
    s.replace(at, from.size(), to);
}

// `graph` with its inputs, and the devices its factories name, on the GPU.
inline Graph on_gpu(const Graph& graph) {
  return reparsed(
      graph, [](std::string& def) { replace_all(def, "]cpu", "]cuda:0"); },
      [](std::string& line) { replace_all(line, "\"cpu\"", "\"cuda:0\""); });
}

// Copies of CPU tensors on the GPU, with their strides.
inline std::vector<Tensor> on_gpu(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> out;
  for (const Tensor& t : inputs) {
    out.push_back(empty_strided(t.sizes(), t.strides(), t.dtype(), kCUDA));
    out.back().copy_(t);
  }
  return out;
}

}  // namespace coil::testing
