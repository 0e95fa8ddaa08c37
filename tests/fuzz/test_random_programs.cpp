// Random programs (pointwise chains with broadcasting, views, reductions, softmax, matmul,
// index_select, gather and one-hot-like comparisons with positions)
// through the inductor backend, against the eager interpreter. A seeded generator builds the
// programs op by op, letting the meta functions reject ill-shaped calls; many programs share
// one graph, so hundreds of programs cost a handful of C++ compiles.
#include <array>
#include <map>
#include <random>

#include "compile/compile_fx.h"
#include "graph/interpreter.h"
#include "graph/printer.h"
#include "runtime/tensor_impl.h"
#include "cuda_testing.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

constexpr int kPrograms = 240;
constexpr int kProgramsPerGraph = 40;

class ProgramGenerator {
 public:
  // `index_bounds`: for each int64 placeholder the generator adds, the bound its values must
  // stay below (the size of the dim it indexes).
  // With `model_sizes`, the inputs are the size of a model's activations (2M to 16M elements).
  ProgramGenerator(Graph& g, std::mt19937_64& rng, const std::string& prefix,
                   std::map<std::string, int64_t>& index_bounds, bool model_sizes = false)
      : g_(g), rng_(rng), prefix_(prefix), index_bounds_(index_bounds), model_sizes_(model_sizes) {}

