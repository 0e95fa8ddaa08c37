#include "workloads.h"

#include <cmath>

namespace coil::bench {

namespace {

Device& current_device() {
  static Device d = kCPU;
  return d;
}

struct Precision {
  DType dtype = kFloat32;
  bool amp = false;
};
Precision& precision() {
  static Precision p;
  return p;
}

// An input made on the CPU, in the inputs' dtype, on the bench device.
Tensor bench_input(const Tensor& t) {
  return t.to(bench_amp() ? kFloat32 : bench_dtype()).to(bench_device());
}

std::vector<Tensor> randn_all(const std::vector<Shape>& shapes) {
  std::vector<Tensor> out;
  for (const Shape& s : shapes) out.push_back(bench_input(randn(s)));
  return out;
}

// `p` under autocast where --amp asked for it.
Program with_precision(Program p) {
  if (!bench_amp()) return p;
  return [p](const std::vector<Tensor>& in) {
    autocast guard(bench_device().type, bench_dtype());
    return p(in);
  };
}

// One Adam step of Linear -> GELU -> Linear -> LayerNorm with loss mean(y^2): all eager, or
// compiled (a joint graph partitioned into a compiled forward and backward, and Adam's step as
// one combo kernel). The model's initial weights are the same in both programs.
Program train_mlp_step(bool compiled, bool gpu) {
  const int64_t d = gpu ? 1024 : 256;
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Linear>(d, 4 * d));
  model->push_back(std::make_shared<nn::GELU>());
  model->push_back(std::make_shared<nn::Linear>(4 * d, d));
  model->push_back(std::make_shared<nn::LayerNorm>(d));
  model->to(bench_device());
  if (!bench_amp()) model->to(bench_dtype());
  auto opt =
      std::make_shared<optim::Adam>(model->parameters(), optim::AdamOptions{.compiled = compiled});
  auto loss_of = [model](const Tensor& x) {
    Tensor y = model->forward(x);
    return mean(y * y);
  };
  std::function<Tensor(const Tensor&)> loss = loss_of;  // and Adam: eager, or compiled
  if (compiled)
    loss = [cf = compile(loss_of, bench_options("train_mlp"))](const Tensor& x) { return cf(x); };
  return [model, opt, loss](const std::vector<Tensor>& a) {
    Tensor l = loss(a[0]);
    l.backward();
    opt->step();
    opt->zero_grad();
    return l;
  };
}

}  // namespace

bool& dynamic_shapes() {
  static bool dynamic = false;
  return dynamic;
}

void use_device(Device device) { current_device() = device; }
void use_dynamic_shapes(bool dynamic) { dynamic_shapes() = dynamic; }
std::string& compile_mode() {
  static std::string mode = "default";
  return mode;
}
void use_mode(const std::string& mode) { compile_mode() = mode; }
CompileOptions bench_options(const std::string& name) {
  CompileOptions o{.name = name};
  if (dynamic_shapes()) o.dynamic = true;
  o.mode = compile_mode();
  return o;
}
Device bench_device() { return current_device(); }
void use_precision(DType dtype, bool amp) { precision() = {dtype, amp}; }
DType bench_dtype() { return precision().dtype; }
bool bench_amp() { return precision().amp; }

Program Workload::eager(bool gpu) const { return with_precision(make ? make(false, gpu) : fn); }

Program Workload::compiled(bool gpu) const {
  if (make) return with_precision(make(true, gpu));
  auto cf = compile(fn, bench_options(name));
  return with_precision([cf](const std::vector<Tensor>& in) { return cf(in); });
}

