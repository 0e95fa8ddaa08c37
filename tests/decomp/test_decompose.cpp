// The decomposition driver and table: every example of op_examples.h whose op decomposes
// matches eager, declined instances stay, graphs of primitives are left alone, and the softmax
// decomposition as text (a change to it is a visible diff).
#include <algorithm>
#include <set>

#include "decomp_testing.h"
#include "graph/parser.h"

using namespace coil;
using namespace coil::testing;

namespace {

TEST(Decompose, EveryExampleMatchesEager) {
  std::map<std::string, Tensor> values = example_values();
  std::set<OpId> covered;
  for (const OpExample& ex : op_examples()) {
    OpId op = *find_op(ex.op);
    if (!find_decomposition(op)) continue;
    covered.insert(op);
    std::vector<Arg> args = example_args(ex, values);
    // Attention with dropout or without a mask (which runs its fused kernel); adaptive average
    // pools to more than one element a plane.
    const bool windows =
        (op == OpId::adaptive_avg_pool2d && std::get<Shape>(args.at(1)) != Shape{1, 1}) ||
        (op == OpId::adaptive_avg_pool2d_backward && std::get<Tensor>(args.at(0)).size(-1) != 1);
    bool declines = windows || (ex.random && op != OpId::dropout) ||
                    (op == OpId::scaled_dot_product_attention &&
                     std::holds_alternative<std::monostate>(args.at(3)));
    check_decomposition(op, args, declines);
  }
  for (OpId op : decomposed_ops()) EXPECT_TRUE(covered.count(op)) << op_name(op);
}

// Exactly the composite ops decompose, plus the composite reductions and activations and global
// average pooling; the primitive set keeps var (lowered with Welford) and the pointwise ops.
TEST(Decompose, TableHoldsTheCompositeOps) {
  const std::set<OpId> extra = {OpId::mean,
                                OpId::std,
                                OpId::logsumexp,
                                OpId::gelu,
                                OpId::silu,
                                OpId::adaptive_avg_pool2d,
                                OpId::adaptive_avg_pool2d_backward};
  std::vector<OpId> ops = decomposed_ops();
  std::set<OpId> table(ops.begin(), ops.end());
  for (int i = 0; i < kNumOps; ++i) {
    auto op = static_cast<OpId>(i);
    bool expected = op_info(op).kind == OpKind::Composite || extra.count(op);
    EXPECT_EQ(table.count(op) > 0, expected) << op_name(op);
    EXPECT_EQ(find_decomposition(op) != nullptr, expected) << op_name(op);
  }
  EXPECT_TRUE(std::is_sorted(ops.begin(), ops.end()));
}

TEST(Decompose, DeclinesWhatMustStay) {
  Tensor x = rnd({4, 3, 5}), c = rnd({3}), var = rnd({3}, kFloat32, false, 0.5, 2);
  // batch_norm in training updates its running statistics in place.
  check_decomposition(OpId::batch_norm, {x, c, c, c, var, B(true)}, /*declines=*/true);
  check_decomposition(OpId::batch_norm, {x, None(), None(), None(), var, B(true)}, true);
  Tensor q = rnd({2, 4, 8});
  // Attention without a mask (or a causal one) runs its fused eager kernel.
  check_decomposition(OpId::scaled_dot_product_attention, {q, q, q}, true);
  check_decomposition(OpId::scaled_dot_product_attention, {q, q, q, None(), F(0), B(true)}, true);
}

// A global average pool (to one element a plane) and its gradient are a mean and a division,
// in float32 for bf16, channels-last or not; other output sizes keep the op.
TEST(Decompose, GlobalAveragePoolsBecomeMeans) {
  for (DType t : {kFloat32, kBFloat16})
    for (bool channels_last : {false, true}) {
      Tensor x = rnd({2, 16, 7, 5}, t), g = rnd({2, 16, 1, 1}, t);
      if (channels_last) {
        x = x.contiguous(MemoryFormat::ChannelsLast);
        g = g.contiguous(MemoryFormat::ChannelsLast);
      }
      check_decomposition(OpId::adaptive_avg_pool2d, {x, L({1, 1})});
      check_decomposition(OpId::adaptive_avg_pool2d_backward, {g, x});
    }
  check_decomposition(OpId::adaptive_avg_pool2d, {rnd({2, 16, 7, 5}), L({2, 1})}, true);
}

// A declined node stays while the rest of the graph decomposes around it.
TEST(Decompose, RewritesAroundADeclinedNode) {
  Graph g = parse_graph(
      R"(def forward(self, x: "f32[2, 4, 6][24, 6, 1]cpu"):
    attention = coil.scaled_dot_product_attention(x, x, x)
    softmax = coil.softmax(attention, 2)
    mean = coil.mean(softmax)
    return (softmax, mean)
)");
  EXPECT_TRUE(decompose(g));
  verify(g);
  std::multiset<OpId> ops;
  for (const Node* n : g.nodes())
    if (n->kind() == NodeKind::Call) ops.insert(n->op());
  EXPECT_EQ(ops.count(OpId::scaled_dot_product_attention), 1u);
  EXPECT_EQ(ops.count(OpId::softmax) + ops.count(OpId::mean), 0u);
  EXPECT_FALSE(decompose(g));  // a second run finds nothing more to do
}

TEST(Decompose, LeavesPrimitivesAlone) {
  Graph g = parse_graph(
      R"(def forward(self, x: "f32[4, 6][6, 1]cpu", y: "f32[6][1]cpu"):
    add = coil.add(x, y)
    var = coil.var(add, [1])
    t = coil.t(x)
    mm = coil.mm(x, t)
    return (var, mm)
)");
  const std::string before = print_graph(g);
  EXPECT_FALSE(decompose(g));
  EXPECT_EQ(print_graph(g), before);
}

// Every user of the replaced node, the output included, reads the replacement.
TEST(Decompose, ReplacesEveryUse) {
  Graph g = parse_graph(
      R"(def forward(self, x: "f32[3, 5][5, 1]cpu"):
    silu = coil.silu(x)
    add = coil.add(silu, silu)
    return (silu, add, silu)
)");
  EXPECT_TRUE(decompose(g));
  verify(g);
  Tensor x = rnd({3, 5});
  std::vector<Tensor> out = interpret(g, {x});
  ASSERT_EQ(out.size(), 3u);
  Tensor want = silu(x);
  expect_matches(out[0], want);
  expect_matches(out[1], want + want);
  EXPECT_TRUE(out[2].is_same(out[0]));
}

TEST(Decompose, SoftmaxAsText) {
  Graph g = parse_graph(
      R"(def forward(self, x: "f16[4, 6][6, 1]cpu"):
    softmax = coil.softmax(x, 1)
    return (softmax,)
)");
  decompose(g);
  EXPECT_EQ(print_graph(g),
            R"(def forward(self, x: "f16[4, 6][6, 1]cpu"):
    to_dtype: "f32[4, 6][6, 1]cpu" = coil.to_dtype(x, coil.float32)
    amax: "f32[4, 1][1, 1]cpu" = coil.amax(to_dtype, [1], True)
    sub: "f32[4, 6][6, 1]cpu" = coil.sub(to_dtype, amax)
    exp: "f32[4, 6][6, 1]cpu" = coil.exp(sub)
    sum_1: "f32[4, 1][1, 1]cpu" = coil.sum(exp, [1], True)
    div: "f32[4, 6][6, 1]cpu" = coil.div(exp, sum_1)
    to_dtype_1: "f16[4, 6][6, 1]cpu" = coil.to_dtype(div, coil.float16)
    return (to_dtype_1,)
)");
}

}  // namespace
