// Dynamic graphs through the compiler: a graph whose inputs have symbolic sizes compiles once
// and its code runs at every size that passes its guards, matching the interpreter at each.
#include "compile/compile_fx.h"
#include "graph/interpreter.h"
#include "ops/meta_util.h"
#include "testing.h"
#include "testing_stages.h"

using namespace coil;
using namespace coil::testing;

namespace {

// A placeholder whose dims of size >= 2 are new symbols (0 and 1 stay constants, as torch).
Node* dynamic_input(Graph& g, const std::string& name, const Shape& hint, DType dtype = kFloat32) {
  ShapeEnv& env = *g.shape_env();
  SymShape sizes;
  for (size_t d = 0; d < hint.size(); ++d)
    sizes.push_back(hint[d] >= 2
                        ? env.create_symbol(hint[d], name + ".size(" + std::to_string(d) + ")")
                        : sym::constant(hint[d]));
  return g.placeholder(name, ops::contiguous_meta(dtype, hint), SymLayout::contiguous(sizes));
}

// Each symbol's value when the free ones (neither replaced nor specialised) take `free`, in
// order; the rest follow from the env's replacements.
std::unordered_map<sym::Expr, int64_t> symbol_values(const ShapeEnv& env,
                                                     const std::vector<int64_t>& free) {
  std::unordered_map<sym::Expr, int64_t> values;
  size_t next = 0;
  for (const ShapeEnv::Symbol& s : env.symbols())
    if (!env.replacements().count(s.var)) values[s.var] = free.at(next++);
  for (const ShapeEnv::Symbol& s : env.symbols())
    if (env.replacements().count(s.var)) values[s.var] = sym::evaluate(env.simplify(s.var), values);
  return values;
}

// Random inputs for the graph's placeholders at the given symbol values.
std::vector<Tensor> inputs_at(const Graph& g, const std::unordered_map<sym::Expr, int64_t>& v) {
  std::vector<Tensor> out;
  for (const Node* p : g.placeholders()) {
    Shape sizes;
    for (sym::Expr e : p->sym_layout().sizes) sizes.push_back(sym::evaluate(e, v));
    const DType t = p->tensor_meta().dtype;
    out.push_back(is_floating(t) ? random(sizes, t) : random(sizes, t, 0, 2));
  }
  return out;
}

void expect_matches_interpreter(const Graph& g, const capture::CompiledGraph& cg,
                                const std::vector<int64_t>& free) {
  std::unordered_map<sym::Expr, int64_t> at = symbol_values(*g.shape_env(), free);
  for (const SymGuard& guard : g.shape_env()->guards())
    ASSERT_TRUE(guard.holds(at)) << guard.str() << ": pick sizes the graph accepts";
  std::vector<Tensor> in = inputs_at(g, at);
  std::vector<Tensor> got = cg.run(in), want = interpret(g, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    ASSERT_EQ(got[i].sizes(), want[i].sizes());
    expect_close(got[i], values(want[i]), want[i].sizes(), 1e-4, 1e-4);
  }
}

std::shared_ptr<Graph> dynamic_graph() {
  auto g = std::make_shared<Graph>();
  g->set_shape_env(std::make_shared<ShapeEnv>());
  return g;
}

}  // namespace