std::vector<Workload> workloads() {
  std::vector<Workload> w;
  w.push_back({"sincos", "sin(x)**2 + cos(x)**2",
               [](bool gpu) { return randn_all({{gpu ? 16 << 20 : 4 << 20}}); },
               [](const std::vector<Tensor>& a) { return sin(a[0]).pow(2) + cos(a[0]).pow(2); }});
  w.push_back({"softmax", "softmax(x, dim=-1)",
               [](bool gpu) {
                 return randn_all({gpu ? Shape{8192, 4096} : Shape{2048, 2048}});
               },
               [](const std::vector<Tensor>& a) { return softmax(a[0], -1); }});
  w.push_back({"mm_softmax", "softmax(a @ b, dim=1)",
               [](bool gpu) {
                 int64_t n = gpu ? 2048 : 512;
                 return randn_all({{n, n}, {n, n}});
               },
               [](const std::vector<Tensor>& a) { return softmax(matmul(a[0], a[1]), 1); }});
  w.back().matmul_bound = true;
  w.push_back({"layernorm_gelu", "gelu(layer_norm(x, [D], w, b))",
               [](bool gpu) {
                 int64_t n = gpu ? 8192 : 2048, d = gpu ? 1024 : 512;
                 return randn_all({{n, d}, {d}, {d}});
               },
               [](const std::vector<Tensor>& a) {
                 return gelu(layer_norm(a[0], {a[0].size(1)}, a[1], a[2]));
               }});
  w.push_back({"mlp", "linear(gelu(linear(x, w1, b1)), w2, b2), hidden 4*D",
               [](bool gpu) {
                 int64_t n = gpu ? 8192 : 2048, d = gpu ? 1024 : 512;
                 return randn_all({{n, d}, {4 * d, d}, {4 * d}, {d, 4 * d}, {d}});
               },
               [](const std::vector<Tensor>& a) {
                 return linear(gelu(linear(a[0], a[1], a[2])), a[3], a[4]);
               }});
  w.back().matmul_bound = true;
  w.push_back({"attention", "softmax(q @ k^T * d^-1/2) @ v",
               [](bool gpu) {
                 Shape s = gpu ? Shape{8, 12, 1024, 64} : Shape{2, 4, 256, 64};
                 return randn_all({s, s, s});
               },
               [](const std::vector<Tensor>& a) {
                 double scale = 1.0 / std::sqrt(static_cast<double>(a[0].size(-1)));
                 return matmul(softmax(matmul(a[0], a[1].transpose(-2, -1)) * scale, -1), a[2]);
               }});
  w.back().matmul_bound = true;
  w.push_back({"bn_relu", "relu(batch_norm(x, mean, var, w, b)) (inference)",
               [](bool gpu) {
                 Shape s = gpu ? Shape{32, 64, 56, 56} : Shape{8, 32, 56, 56};
                 std::vector<Tensor> in = randn_all({s, {s[1]}});
                 in.push_back(bench_input(rand({s[1]}) + 0.5));
                 for (int i = 0; i < 2; ++i) in.push_back(bench_input(randn({s[1]})));
                 return in;
               },
               [](const std::vector<Tensor>& a) {
                 return relu(batch_norm(a[0], a[3], a[4], a[1], a[2], false));
               }});
  w.push_back(
      {"instance_norm", "(x - mean(x,(2,3))) / sqrt(var(x,(2,3)) + 1e-5)",
       [](bool gpu) {
         return randn_all({gpu ? Shape{32, 64, 56, 56} : Shape{8, 32, 56, 56}});
       },
       [](const std::vector<Tensor>& a) {
         return (a[0] - mean(a[0], {2, 3}, true)) / sqrt(var(a[0], {2, 3}, 1.0, true) + 1e-5);
       }});
  // A few long rows (issue 22's split reductions: one block per row would leave most of a GPU
  // idle).
  w.push_back({"long_rows_sum", "sum(x, dim=1), 8 rows",
               [](bool gpu) {
                 return randn_all({{8, gpu ? 4 << 20 : 1 << 20}});
               },
               [](const std::vector<Tensor>& a) { return sum(a[0], {1}); }});
  // Issue 24's convolution block (a model-shaped workload, not one of TARGETS.md's nine).
  w.push_back({"conv_block", "relu(batch_norm(conv2d(x, w, padding=1), ...)) (inference)",
               [](bool gpu) {
                 Shape s = gpu ? Shape{32, 64, 56, 56} : Shape{8, 64, 56, 56};
                 std::vector<Tensor> in = randn_all({s, {64, 64, 3, 3}, {64}, {64}, {64}});
                 in.push_back(bench_input(rand({64}) + 0.5));
                 return in;
               },
               [](const std::vector<Tensor>& a) {
                 return relu(batch_norm(conv2d(a[0], a[1], {}, {1, 1}, {1, 1}), a[4], a[5], a[2],
                                        a[3], false));
               }});
  w.push_back({"train_mlp", "one Adam step of Linear->GELU->Linear->LayerNorm, loss = mean(y^2)",
               [](bool gpu) {
                 return randn_all({gpu ? Shape{4096, 1024} : Shape{512, 256}});
               },
               nullptr, true, train_mlp_step});
  return w;
}

std::vector<Product> workload_products(const std::string& name, const std::vector<Tensor>& in) {
  if (name == "mm_softmax") return {{1, in[0].size(0), in[1].size(1), in[0].size(1)}};
  if (name == "mlp") {
    int64_t n = in[0].size(0), d = in[0].size(1), h = in[1].size(0);
    return {{1, n, h, d}, {1, n, d, h}};
  }
  if (name == "train_mlp") {  // the forward's two products, and two per linear backward
    int64_t n = in[0].size(0), d = in[0].size(1), h = 4 * d;
    return {{1, n, h, d}, {1, n, d, h}, {1, n, h, d}, {1, d, h, n}, {1, n, d, h}, {1, h, d, n}};
  }
  if (name == "attention") {
    int64_t b = in[0].size(0) * in[0].size(1), s = in[0].size(2), d = in[0].size(3);
    return {{b, s, s, d}, {b, s, d, s}};
  }
  return {};
}

}  // namespace coil::bench