  // Adds one program's placeholders and ops to the graph; returns its results.
  std::vector<Node*> generate() {
    int n_inputs = pick(1, 3);
    Shape base = random_shape();
    for (int i = 0; i < n_inputs; ++i) pool_.push_back(input(broadcastable(base)));
    int n_ops = pick(2, 9);
    for (int tries = 0, done = 0; done < n_ops && tries < 100; ++tries)
      if (Node* n = random_op()) {
        pool_.push_back(n);
        ++done;
      }
    std::vector<Node*> out = {pool_.back()};
    if (pool_.size() > 3 && pick(0, 1)) out.push_back(pool_[pool_.size() - 2]);
    return out;
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  Node* any() { return pool_[static_cast<size_t>(pick(0, static_cast<int>(pool_.size()) - 1))]; }

  Shape random_shape() {
    if (model_sizes_) return model_shape();
    static const int64_t dims[] = {1, 2, 3, 5, 7, 8, 16, 17, 33, 64};
    Shape s;
    for (int r = pick(1, 4); r > 0; --r) s.push_back(dims[pick(0, 9)]);
    return s;
  }
  // Two or three dims of the sizes models have (and some one off a multiple of a tile), 2M to
  // 16M elements in all.
  Shape model_shape() {
    static const int64_t dims[] = {3, 8, 12, 63, 64, 65, 511, 512, 768, 1024, 2049, 2304, 3072};
    for (;;) {
      Shape s;
      for (int r = pick(2, 3); r > 0; --r) s.push_back(dims[pick(0, 12)]);
      const int64_t n = numel_of(s);
      if (n >= (int64_t{1} << 21) && n <= (int64_t{1} << 24)) return s;
    }
  }
  // The same shape with some dims set to 1 or dropped from the front: it broadcasts to `s`.
  Shape broadcastable(const Shape& s) {
    Shape out(s.begin() + pick(0, static_cast<int>(s.size()) - 1), s.end());
    for (int64_t& d : out)
      if (pick(0, 4) == 0) d = 1;
    return out;
  }
  // Inputs are sometimes laid out transposed (a non-contiguous placeholder).
  Node* input(const Shape& sizes) {
    Shape strides = contiguous_strides(sizes);
    const bool transposed = sizes.size() >= 2 && pick(0, 2) == 0;
    if (transposed) strides = transposed_strides(sizes);
    const std::string name = prefix_ + "in" + std::to_string(n_inputs_++);
    return g_.placeholder(name, TensorMeta{kFloat32, sizes, strides, 0, kCPU},
                          symbolic(name, sizes, transposed));
  }
  // In a dynamic graph (one with a ShapeEnv), an input's dims of size >= 2 are symbols, its
  // strides the same layout over them.
  std::optional<SymLayout> symbolic(const std::string& name, const Shape& sizes, bool transposed) {
    ShapeEnv* env = g_.shape_env().get();
    if (!env) return std::nullopt;
    SymShape s;
    for (size_t d = 0; d < sizes.size(); ++d)
      s.push_back(sizes[d] >= 2
                      ? env->create_symbol(sizes[d], name + ".size(" + std::to_string(d) + ")")
                      : sym::constant(sizes[d]));
    SymLayout l = SymLayout::contiguous(s);
    if (transposed) {  // column-major in the last two dims, row-major above them
      const size_t r = s.size();
      l.strides[r - 2] = sym::constant(1);
      l.strides[r - 1] = s[r - 2];
      sym::Expr inner = s[r - 2] * s[r - 1];
      for (size_t k = r - 2; k-- > 0;) {
        l.strides[k] = inner;
        inner = inner * s[k];
      }
    }
    return l;
  }
  static Shape transposed_strides(const Shape& sizes) {
    // Column-major in the last two dims, row-major above them.
    size_t r = sizes.size();
    Shape st(r);
    st[r - 2] = 1;
    st[r - 1] = sizes[r - 2];
    int64_t inner = sizes[r - 2] * sizes[r - 1];
    for (size_t k = r - 2; k-- > 0;) {
      st[k] = inner;
      inner *= sizes[k];
    }
    return st;
  }

  Node* index_input(const Shape& sizes, int64_t bound) {
    std::string name = prefix_ + "idx" + std::to_string(n_inputs_++);
    index_bounds_[name] = bound;
    return g_.placeholder(name, TensorMeta{kInt64, sizes, contiguous_strides(sizes), 0, kCPU},
                          symbolic(name, sizes, false));
  }

  Node* call(OpId op, std::vector<NodeArg> args) {
    try {
      return g_.call(op, std::move(args));
    } catch (const Error&) {
      return nullptr;  // an ill-shaped call: the generator tries another
    }
  }

  Node* random_op() {
    Node* a = any();
    int64_t rank = static_cast<int64_t>(a->tensor_meta().sizes.size());
    auto dim = [&] {
      return static_cast<int64_t>(pick(0, static_cast<int>(std::max<int64_t>(rank, 1)) - 1));
    };
    switch (pick(0, 20)) {
      case 0:
        return call(OpId::sin, {a});
      case 1:
        return call(OpId::tanh, {a});
      case 2:
        return call(OpId::relu, {a});
      case 3:
        return call(OpId::sigmoid, {a});
      case 4:
        return call(OpId::add, {a, any()});
      case 5:
        return call(OpId::mul, {a, any()});
      case 6:
        return call(OpId::sub, {a, Scalar(0.5)});
      case 7:
        return call(OpId::maximum, {a, any()});
      case 8: {
        Node* b = any();
        Node* c = call(OpId::gt, {a, b});
        return c ? call(OpId::where, {c, a, b}) : nullptr;
      }
      case 9:
        return rank ? call(OpId::sum, {a, Shape{dim()}, pick(0, 1) == 1}) : nullptr;
      case 10:
        return rank ? call(OpId::amax, {a, Shape{dim()}, pick(0, 1) == 1}) : nullptr;
      case 11:
        return rank ? call(OpId::mean, {a, Shape{dim()}, true}) : nullptr;
      case 12:
        return rank ? call(OpId::var, {a, Shape{dim()}, 1.0, pick(0, 1) == 1}) : nullptr;
      case 13:
        return rank ? call(OpId::softmax, {a, dim()}) : nullptr;
      case 14: {
        if (rank < 2) return call(OpId::unsqueeze, {a, int64_t{0}});
        Shape perm(static_cast<size_t>(rank));
        for (int64_t k = 0; k < rank; ++k) perm[static_cast<size_t>(k)] = k;
        std::shuffle(perm.begin(), perm.end(), rng_);
        return call(OpId::permute, {a, perm});
      }
      case 15:
        return call(OpId::reshape, {a, Shape{-1}});
      case 16: {
        if (!rank) return nullptr;
        int64_t d = dim(), size = a->tensor_meta().sizes[static_cast<size_t>(d)];
        return size > 1 ? call(OpId::slice, {a, d, int64_t{1}, size, int64_t{1}}) : nullptr;
      }
      case 17: {
        if (!rank) return nullptr;
        int64_t d = dim();
        Node* idx = index_input({pick(1, 9)}, a->tensor_meta().sizes[static_cast<size_t>(d)]);
        return call(OpId::index_select, {a, d, idx});
      }
      case 18: {
        if (!rank) return nullptr;
        int64_t d = dim();
        Shape sizes = a->tensor_meta().sizes;
        Shape is = sizes;
        for (size_t k = 0; k < is.size(); ++k)
          is[k] = static_cast<int64_t>(k) == d ? pick(1, 9) : pick(1, static_cast<int>(sizes[k]));
        return call(OpId::gather, {a, d, index_input(is, sizes[static_cast<size_t>(d)])});
      }
      case 19: {
        // A one-hot-like comparison of the last dim's positions with per-row indices (the
        // cross-entropy's gradient; a static graph only: arange's end is a number here).
        if (!rank || g_.shape_env()) return nullptr;
        const Shape& sizes = a->tensor_meta().sizes;
        const int64_t n = sizes.back();
        Shape rows = sizes;
        rows.back() = 1;
        Node* positions =
            call(OpId::arange, {Scalar(int64_t{0}), Scalar(n), Scalar(int64_t{1}), kInt64, kCPU});
        Node* targets = index_input(rows, n + 1);
        const OpId cmp = std::array{OpId::eq, OpId::lt, OpId::ge}[static_cast<size_t>(pick(0, 2))];
        Node* c = positions ? call(cmp, {positions, targets}) : nullptr;
        return c ? call(OpId::where, {c, a, Scalar(0.25)}) : nullptr;
      }
      default: {
        if (rank != 2) return nullptr;
        int64_t k = a->tensor_meta().sizes[1];
        Node* w = input({k, static_cast<int64_t>(pick(1, 20))});
        return call(OpId::mm, {a, w});
      }
    }
  }

  Graph& g_;
  std::mt19937_64& rng_;
  std::string prefix_;
  std::vector<Node*> pool_;
  int n_inputs_ = 0;
  std::map<std::string, int64_t>& index_bounds_;
  bool model_sizes_;
};

// Tolerance scaled to the result: sums and matmuls accumulate in another order than eager.
void expect_matches(const Tensor& got, const Tensor& want) {
  double scale = 1;
  for (double v : values(want))
    if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
  expect_close(got, values(want), want.sizes(), 1e-4, 1e-5 * scale);
}

// The programs from `start` to `start + kProgramsPerGraph` as one graph, with the bound of each
// index input and the program behind each output.
struct ProgramGroup {
  std::shared_ptr<const Graph> graph;
  std::map<std::string, int64_t> index_bounds;
  std::vector<int> program_of;
  int indexing_ops = 0;
};
// `dynamic`: the inputs' sizes are symbols (the graph has a ShapeEnv); `model_sizes`: the
// programs' inputs are of a model's sizes.
ProgramGroup program_group(std::mt19937_64& rng, int start, bool dynamic = false,
                           int programs = kProgramsPerGraph, bool model_sizes = false) {
  ProgramGroup out;
  Graph g;
  if (dynamic) g.set_shape_env(std::make_shared<ShapeEnv>());
  std::vector<Node*> results;
  for (int p = start; p < start + programs; ++p) {
    ProgramGenerator gen(g, rng, "p" + std::to_string(p) + "_", out.index_bounds, model_sizes);
    for (Node* r : gen.generate()) {
      results.push_back(r);
      out.program_of.push_back(p);
    }
  }
  g.output(results);
  for (const Node* n : g.nodes())
    if (n->kind() == NodeKind::Call && (n->op() == OpId::index_select || n->op() == OpId::gather))
      ++out.indexing_ops;
  out.graph = std::make_shared<const Graph>(std::move(g));
  return out;
}

// Random inputs for a group's placeholders (index inputs within their bounds); a dynamic
// group's at `symbols` (each size symbol's value; empty: the hints).
std::vector<Tensor> program_inputs(const ProgramGroup& group,
                                   const std::unordered_map<sym::Expr, int64_t>& symbols = {}) {
  std::vector<Tensor> inputs;
  for (const Node* ph : group.graph->placeholders()) {
    TensorMeta m = ph->tensor_meta();
    if (!symbols.empty()) {
      const SymLayout l = ph->sym_layout(0, /*as_made=*/true);
      for (size_t d = 0; d < l.sizes.size(); ++d) {
        m.sizes[d] = sym::evaluate(l.sizes[d], symbols);
        m.strides[d] = sym::evaluate(l.strides[d], symbols);
      }
    }
    Tensor t = empty_from_meta(m);
    if (auto it = group.index_bounds.find(ph->name()); it != group.index_bounds.end())
      t.copy_(randint(0, it->second, m.sizes));
    else
      t.copy_(random(m.sizes));
    inputs.push_back(t);
  }
  return inputs;
}

// The sizes a dynamic group runs at: its hints (an empty map), and each symbol 1 to 5 larger
// where the group's guards hold there (a size fixed by an op that needs a number breaks them).
std::vector<std::unordered_map<sym::Expr, int64_t>> run_sizes(const ShapeEnv& env,
                                                              std::mt19937_64& rng) {
  std::vector<std::unordered_map<sym::Expr, int64_t>> sizes{{}};
  std::unordered_map<sym::Expr, int64_t> larger;
  for (const ShapeEnv::Symbol& s : env.symbols())
    larger[s.var] = s.hint + std::uniform_int_distribution<int64_t>(1, 5)(rng);
  for (const ShapeEnv::Symbol& s : env.symbols())  // unified and specialised ones follow
    larger[s.var] = sym::evaluate(env.simplify(s.var), larger);
  bool holds = true;
  for (const SymGuard& g : env.guards()) holds = holds && g.holds(larger);
  if (holds) sizes.push_back(larger);
  return sizes;
}

// The group's programs with their floating inputs in `t`: the same calls (their results take
// the inputs' dtype).
Graph retyped(const Graph& graph, DType t) {
  return reparsed(graph, [t](std::string& def) {
    replace_all(def, "\"f32[", std::string("\"") + dtype_short_name(t) + "[");
  });
}

// A 16-bit program's compiled result against float32's on the same (exactly representable)
// inputs: within the dtype's tolerance of the largest value, plus twice the error of the 16-bit
// eager result, which rounds after every op (an ill-conditioned program, a variance of nearly
// equal values, loses as much there). Where eager or float32 overflows (float16's exp, say) the
// place is not compared; elsewhere the compiled value must be finite.
void expect_near_float32(const Tensor& got, const Tensor& eager, const Tensor& want, DType t) {
  ASSERT_EQ(got.sizes(), want.sizes());
  const std::vector<double> g = values(got.cpu()), e = values(eager), w = values(want);
  double scale = 1, eager_error = 0, error = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (!std::isfinite(w[i]) || !std::isfinite(e[i])) continue;
    scale = std::max(scale, std::fabs(w[i]));
    eager_error = std::max(eager_error, std::fabs(e[i] - w[i]));
    error = std::isfinite(g[i]) ? std::max(error, std::fabs(g[i] - w[i]))
                                : std::numeric_limits<double>::infinity();
  }
  EXPECT_LE(error, 2 * eager_error + rtol_for(t) * scale)
      << "16-bit eager's error " << eager_error << ", largest |float32| " << scale;
}

