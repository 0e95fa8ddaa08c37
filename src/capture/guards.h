// Guards: what a captured graph assumed about its inputs. A later call whose inputs satisfy
// them reuses the graph; one that does not gets a recompile, with the reason logged.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <coil/compile.h>

#include "graph/graph.h"
#include "graph/shape_env.h"

#include "runtime/tensor_impl.h"

namespace coil::capture {

struct TensorGuard {
  bool defined = false;
  DType dtype{};
  Device device;
  bool requires_grad = false;
  Shape sizes, strides;  // at capture
  // The input of a dynamic graph: per dim, the number of the size symbol it binds (-1: the size
  // is static), and the strides as expressions of the symbols (empty: static strides).
  std::vector<int> symbols;
  SymShape sym_strides;
};

// One guard per flattened argument: a tensor, a list of tensors, or a specialised number.
struct ArgGuard {
  enum class Kind : uint8_t { Tensor, TensorList, Int, Float, Bool } kind;
  std::vector<TensorGuard> tensors;  // one for Tensor, n for TensorList
  int64_t i = 0;
  double d = 0;
  bool b = false;
};

// A tensor the callable captured (a weight, a buffer): the graph holds it by reference, so
// in-place updates of its values need no guard, but what the graph baked in about it does.
struct CapturedGuard {
  Tensor tensor;
  std::string name;  // its parameter node's name in the graph
  TensorGuard guard;
};

class Guards {
 public:
  static Guards from_inputs(const detail::ValueList& inputs);
  // Adds a guard for each of `graph`'s parameters (the captured tensors).
  void guard_captured(const Graph& graph);
  // A dynamic graph: the inputs' symbolic dims bind the size symbols (placeholders in the
  // order of the tensor arguments), and every relation the graph's ShapeEnv holds (collected
  // after compiling: lowering may add some) must hold for a call's sizes.
  void guard_symbols(const Graph& graph);
  bool is_dynamic() const { return num_symbols_ > 0; }
  // For each tensor of `inputs` (flattened, in order): the dims whose size differs from a
  // static dim of this guard's while dtype, device and rank agree (automatic dynamic shapes).
  std::vector<uint64_t> changed_sizes(const detail::ValueList& inputs) const;
  bool check(const detail::ValueList& inputs) const;  // the hot path: no allocation
  // Why `inputs` fail these guards: "tensor 'x' size[0] changed 8 -> 16"; nullopt if they pass.
  std::optional<std::string> why_not(const detail::ValueList& inputs,
                                     const std::vector<std::string>& names) const;
  std::string str(const std::vector<std::string>& names) const;  // for COIL_LOGS=guards
  std::string captured_str() const;  // the captured tensors' lines of str()

 private:
  bool arg_matches(const ArgGuard& a, const detail::Value& v, int64_t* sizes) const;

  std::vector<ArgGuard> args_;
  int num_symbols_ = 0;
  std::vector<std::string> sources_;  // each symbol's ("x.size(0)"), for str()
  std::vector<SymGuard> relations_;
  std::vector<CapturedGuard> captured_;
  // Grad mode at capture: a graph captured for training returns results that carry a
  // backward node, one captured under NoGradGuard does not (torch guards on it too).
  bool grad_mode_ = true;
  // Autocast at capture (graph/autocast.h): its casts are in the graph.
  uint32_t autocast_ = 0;
};

}  // namespace coil::capture
