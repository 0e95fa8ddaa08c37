// Reverse-mode automatic differentiation, as torch.autograd.
//
//   Tensor w = coil::randn({4, 3}).requires_grad_();
//   Tensor loss = coil::matmul(x, w).relu().sum();
//   loss.backward();             // w.grad() now holds d loss / d w
//
// Every op call on a tensor that requires grad (while grad mode is on) records a node that
// knows the op's derivative rule (src/autograd/derivatives*.cpp, one rule per registry op);
// backward() walks those nodes from the output back to the leaves and accumulates .grad().
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <coil/tensor.h>

namespace coil {

// Grad mode is per thread and on by default. With it off, ops record nothing (inference,
// optimizer steps).
bool grad_mode_enabled();
void set_grad_mode(bool enabled);

// RAII: grad mode off in this scope (torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(grad_mode_enabled()) { set_grad_mode(false); }
  ~NoGradGuard() { set_grad_mode(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

// RAII: grad mode on in this scope (torch.enable_grad()).
class EnableGradGuard {
 public:
  EnableGradGuard() : prev_(grad_mode_enabled()) { set_grad_mode(true); }
  ~EnableGradGuard() { set_grad_mode(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

namespace autograd {

// Accumulates d outputs / d leaf into each leaf's .grad() (torch.autograd.backward).
// `grad_outputs` may be empty when every output has one element (the gradient is then 1).
// Without retain_graph the graph's saved tensors are freed, and a second backward through it
// is an error. With create_graph the backward ops are themselves recorded (higher-order
// gradients).
void backward(const std::vector<Tensor>& outputs, const std::vector<Tensor>& grad_outputs = {},
              bool retain_graph = false, bool create_graph = false);

// Returns d outputs / d inputs without touching any .grad() (torch.autograd.grad). An input
// the outputs do not depend on is an error unless allow_unused (then its gradient is
// undefined).
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool create_graph = false, bool allow_unused = false);

// Clears (set_to_none) or zeroes the .grad() of each tensor: what Module::zero_grad and
// Optimizer::zero_grad do.
void zero_grad(const std::vector<Tensor>& tensors, bool set_to_none = true);

// The name of the node that made `t` ("MulBackward", "AccumulateGrad", ...), or "" for a
// tensor outside any graph.
std::string grad_fn_name(const Tensor& t);

}  // namespace autograd

// Checks analytical gradients against central finite differences in float64, as
// torch.autograd.gradcheck. `inputs` are converted to float64 copies that require grad; `fn`
// must be deterministic. Returns true, or throws coil::Error naming the output, the input,
// the element and both values of the first mismatch.
struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
};
bool gradcheck(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
               const std::vector<Tensor>& inputs, GradcheckOptions options = {});

}  // namespace coil