// Groups of the random programs with 16-bit inputs, compiled (on the GPU, with `gpu`) against
// the float32 programs interpreted on the same inputs.
void check_sixteen_bit_programs(DType t, int groups, bool gpu) {
  std::mt19937_64 rng(20261122);
  for (int start = 0; start < groups * kProgramsPerGraph; start += kProgramsPerGraph) {
    ProgramGroup group = program_group(rng, start);
    auto narrow = std::make_shared<const Graph>(retyped(*group.graph, t));
    std::vector<Tensor> wide_inputs = program_inputs(group), inputs;
    for (Tensor& x : wide_inputs) {
      if (is_floating(x.dtype())) x = x.to(t).to(kFloat32);  // exactly representable in t
      inputs.push_back(is_floating(x.dtype()) ? x.to(t) : x);
    }
    std::vector<Tensor> want = interpret(*group.graph, wide_inputs);
    std::vector<Tensor> eager = interpret(*narrow, inputs);
    auto compiled = gpu ? std::make_shared<const Graph>(on_gpu(*narrow)) : narrow;
    std::vector<Tensor> got =
        compile_fx(compiled, CompileOptions{}, "fuzz_16").run(gpu ? on_gpu(inputs) : inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("program " + std::to_string(group.program_of[i]) + ", output " +
                   group.graph->output_node()->results()[i]->name());
      ASSERT_EQ(got[i].dtype(), t);
      expect_near_float32(got[i], eager[i], want[i], t);
      if (::testing::Test::HasFailure()) {
        std::cout << print_graph(*narrow);
        return;
      }
    }
  }
}

}  // namespace

