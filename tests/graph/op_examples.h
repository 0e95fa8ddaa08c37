// One or more example calls for every op in op_list.def, as graphs: the round-trip and
// interpreter tests run each of them. Ops whose meta function is still a COIL_PENDING stub are
// skipped until someone implements them; an op with no example here fails the coverage test.
#pragma once

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "graph/graph.h"
#include "ops/meta_util.h"
#include "testing.h"

namespace coil::testing {

// The inputs an example may use, by name: random values in [lo, hi).
struct ExampleInput {
  DType dtype;
  Shape sizes;
  double lo = -2, hi = 2;
};
inline const std::map<std::string, ExampleInput>& example_inputs() {
  static const std::map<std::string, ExampleInput> m = {
      {"x", {kFloat32, {4, 6}}},
      {"y", {kFloat32, {6}}},
      {"p", {kFloat32, {4, 6}, 0.5, 2}},  // positive: log, sqrt, pow bases, divisors
      {"mask", {kBool, {4, 6}, 0, 2}},
      {"ix", {kInt64, {4, 6}, 0, 4}},  // index values valid along either dim of x
      {"idx", {kInt64, {5}, 0, 4}},
      {"tgt", {kInt64, {4}, 0, 6}},  // class ids for 6 classes
      {"u", {kFloat32, {4, 1, 6}}},
      {"m", {kFloat32, {6, 5}}},
      {"lw", {kFloat32, {5, 6}}},
      {"v5", {kFloat32, {5}}},
      {"b3", {kFloat32, {2, 4, 6}}},
      {"b3r", {kFloat32, {2, 6, 3}}},
      {"img", {kFloat32, {2, 3, 8, 8}}},
      {"img_g", {kFloat32, {2, 3, 4, 4}}},   // gradients of img pooled to 4 x 4
      {"conv_g", {kFloat32, {2, 4, 8, 8}}},  // the gradient of conv2d's example below
      {"img_g3", {kFloat32, {2, 3, 3, 3}}},  // and to 3 x 3
      {"img_dx", {kFloat32, {2, 3, 8, 8}}},  // a gradient shaped as img
      {"w", {kFloat32, {4, 3, 3, 3}}},
      {"v4", {kFloat32, {4}}},
      {"c3", {kFloat32, {3}}},
      {"c3p", {kFloat32, {3}, 0.5, 2}},
      {"q", {kFloat32, {2, 3, 5, 8}}},
  };
  return m;
}

struct In {
  const char* name;
};
struct Ins {
  std::vector<const char*> names;
};
using ExampleArg = std::variant<In, Ins, Arg>;

struct OpExample {
  const char* op;
  std::vector<ExampleArg> args;
  bool random = false;  // results differ from run to run: compare only their meta
};

inline Arg I(int64_t v) { return v; }
inline Arg F(double v) { return v; }
inline Arg S(Scalar v) { return v; }
inline Arg B(bool v) { return v; }
inline Arg L(Shape v) { return v; }
inline Arg Str(const char* v) { return std::string(v); }
inline Arg D(DType v) { return v; }
inline Arg Dev(const char* v) { return Device(v); }
inline Arg None() { return {}; }

inline const std::vector<OpExample>& op_examples() {
  static const std::vector<OpExample> v = {
      // unary pointwise
      {"neg", {In{"x"}}},
      {"abs", {In{"x"}}},
      {"sign", {In{"x"}}},
      {"exp", {In{"x"}}},
      {"exp2", {In{"x"}}},
      {"expm1", {In{"x"}}},
      {"log", {In{"p"}}},
      {"log2", {In{"p"}}},
      {"log1p", {In{"p"}}},
      {"sqrt", {In{"p"}}},
      {"rsqrt", {In{"p"}}},
      {"reciprocal", {In{"p"}}},
      {"sin", {In{"x"}}},
      {"cos", {In{"x"}}},
      {"tan", {In{"x"}}},
      {"tanh", {In{"x"}}},
      {"sigmoid", {In{"x"}}},
      {"relu", {In{"x"}}},
      {"gelu", {In{"x"}}},
      {"gelu", {In{"x"}, Str("tanh")}},
      {"silu", {In{"x"}}},
      {"erf", {In{"x"}}},
      {"floor", {In{"x"}}},
      {"ceil", {In{"x"}}},
      {"round", {In{"x"}}},
      {"trunc", {In{"x"}}},
      {"logical_not", {In{"mask"}}},
      {"isnan", {In{"x"}}},
      {"isinf", {In{"x"}}},
      {"to_dtype", {In{"x"}, D(kFloat64)}},
      {"clone", {In{"x"}}},
      {"contiguous", {In{"x"}}},
      {"to_device", {In{"x"}, Dev("cpu")}},  // the GPU's copies: tests/cuda/
      // binary and ternary pointwise
      {"add", {In{"x"}, In{"y"}}},
      {"add", {In{"x"}, S(2)}},
      {"sub", {In{"x"}, In{"y"}}},
      {"mul", {In{"x"}, S(0.5)}},
      {"div", {In{"x"}, In{"p"}}},
      {"div", {In{"x"}, In{"p"}, Str("floor")}},
      {"pow", {In{"p"}, In{"y"}}},
      {"remainder", {In{"x"}, In{"p"}}},
      {"maximum", {In{"x"}, In{"y"}}},
      {"minimum", {In{"x"}, In{"y"}}},
      {"atan2", {In{"x"}, In{"y"}}},
      {"eq", {In{"x"}, In{"y"}}},
      {"ne", {In{"x"}, In{"y"}}},
      {"lt", {In{"x"}, In{"y"}}},
      {"le", {In{"x"}, S(0)}},
      {"gt", {In{"x"}, In{"y"}}},
      {"ge", {In{"x"}, In{"y"}}},
      {"logical_and", {In{"mask"}, In{"mask"}}},
      {"logical_or", {In{"mask"}, In{"x"}}},
      {"where", {In{"mask"}, In{"x"}, In{"y"}}},
      {"clamp", {In{"x"}, S(-1), S(1)}},
      {"clamp", {In{"x"}, None(), S(0.5)}},
      // reductions and scans
      {"sum", {In{"x"}, L({0, 1})}},
      {"sum", {In{"x"}, L({1}), B(true), D(kFloat64)}},
      {"sum", {In{"x"}, L({}), B(false), D(kFloat64)}},
      {"mean", {In{"x"}, L({1})}},
      {"prod", {In{"x"}, L({0})}},
      {"amax", {In{"x"}, L({1}), B(true)}},
      {"amin", {In{"x"}}},
      {"argmax", {In{"x"}, I(1)}},
      {"argmin", {In{"x"}}},
      {"var", {In{"x"}, L({1}), F(0)}},
      {"std", {In{"x"}, L({0})}},
      {"logsumexp", {In{"x"}, L({1})}},
      {"any", {In{"mask"}, L({1})}},
      {"all", {In{"mask"}}},
      {"cumsum", {In{"x"}, I(1)}},
      // neural-network ops
      {"softmax", {In{"x"}, I(1)}},
      {"log_softmax", {In{"x"}, I(-1)}},
      {"layer_norm", {In{"x"}, L({6}), In{"y"}, In{"y"}}},
      {"layer_norm", {In{"x"}, L({6}), None(), In{"y"}}},
      {"rms_norm", {In{"x"}, L({6}), In{"y"}}},
      {"batch_norm", {In{"img"}, In{"c3"}, In{"c3"}, In{"c3"}, In{"c3p"}, B(false)}},
      {"group_norm", {In{"img"}, I(3), In{"c3"}, In{"c3"}}},
      {"linear", {In{"x"}, In{"lw"}, In{"v5"}}},
      {"matmul", {In{"x"}, In{"m"}}},
      {"mm", {In{"x"}, In{"m"}}},
      {"bmm", {In{"b3"}, In{"b3r"}}},
      {"addmm", {In{"v5"}, In{"x"}, In{"m"}}},
      {"addmm_relu", {In{"v5"}, In{"x"}, In{"m"}}},
      {"conv2d", {In{"img"}, In{"w"}, In{"v4"}, L({1, 1}), L({1, 1})}},
      {"conv2d_input_backward", {In{"conv_g"}, In{"img"}, In{"w"}, L({1, 1}), L({1, 1})}},
      {"conv2d_weight_backward", {In{"conv_g"}, In{"img"}, In{"w"}, L({1, 1}), L({1, 1})}},
      {"max_pool2d", {In{"img"}, L({2, 2})}},
      {"avg_pool2d", {In{"img"}, L({3, 3}), L({2, 2}), L({1, 1})}},
      {"adaptive_avg_pool2d", {In{"img"}, L({3, 3})}},
      {"max_pool2d_backward", {In{"img_g"}, In{"img"}, L({2, 2})}},
      {"avg_pool2d_backward", {In{"img_g"}, In{"img"}, L({3, 3}), L({2, 2}), L({1, 1})}},
      {"adaptive_avg_pool2d_backward", {In{"img_g3"}, In{"img"}}},
      {"max_pool2d_double_backward", {In{"img_dx"}, In{"img"}, L({3, 3}), L({2, 2}), L({1, 1})}},
      {"embedding", {In{"x"}, In{"idx"}}},
      {"dropout", {In{"x"}, F(0.5), B(false)}},
      {"dropout", {In{"x"}, F(0.5), B(true)}, true},
      {"cross_entropy", {In{"x"}, In{"tgt"}}},
      {"nll_loss", {In{"x"}, In{"tgt"}}},
      {"mse_loss", {In{"x"}, In{"p"}, Str("sum")}},
      {"scaled_dot_product_attention", {In{"q"}, In{"q"}, In{"q"}, None(), F(0), B(true)}},
      {"scaled_dot_product_attention_backward",
       {In{"q"}, In{"q"}, In{"q"}, In{"q"}, In{"q"}, B(true)}},
      {"scaled_dot_product_attention_stats", {In{"q"}, In{"q"}, In{"q"}, B(true)}},
      // shape and indexing
      {"cat", {Ins{{"x", "p"}}, I(1)}},
      {"stack", {Ins{{"x", "p"}}}},
      {"split", {In{"x"}, I(4), I(1)}},
      {"split_with_sizes", {In{"x"}, L({2, 4}), I(1)}},
      {"chunk", {In{"x"}, I(2)}},
      {"gather", {In{"x"}, I(1), In{"ix"}}},
      {"index_select", {In{"x"}, I(1), In{"idx"}}},
      {"scatter_add", {In{"x"}, I(1), In{"ix"}, In{"p"}}},
      {"pad", {In{"x"}, L({1, 2})}},
      {"pad", {In{"x"}, L({1, 1, 2, 0}), Str("constant"), F(1.5)}},
      {"repeat", {In{"y"}, L({2, 3})}},
      {"flip", {In{"x"}, L({0})}},
      {"tril", {In{"x"}}},
      {"triu", {In{"x"}, I(1)}},
      // views
      {"view", {In{"x"}, L({6, 4})}},
      {"reshape", {In{"x"}, L({-1})}},
      {"permute", {In{"img"}, L({0, 2, 3, 1})}},
      {"transpose", {In{"x"}, I(0), I(1)}},
      {"t", {In{"x"}}},
      {"expand", {In{"y"}, L({3, 6})}},
      {"squeeze", {In{"u"}}},
      {"squeeze", {In{"u"}, L({1})}},
      {"unsqueeze", {In{"x"}, I(0)}},
      {"slice", {In{"x"}, I(1), I(1), I(5), I(2)}},
      {"slice", {In{"x"}, I(0), None(), None(), I(2)}},
      {"narrow", {In{"x"}, I(1), I(2), I(3)}},
      {"select", {In{"x"}, I(0), I(2)}},
      {"flatten", {In{"img"}, I(1)}},
      {"unflatten", {In{"x"}, I(1), L({2, 3})}},
      {"as_strided", {In{"x"}, L({3, 3}), L({6, 1}), I(2)}},
      // factories
      {"full", {L({2, 3}), S(1.5)}},
      {"full", {L({2}), S(7), D(kInt32)}},
      {"arange", {S(0), S(10), S(3)}},
      {"linspace", {S(0.0), S(1.0), I(5)}},
      {"eye", {I(3), I(4)}},
      {"rand", {L({2, 3})}, true},
      {"randn", {L({2, 3})}, true},
      {"randint", {I(0), I(10), L({4})}, true},
  };
  return v;
}

// Adds one example call to `g`: a placeholder per input it uses (shared with earlier
// examples of the same input), the call, and a getitem per output of a multi-output op.
// Returns the example's results.
inline std::vector<Node*> add_example(Graph& g, const OpExample& ex) {
  std::vector<NodeArg> args;
  auto input = [&](const char* name) {
    if (Node* n = g.find(name)) return n;
    const ExampleInput& in = example_inputs().at(name);
    return g.placeholder(name, ops::contiguous_meta(in.dtype, in.sizes));
  };
  for (const ExampleArg& a : ex.args) {
    if (auto* i = std::get_if<In>(&a)) args.push_back(input(i->name));
    if (auto* l = std::get_if<Ins>(&a)) {
      std::vector<Node*> nodes;
      for (const char* name : l->names) nodes.push_back(input(name));
      args.push_back(nodes);
    }
    if (auto* v = std::get_if<Arg>(&a)) args.push_back(to_node_arg(*v));
  }
  Node* call = g.call(*find_op(ex.op), args);
  std::vector<Node*> results;
  if (call->is_multi_output()) {
    for (size_t i = 0; i < call->meta().size(); ++i)
      results.push_back(g.getitem(call, static_cast<int64_t>(i)));
  } else {
    results.push_back(call);
  }
  return results;
}

// A graph of one example call, returning its results.
inline Graph example_graph(const OpExample& ex) {
  Graph g;
  g.output(add_example(g, ex));
  return g;
}

// The example's arguments with its named inputs bound to `values`.
inline std::vector<Arg> example_args(const OpExample& ex,
                                     const std::map<std::string, Tensor>& values) {
  std::vector<Arg> args;
  for (const ExampleArg& a : ex.args) {
    if (auto* i = std::get_if<In>(&a)) args.push_back(values.at(i->name));
    if (auto* l = std::get_if<Ins>(&a)) {
      std::vector<Tensor> ts;
      for (const char* name : l->names) ts.push_back(values.at(name));
      args.push_back(ts);
    }
    if (auto* v = std::get_if<Arg>(&a)) args.push_back(*v);
  }
  return args;
}

// The names of the example's tensor inputs, in the order its arguments use them.
inline std::vector<std::string> example_input_names(const OpExample& ex) {
  std::vector<std::string> out;
  for (const ExampleArg& a : ex.args) {
    if (auto* i = std::get_if<In>(&a)) out.push_back(i->name);
    if (auto* l = std::get_if<Ins>(&a)) out.insert(out.end(), l->names.begin(), l->names.end());
  }
  return out;
}

// Random values for every example input (their value ranges keep every op well defined).
inline std::map<std::string, Tensor> example_values() {
  std::map<std::string, Tensor> out;
  for (const auto& [name, in] : example_inputs())
    out[name] = random(in.sizes, in.dtype, in.lo, in.hi);
  return out;
}

inline bool is_pending(const Error& e) {
  return std::string(e.what()).find("not implemented yet") != std::string::npos;
}

}  // namespace coil::testing