TEST(DynamicCompile, OneGraphServesEverySize) {
  std::shared_ptr<Graph> g = dynamic_graph();
  Node* x = dynamic_input(*g, "x", {8, 16});
  Node* b = dynamic_input(*g, "b", {16});
  Node* y = g->call(OpId::softmax, {g->call(OpId::add, {x, b}), int64_t{1}});  // rows
  Node* cols = g->call(OpId::sum, {g->call(OpId::mul, {y, x}), Shape{0}});     // columns
  Node* gram = g->call(OpId::mm, {g->call(OpId::transpose, {x, int64_t{0}, int64_t{1}}), x});
  Node* flat = g->call(OpId::relu, {g->call(OpId::view, {x, Shape{-1}})});
  Node* total = g->call(OpId::sum, {g->call(OpId::exp, {x})});  // a full reduction
  g->output({y, cols, gram, flat, total});
  EXPECT_TRUE(g->is_dynamic());
  capture::CompiledGraph cg = compile_fx(g, CompileOptions{}, "dynamic");
  for (std::vector<int64_t> free :
       {std::vector<int64_t>{8, 16}, {5, 33}, {37, 3}, {2, 2}, {300, 129}, {1000, 70}}) {
    SCOPED_TRACE("s0=" + std::to_string(free[0]) + " s1=" + std::to_string(free[1]));
    expect_matches_interpreter(*g, cg, free);
  }
}

TEST(DynamicCompile, NormsAndBroadcastsOverSymbols) {
  std::shared_ptr<Graph> g = dynamic_graph();
  Node* x = dynamic_input(*g, "x", {4, 6, 32});
  Node* w = dynamic_input(*g, "w", {32});
  Node* ln = g->call(OpId::layer_norm, {x, Shape{32}, w, w});
  Node* v = g->call(OpId::var, {x, Shape{0, 1}});
  Node* m = g->call(OpId::amax, {x, Shape{2}, true});
  Node* centred = g->call(OpId::sub, {x, m});
  Node* cat = g->call(OpId::cat, {std::vector<Node*>{x, centred}, int64_t{1}});
  g->output({ln, v, cat});
  capture::CompiledGraph cg = compile_fx(g, CompileOptions{}, "dynamic");
  for (std::vector<int64_t> free : {std::vector<int64_t>{4, 6}, {3, 11}, {17, 2}})
    expect_matches_interpreter(*g, cg, free);
}

// A full reduction over run-time sizes, large at the hints: split into 256 partials of n / 256
// elements, the n % 256 left over read by the final reduction after the partials (sizes that
// leave a tail, and ones smaller than the pieces).
TEST(DynamicCompile, FullReductionsSplitOverRunTimeSizes) {
  std::shared_ptr<Graph> g = dynamic_graph();
  Node* x = dynamic_input(*g, "x", {300, 200});
  Node* pos = g->call(OpId::gt, {x, Scalar(1.5)});
  g->output({g->call(OpId::sum, {x}), g->call(OpId::amax, {x}), g->call(OpId::amin, {x}),
             g->call(OpId::any, {pos}), g->call(OpId::all, {g->call(OpId::lt, {x, Scalar(5.0)})})});
  capture::CompiledGraph cg = compile_fx(g, CompileOptions{}, "dynamic");
  for (std::vector<int64_t> free :
       {std::vector<int64_t>{300, 200}, {1001, 333}, {17, 5}, {2, 2}, {257, 3}})
    expect_matches_interpreter(*g, cg, free);
}

// A full reduction over rows of a static length that the pieces divide (a loss over a batch of
// run-time size): each piece s0 elements long, no tail to read.
TEST(DynamicCompile, FullReductionsThePiecesDivideHaveNoTail) {
  std::shared_ptr<Graph> g = dynamic_graph();
  const sym::Expr rows = g->shape_env()->create_symbol(512, "x.size(0)");
  Node* x = g->placeholder("x", ops::contiguous_meta(kFloat32, {512, 256}),
                           SymLayout::contiguous({rows, sym::constant(256)}));
  g->output({g->call(OpId::sum, {g->call(OpId::mul, {x, x})})});
  schedule::Schedule s = testing_stages::lowered_and_scheduled(*g).schedule;
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(s.kernels[0].inner, SymShape{rows});  // 256 pieces of s0
  EXPECT_EQ(s.kernels[1].inner, sym_constants({256}));
  int loads = 0;  // the partials alone: x is not read again
  for (const schedule::KernelNode& n : s.kernels[1].nodes)
    ir::for_each_load(n.body, [&](const ir::ValueNode&) { ++loads; });
  EXPECT_EQ(loads, 1);
  capture::CompiledGraph cg = compile_fx(g, CompileOptions{}, "dynamic");
  for (std::vector<int64_t> free : {std::vector<int64_t>{512}, {3}, {1001}})
    expect_matches_interpreter(*g, cg, free);
}