TEST(Fuzz, RandomProgramsMatchEager) {
  std::mt19937_64 rng(20261122);
  int checked = 0, indexing_ops = 0;
  for (int start = 0; start < kPrograms; start += kProgramsPerGraph) {
    ProgramGroup group = program_group(rng, start);
    indexing_ops += group.indexing_ops;
    const std::shared_ptr<const Graph>& graph = group.graph;
    const std::vector<int>& program_of = group.program_of;
    std::vector<Tensor> inputs = program_inputs(group);
    capture::CompiledGraph cg = compile_fx(graph, CompileOptions{}, "fuzz");
    std::vector<Tensor> got = cg.run(inputs);
    std::vector<Tensor> want = interpret(*graph, inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("program " + std::to_string(program_of[i]) + ", output " +
                   graph->output_node()->results()[i]->name());
      expect_matches(got[i], want[i]);
      if (::testing::Test::HasFailure()) {
        std::cout << print_graph(*graph);
        return;
      }
    }
    checked += kProgramsPerGraph;
  }
  EXPECT_GE(checked, 200);
  EXPECT_GE(indexing_ops, 20);
}

// The programs in bfloat16 and float16 on the CPU (two groups each, a C++ compile each).
TEST(Fuzz, SixteenBitProgramsMatchFloat32) {
  for (DType t : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(t));
    check_sixteen_bit_programs(t, 2, /*gpu=*/false);
  }
}

