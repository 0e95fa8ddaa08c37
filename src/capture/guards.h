// Guards: what a captured graph assumed about its inputs. A later call whose inputs satisfy
// them reuses the graph; one that does not gets a recompile, with the reason logged.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <coil/compile.h>

#include "graph/graph.h"

#include "runtime/tensor_impl.h"

namespace coil::capture {

struct TensorGuard {
  bool defined = false;
  DType dtype{};
  Device device;
  bool requires_grad = false;
  Shape sizes, strides;
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
  bool check(const detail::ValueList& inputs) const;  // the hot path: no allocation
  // Why `inputs` fail these guards: "tensor 'x' size[0] changed 8 -> 16"; nullopt if they pass.
  std::optional<std::string> why_not(const detail::ValueList& inputs,
                                     const std::vector<std::string>& names) const;
  std::string str(const std::vector<std::string>& names) const;  // for COIL_LOGS=guards
  std::string captured_str() const;  // the captured tensors' lines of str()

 private:
  std::vector<ArgGuard> args_;
  std::vector<CapturedGuard> captured_;
  // Grad mode at capture: a graph captured for training returns results that carry a
  // backward node, one captured under NoGradGuard does not (torch guards on it too).
  bool grad_mode_ = true;
};

}  // namespace coil::capture