// A few long rows at the hints: each row in 256 pieces and a tail, in two kernels as the static
// split (the partials, then each row's partials and tail); any sizes later (many short rows
// too) still reduce right.
TEST(DynamicCompile, FewLongRowsSplitOverRunTimeSizes) {
  std::shared_ptr<Graph> sums = dynamic_graph();
  Node* s = dynamic_input(*sums, "x", {4, 40000});
  sums->output({sums->call(OpId::sum, {s, Shape{1}})});
  EXPECT_EQ(testing_stages::lowered_and_scheduled(*sums).schedule.kernels.size(), 2u);
  std::shared_ptr<Graph> g = dynamic_graph();
  Node* x = dynamic_input(*g, "x", {4, 40000});
  g->output({g->call(OpId::sum, {x, Shape{1}}), g->call(OpId::amax, {x, Shape{1}})});
  capture::CompiledGraph cg = compile_fx(g, CompileOptions{}, "dynamic");
  for (std::vector<int64_t> free :
       {std::vector<int64_t>{4, 40000}, {3, 50001}, {5, 33333}, {2, 7}, {300, 257}})
    expect_matches_interpreter(*g, cg, free);
}

// Few columns over a run-time count of rows (a bias's gradient over a batch, a channels-last
// batch norm's statistics): the rows in pieces by the hints, the rows after the last piece read
// by the final reduction; at any count (fewer rows than pieces too) the sums are right. The
// values summed are small integers, whose float32 sums are exact in any order (a sum of 10^5
// random floats differs from eager's by more than the comparison's tolerance).
TEST(DynamicCompile, FewColumnsSplitOverRunTimeRows) {
  std::shared_ptr<Graph> g = dynamic_graph();
  const sym::Expr rows = g->shape_env()->create_symbol(25088, "x.size(0)");
  Node* in = g->placeholder("x", ops::contiguous_meta(kFloat32, {25088, 64}),
                            SymLayout::contiguous({rows, sym::constant(64)}));
  Node* x = g->call(OpId::round, {g->call(OpId::mul, {in, Scalar(8.0)})});
  g->output({g->call(OpId::sum, {x, Shape{0}}), g->call(OpId::var, {x, Shape{0}, 1.0, false})});
  schedule::Schedule s = testing_stages::lowered_and_scheduled(*g).schedule;
  int partials = 0;  // the sum's, and the variance's two passes'
  for (const schedule::Kernel& k : s.kernels)
    partials += !k.outer.empty() && k.outer[0] == sym::constant(32);
  EXPECT_GE(partials, 2);
  capture::CompiledGraph cg = compile_fx(g, CompileOptions{}, "dynamic");
  for (std::vector<int64_t> free : {std::vector<int64_t>{25088}, {25089}, {31}, {100003}})
    expect_matches_interpreter(*g, cg, free);
}