// ... and on the GPU, every group: 16-bit vector accesses eight elements wide.
TEST(Fuzz, SixteenBitProgramsMatchFloat32OnCuda) {
  COIL_REQUIRE_GPU();
  for (DType t : {kBFloat16, kFloat16}) {
    SCOPED_TRACE(dtype_name(t));
    check_sixteen_bit_programs(t, kPrograms / kProgramsPerGraph, /*gpu=*/true);
  }
}

// The programs over size symbols: each group compiles once and runs at its capture sizes and at
// larger ones (index inputs keep their bounds: the dims they index only grow), against the
// interpreter at both. A group whose guards a larger size breaks (a size fixed by an op that
// needs a number, say) runs at its hints only.
TEST(Fuzz, DynamicProgramsMatchEagerAtOtherSizes) {
  std::mt19937_64 rng(20261126);
  int grown = 0;
  for (int start = 0; start < 2 * kProgramsPerGraph; start += kProgramsPerGraph) {
    ProgramGroup group = program_group(rng, start, /*dynamic=*/true);
    const Graph& graph = *group.graph;
    const ShapeEnv& env = *graph.shape_env();
    capture::CompiledGraph cg = compile_fx(group.graph, CompileOptions{}, "fuzz_dynamic");
    const std::vector<std::unordered_map<sym::Expr, int64_t>> sizes = run_sizes(env, rng);
    grown += sizes.size() > 1;
    for (const auto& at : sizes) {
      std::vector<Tensor> inputs = program_inputs(group, at);
      std::vector<Tensor> got = cg.run(inputs), want = interpret(graph, inputs);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        SCOPED_TRACE("program " + std::to_string(group.program_of[i]) + ", output " +
                     graph.output_node()->results()[i]->name() +
                     (at.empty() ? " at the hints" : " at larger sizes"));
        expect_matches(got[i], want[i]);
        if (::testing::Test::HasFailure()) {
          std::cout << print_graph(graph);
          return;
        }
      }
    }
  }
  EXPECT_GE(grown, 1);
}

