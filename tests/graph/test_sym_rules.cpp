// The symbolic shape rules (graph/sym_rules.h) against the meta functions: every op example in
// a dynamic graph (each input dim of size >= 2 a symbol of its own) must give, evaluated at
// the hints, exactly the meta function's layout (sym_layouts checks that as it builds), and,
// evaluated at other sizes that pass the guards, the meta function's layout for those sizes.
#include <gtest/gtest.h>

#include "graph/op_examples.h"
#include "graph/interpreter.h"
#include "graph/parser.h"
#include "graph/printer.h"
#include "graph/sym_rules.h"
#include "testing.h"

namespace coil {
namespace {

using testing::ExampleArg;
using testing::In;
using testing::Ins;
using testing::OpExample;

// A placeholder whose dims of size >= 2 are symbols of their own (contiguous strides).
Node* dynamic_input(Graph& g, const std::string& name, const TensorMeta& m) {
  ShapeEnv& env = *g.shape_env();
  SymShape sizes;
  for (size_t d = 0; d < m.sizes.size(); ++d)
    sizes.push_back(m.sizes[d] >= 2
                        ? env.create_symbol(m.sizes[d], name + ".size(" + std::to_string(d) + ")")
                        : sym::constant(m.sizes[d]));
  return g.placeholder(name, m, SymLayout::contiguous(sizes));
}

struct DynamicExample {
  Graph g;
  Node* call = nullptr;
};

DynamicExample dynamic_example(const OpExample& ex) {
  DynamicExample d;
  d.g.set_shape_env(std::make_shared<ShapeEnv>());
  auto input = [&](const char* name) {
    if (Node* n = d.g.find(name)) return n;
    const testing::ExampleInput& in = testing::example_inputs().at(name);
    return dynamic_input(d.g, name, ops::contiguous_meta(in.dtype, in.sizes));
  };
  std::vector<NodeArg> args;
  for (const ExampleArg& a : ex.args) {
    if (auto* i = std::get_if<In>(&a)) args.push_back(input(i->name));
    if (auto* l = std::get_if<Ins>(&a)) {
      std::vector<Node*> nodes;
      for (const char* name : l->names) nodes.push_back(input(name));
      args.push_back(nodes);
    }
    if (auto* v = std::get_if<Arg>(&a)) args.push_back(to_node_arg(*v));
  }
  d.call = d.g.call(*find_op(ex.op), args);
  return d;
}

Shape evaluate_all(const SymShape& s, const std::unordered_map<sym::Expr, int64_t>& values) {
  Shape out;
  for (sym::Expr e : s) out.push_back(sym::evaluate(e, values));
  return out;
}

TEST(SymRules, EveryOpExampleAgreesWithItsMetaAtTheHints) {
  int symbolic = 0, total = 0;
  std::string specialised;
  for (const OpExample& ex : testing::op_examples()) {
    SCOPED_TRACE(ex.op);
    DynamicExample d = dynamic_example(ex);  // sym_layouts checks against the metas
    ++total;
    bool any = false;
    for (size_t i = 0; i < d.call->meta().size(); ++i) any |= !d.call->sym_layout(i).is_static();
    bool inputs_symbolic = false;
    for (Node* in : d.call->inputs())
      inputs_symbolic |= !in->sym_layout(0, /*as_made=*/true).is_static();
    if (any)
      ++symbolic;
    else if (inputs_symbolic)
      specialised += std::string(" ") + ex.op;
  }
  // Outputs that lose their inputs' symbols do so because the example asks for a shape of
  // numbers (a full reduction, a loss's mean, a view or expand to given sizes, as_strided).
  EXPECT_EQ(specialised,
            " sum sum amin argmin all cross_entropy nll_loss mse_loss view expand as_strided");
  EXPECT_GT(symbolic, total * 3 / 4);
}

TEST(SymRules, EveryOpExampleAgreesWithItsMetaAtOtherSizes) {
  int checked = 0;
  for (const OpExample& ex : testing::op_examples()) {
    SCOPED_TRACE(ex.op);
    DynamicExample d = dynamic_example(ex);
    const ShapeEnv& env = *d.g.shape_env();
    if (env.symbols().empty()) continue;
    // Every symbol doubled; skip the example when its guards rule that out.
    std::unordered_map<sym::Expr, int64_t> values;
    for (const ShapeEnv::Symbol& s : env.symbols()) values[s.var] = 2 * s.hint;
    bool passes = true;
    for (const SymGuard& g : env.guards()) passes &= g.holds(values);
    if (!passes) continue;
    std::vector<Arg> args;
    for (const NodeArg& a : d.call->args())
      args.push_back(to_arg(a, [&](const Node* n) {
        SymLayout l = n->sym_layout();
        TensorMeta m = n->tensor_meta();
        m.sizes = evaluate_all(l.sizes, values);
        m.strides = evaluate_all(l.strides, values);
        m.offset = sym::evaluate(l.offset, values);
        return meta_tensor(m);
      }));
    std::vector<TensorMeta> want = run_meta(d.call->op(), args);
    ASSERT_EQ(want.size(), d.call->meta().size());
    for (size_t i = 0; i < want.size(); ++i) {
      SymLayout l = d.call->sym_layout(i);
      EXPECT_EQ(evaluate_all(l.sizes, values), want[i].sizes) << sym_shape_str(l.sizes);
      EXPECT_EQ(evaluate_all(l.strides, values), want[i].strides) << sym_shape_str(l.strides);
      EXPECT_EQ(sym::evaluate(l.offset, values), want[i].offset) << sym::to_string(l.offset);
    }
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

// A dynamic graph built by hand: x [s0, s1], y [s2] with s2's hint equal to s1's.
struct Fixture {
  Graph g;
  ShapeEnv* env;
  Node *x, *y;
  Fixture() {
    g.set_shape_env(std::make_shared<ShapeEnv>());
    env = g.shape_env().get();
    sym::Expr s0 = env->create_symbol(8, "x.size(0)"), s1 = env->create_symbol(16, "x.size(1)"),
              s2 = env->create_symbol(16, "y.size(0)");
    x = g.placeholder("x", ops::contiguous_meta(kFloat32, {8, 16}),
                      SymLayout::contiguous({s0, s1}));
    y = g.placeholder("y", ops::contiguous_meta(kFloat32, {16}), SymLayout::contiguous({s2}));
  }
  std::string guards() const {
    std::string out;
    for (const SymGuard& gd : env->guards()) out += gd.str() + "\n";
    return out;
  }
  std::string sizes(const Node* n) const { return sym_shape_str(n->sym_layout().sizes); }
};

TEST(SymRules, BroadcastingUnifiesEqualSizes) {
  Fixture f;
  Node* add = f.g.call(OpId::add, {f.x, f.y});
  EXPECT_EQ(f.sizes(add), "[s0, s1]");
  EXPECT_EQ(f.guards(), "s2 == s1  (add)\n");
  EXPECT_EQ(sym::to_string(f.env->simplify(f.y->sym_layout().sizes[0])), "s1");
}

TEST(SymRules, ViewsOverSymbols) {
  Fixture f;
  Node* flat = f.g.call(OpId::view, {f.x, Shape{-1}});
  EXPECT_EQ(f.sizes(flat), "[s0*s1]");
  Node* t = f.g.call(OpId::transpose, {f.x, int64_t{0}, int64_t{1}});
  EXPECT_EQ(sym_shape_str(t->sym_layout().strides), "[1, s1]");
  Node* back = f.g.call(OpId::reshape, {t, Shape{-1}});  // not viewable: a copy
  EXPECT_EQ(sym_shape_str(back->sym_layout().strides), "[1]");
  Node* rows = f.g.call(OpId::view, {f.x, Shape{2, -1}});  // s0*s1 // 2 elements a row
  EXPECT_EQ(f.sizes(rows), "[2, (s0*s1) // 2]");
  EXPECT_NE(f.guards().find("2*((s0*s1) // 2) == s0*s1  (view)\n"), std::string::npos);
  Node* last = f.g.call(OpId::select, {f.x, int64_t{0}, int64_t{-1}});
  EXPECT_EQ(sym::to_string(last->sym_layout().offset), "-s1 + s0*s1");
  Node* head = f.g.call(OpId::slice, {f.x, int64_t{1}, std::monostate{}, int64_t{4}, int64_t{1}});
  EXPECT_EQ(f.sizes(head), "[s0, 4]");
  EXPECT_NE(f.guards().find("4 <= s1  (slice)"), std::string::npos) << f.guards();
}

TEST(SymRules, ProductsGuardTheirInnerSizes) {
  Fixture f;
  ShapeEnv& env = *f.env;
  sym::Expr k = env.create_symbol(16, "w.size(0)"), n = env.create_symbol(4, "w.size(1)");
  Node* w =
      f.g.placeholder("w", ops::contiguous_meta(kFloat32, {16, 4}), SymLayout::contiguous({k, n}));
  Node* mm = f.g.call(OpId::mm, {f.x, w});
  EXPECT_EQ(f.sizes(mm), "[s0, s4]");
  EXPECT_EQ(f.guards(), "s3 == s1  (mm)\n");
}

TEST(SymRules, OpsWithoutARuleSpecialiseTheirInputs) {
  Fixture f;
  Node* flat = f.g.call(OpId::split, {f.x, int64_t{4}, int64_t{0}});  // pieces counted by s0
  EXPECT_EQ(f.guards(), "s0 == 8  (split: a size it needs as a number)\n");
  EXPECT_EQ(flat->meta().size(), 2u);
  EXPECT_EQ(sym_shape_str(f.g.getitem(flat, 1)->sym_layout().sizes), "[4, s1]");
}

TEST(SymRules, DynamicGraphsPrintTheirSymbolsAndHints) {
  Fixture f;
  Node* r = f.g.call(OpId::relu, {f.x});
  f.g.output({r});
  EXPECT_EQ(print_graph(f.g),
            "# hints: s0=8 s1=16 s2=16\n"
            "def forward(self, x: \"f32[s0, s1][s1, 1]cpu\", y: \"f32[s2][1]cpu\"):\n"
            "    relu: \"f32[s0, s1][s1, 1]cpu\" = coil.relu(x)\n"
            "    return (relu,)\n");
  EXPECT_EQ(print_graph(f.g, false).substr(0, 4), "def ");
}

TEST(SymRules, RewritesMustKeepSymbolicSizes) {
  Fixture f;
  Node* r = f.g.call(OpId::relu, {f.x});
  Node* fixed = f.g.call(OpId::full, {Shape{8, 16}, Scalar(0.0)});  // the hints, baked in
  f.g.output({r});
  EXPECT_THROW(f.g.replace_all_uses_with(r, fixed), InternalError);
}

// The printed text of a dynamic graph reads back (hints, symbolic annotations and int
// arguments) into a graph that prints the same and runs at other sizes.
TEST(SymRules, DynamicGraphsReadBack) {
  Fixture f;
  Node* sum = f.g.call(OpId::add, {f.x, f.y});
  Node* flat = f.g.call(
      OpId::view, {sum, SymIntsArg{{128}, {f.env->symbols()[0].var * f.env->symbols()[1].var}}});
  Node* rows = f.g.call(OpId::sum, {f.g.call(OpId::relu, {sum}), Shape{1}});
  f.g.output({flat, rows});
  const std::string text = print_graph(f.g);
  Graph back = parse_graph(text);
  EXPECT_EQ(print_graph(back), text);
  EXPECT_TRUE(back.is_dynamic());
  Tensor x = testing::random({5, 3}), y = testing::random({3});
  std::vector<Tensor> got = interpret(back, {x, y});
  EXPECT_TRUE(allclose(got[0], (x + y).reshape({-1})));
  EXPECT_TRUE(allclose(got[1], relu(x + y).sum({1})));
  EXPECT_COIL_ERROR(parse_graph("# hints: s0=1\ndef forward(self, x: \"f32[s0][1]cpu\"):\n"
                                "    return (x,)\n"),
                    "2 or more");
  EXPECT_COIL_ERROR(parse_graph("# hints: s0=4\ndef forward(self, x: \"f32[s7][1]cpu\"):\n"
                                "    return (x,)\n"),
                    "s7");
}

}  // namespace
}  // namespace coil