// A kernel over the same shape as its values (a key cache of run-time length grown by one
// token, a dim of size 1 in front) indexes them by its loop variables, not through a flat index
// divided by run-time sizes again: loads and stores step by one, and compute right.
TEST(DynamicCompile, KernelsIndexTheirOwnShapeWithoutDivisions) {
  std::shared_ptr<Graph> g = dynamic_graph();
  const sym::Expr t = g->shape_env()->create_symbol(80, "cache.size(2)");
  Node* cache = g->placeholder(
      "cache", ops::contiguous_meta(kFloat32, {1, 12, 80, 64}),
      SymLayout::contiguous({sym::constant(1), sym::constant(12), t, sym::constant(64)}));
  Node* token = g->placeholder("token", ops::contiguous_meta(kFloat32, {1, 12, 1, 64}));
  g->output({g->call(OpId::cat, {std::vector<Node*>{cache, token}, int64_t{2}})});
  schedule::Schedule s = testing_stages::lowered_and_scheduled(*g).schedule;
  for (const schedule::Kernel& k : s.kernels)
    for (const schedule::KernelNode& n : k.nodes) {
      const std::string store = sym::to_string(n.store_index);
      EXPECT_EQ(store.find('%'), std::string::npos) << store;
      EXPECT_EQ(store.find('/'), std::string::npos) << store;
    }
  capture::CompiledGraph cg = compile_fx(g, CompileOptions{}, "dynamic");
  for (std::vector<int64_t> free : {std::vector<int64_t>{80}, {2}, {513}})
    expect_matches_interpreter(*g, cg, free);
}

// A softmax over rows of run-time length keeps its exponentials in a stack array for rows up to
// the array's size, and recomputes them for longer rows: both versions of the row are right.
TEST(DynamicCompile, RowScratchServesShortRowsAndLongOnesRecompute) {
  std::shared_ptr<Graph> g = dynamic_graph();
  Node* x = dynamic_input(*g, "x", {4, 64});
  g->output({g->call(OpId::softmax, {x, int64_t{1}})});
  capture::CompiledGraph cg = compile_fx(g, CompileOptions{}, "dynamic");
  for (std::vector<int64_t> free :
       {std::vector<int64_t>{4, 64}, {3, 8192}, {2, 8193}, {2, 20000}, {5, 3}})
    expect_matches_interpreter(*g, cg, free);
}

// Strides that are symbols of their own (the GPU's eager calls on views): the wrapper reads them
// from the inputs at each call, and the kernels index with them. x is a slice of a wider matrix
// (row stride s2), y the transpose of a contiguous one (column stride s0).
TEST(DynamicCompile, StridesAreReadAtRunTime) {
  std::shared_ptr<Graph> g = dynamic_graph();
  ShapeEnv& env = *g->shape_env();
  sym::Expr rows = env.create_symbol(6, "x.size(0)"), cols = env.create_symbol(5, "x.size(1)");
  sym::Expr pitch = env.create_symbol(9, "x.stride(0)");
  Node* x = g->placeholder("x", TensorMeta{kFloat32, {6, 5}, {9, 1}, 0, kCPU},
                           SymLayout{{rows, cols}, {pitch, sym::constant(1)}, sym::constant(0)});
  Node* y = g->placeholder("y", TensorMeta{kFloat32, {6, 5}, {1, 6}, 0, kCPU},
                           SymLayout{{rows, cols}, {sym::constant(1), rows}, sym::constant(0)});
  Node* sum = g->call(OpId::add, {g->call(OpId::sin, {x}), y});
  g->output({g->call(OpId::softmax, {sum, int64_t{1}}), g->call(OpId::sum, {y, Shape{0}})});
  capture::CompiledGraph cg = compile_fx(g, CompileOptions{}, "strided");
  for (auto [r, c, p] : {std::tuple{6, 5, 9}, {3, 17, 20}, {40, 2, 7}, {2, 33, 33}}) {
    SCOPED_TRACE(std::to_string(r) + " x " + std::to_string(c) + ", pitch " + std::to_string(p));
    Tensor xs = random({r, p}).as_strided({r, c}, {p, 1}, 0);
    Tensor ys = random({c, r}).transpose(0, 1);
    std::vector<Tensor> got = cg.run({xs, ys});
    expect_close(got[0], values(softmax(xs.contiguous().sin() + ys.contiguous(), 1)), {r, c}, 1e-5,
                 1e-6);
    expect_close(got[1], values(ys.contiguous().sum({0})), {c}, 1e-5, 1e-5);
  }
}