// The same programs' CUDA source compiles with NVRTC (no GPU needed); two groups keep CI short.
TEST(Fuzz, RandomProgramsCompileForCuda) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  std::mt19937_64 rng(20261122);
  for (int start = 0; start < 2 * kProgramsPerGraph; start += kProgramsPerGraph)
    EXPECT_EQ(cuda_compile_errors(*program_group(rng, start).graph), "") << "group " << start;
}

// The dynamic programs' CUDA source (sizes as arguments) compiles too; one group.
TEST(Fuzz, DynamicProgramsCompileForCuda) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  std::mt19937_64 rng(20261126);
  EXPECT_EQ(cuda_compile_errors(*program_group(rng, 0, /*dynamic=*/true).graph), "");
}

// The programs compiled for the GPU, against the CPU's eager interpreter.
TEST(Fuzz, RandomProgramsMatchEagerOnCuda) {
  COIL_REQUIRE_GPU();
  std::mt19937_64 rng(20261122);
  for (int start = 0; start < kPrograms; start += kProgramsPerGraph) {
    ProgramGroup group = program_group(rng, start);
    std::vector<Tensor> inputs = program_inputs(group);
    std::vector<Tensor> gpu_inputs = on_gpu(inputs);  // with the strides the placeholders say
    auto gpu_graph = std::make_shared<const Graph>(on_gpu(*group.graph));
    std::vector<Tensor> got = compile_fx(gpu_graph, CompileOptions{}, "fuzz_cuda").run(gpu_inputs);
    std::vector<Tensor> want = interpret(*group.graph, inputs);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      SCOPED_TRACE("program " + std::to_string(group.program_of[i]) + ", output " +
                   group.graph->output_node()->results()[i]->name());
      ASSERT_EQ(got[i].device(), kCUDA);
      expect_matches(got[i].cpu(), want[i]);
      if (::testing::Test::HasFailure()) {
        std::cout << print_graph(*group.graph);
        return;
      }
    }
  }
}

// The dynamic programs on the GPU, at their hints and at larger sizes (the CPU test's programs
// and sizes), against the CPU's eager interpreter: kernels that take their sizes at run time,
// rows longer or shorter than the ones their threads were shaped for among them.
TEST(Fuzz, DynamicProgramsMatchEagerOnCuda) {
  COIL_REQUIRE_GPU();
  std::mt19937_64 rng(20261126);
  for (int start = 0; start < 2 * kProgramsPerGraph; start += kProgramsPerGraph) {
    ProgramGroup group = program_group(rng, start, /*dynamic=*/true);
    auto gpu_graph = std::make_shared<const Graph>(on_gpu(*group.graph));
    capture::CompiledGraph cg = compile_fx(gpu_graph, CompileOptions{}, "fuzz_dynamic_cuda");
    for (const auto& at : run_sizes(*group.graph->shape_env(), rng)) {
      std::vector<Tensor> inputs = program_inputs(group, at);
      std::vector<Tensor> got = cg.run(on_gpu(inputs)), want = interpret(*group.graph, inputs);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        SCOPED_TRACE("program " + std::to_string(group.program_of[i]) + ", output " +
                     group.graph->output_node()->results()[i]->name() +
                     (at.empty() ? " at the hints" : " at larger sizes"));
        expect_matches(got[i].cpu(), want[i]);
        if (::testing::Test::HasFailure()) {
          std::cout << print_graph(*group.graph);
          return;
        }
      }
    }
  }
}

// The graph's calls made one by one through the dispatcher, as a user's function makes them:
// autograd records them, and a compiled function's tracer captures them (its inputs are
// proxies, which interpret's default input check refuses).
std::vector<Tensor> replay(const Graph& g, const std::vector<Tensor>& inputs) {
  InterpretHooks through_dispatcher;
  through_dispatcher.check_inputs = false;
  through_dispatcher.call = [](const Node& n, std::vector<Arg> args) {
    return call_op(n.op(), std::move(args));
  };
  return interpret(g, inputs, through_dispatcher);
}

// Programs whose tensors are tens of MB, trained on the GPU: compiled forward and backward
// (captured from the graph's calls replayed, as a user's function is) against eager on the GPU,
// the loss the sum of each floating result's tanh. At these sizes the kernels take their
// split, tiled and vectorised paths, which the small programs above rarely reach;
// scripts/test_gpu.sh runs this under memcheck.
TEST(Fuzz, ModelSizeProgramsTrainOnCuda) {
  COIL_REQUIRE_GPU();
  std::mt19937_64 rng(20261201);
  constexpr int kGroups = 3, kPerGroup = 3;
  int trained = 0;
  for (int start = 0; start < kGroups * kPerGroup; start += kPerGroup) {
    ProgramGroup group = program_group(rng, start, false, kPerGroup, /*model_sizes=*/true);
    auto gpu_graph = std::make_shared<const Graph>(on_gpu(*group.graph));
    auto loss_of = [&](const std::vector<Tensor>& in) {
      Tensor loss = zeros({}).cuda();
      for (const Tensor& r : replay(*gpu_graph, in))
        if (is_floating(r.dtype())) loss = loss + r.tanh().sum();
      return loss;
    };
    auto leaves = [&] {
      std::vector<Tensor> in = on_gpu(program_inputs(group));
      for (Tensor& t : in)
        if (is_floating(t.dtype())) t.requires_grad_();
      return in;
    };
    manual_seed(start);
    std::vector<Tensor> eager = leaves();
    Tensor want = loss_of(eager);
    manual_seed(start);
    std::vector<Tensor> compiled = leaves();
    Tensor got = compile(loss_of)(compiled);
    SCOPED_TRACE("group " + std::to_string(start));
    expect_matches(got.cpu(), want.cpu());
    ASSERT_EQ(got.requires_grad(), want.requires_grad());
    if (!want.requires_grad()) continue;  // no floating result reads a floating input
    ++trained;
    want.backward();
    got.backward();
    for (size_t i = 0; i < eager.size(); ++i) {
      if (!eager[i].requires_grad()) continue;
      SCOPED_TRACE("the gradient of " + gpu_graph->placeholders()[i]->name());
      // An input the loss does not reach through any differentiable op (only through a
      // comparison, say) has no gradient in eager, and zeros in the compiled backward.
      if (eager[i].grad().defined()) {
        expect_matches(compiled[i].grad().cpu(), eager[i].grad().cpu());
      } else if (compiled[i].grad().defined()) {
        EXPECT_EQ(compiled[i].grad().abs().amax().item<double>(), 0.0);
      }
    }
    if (::testing::Test::HasFailure()) {
      std::cout << print_graph(*group.graph);
      return;
    }
  }
  EXPECT_GE(trained, 2);
}
