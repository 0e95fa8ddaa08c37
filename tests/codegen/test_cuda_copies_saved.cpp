// Copies a GPU graph no longer makes (no GPU needed: the graphs are lowered and their CUDA
// source generated). Self-attention's heads come from one projection, [batch, tokens, 3 *
// heads * features] split in three: the fused kernels write the attention's output in the
// query's order, and the backward's [dq, dk, dv] laid out as that projection, so the output
// projection reads the result as it is and the projection's gradient — the concatenation of the
// three — is the backward's buffer, viewed. A GELU's gradient that a product reads is written
// once, and the bias gradient's sum reads it there instead of computing it again.
#include "cuda_testing.h"
#include "graph/parser.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

// Batch 2, 16 tokens, 2 heads of 8 features: a projection of 48 = 3 x 16 columns.
const char* kAttentionGraph = R"(
def forward(self, qkv: "f32[32, 48][48, 1]cuda:0", g: "f32[32, 16][16, 1]cuda:0", x: "f32[32, 16][16, 1]cuda:0"):
    w: "f32[16, 48][48, 1]cuda:0" = coil.parameter("w")
    view: "f32[2, 16, 48][768, 48, 1]cuda:0" = coil.view(qkv, [2, 16, 48])
    split = coil.split(view, 16, 2)
    s0: "f32[2, 16, 16][768, 48, 1]cuda:0" = split[0]
    s1: "f32[2, 16, 16][768, 48, 1]cuda:0+16" = split[1]
    s2: "f32[2, 16, 16][768, 48, 1]cuda:0+32" = split[2]
    v0: "f32[2, 16, 2, 8][768, 48, 8, 1]cuda:0" = coil.view(s0, [2, 16, 2, 8])
    q: "f32[2, 2, 16, 8][768, 8, 48, 1]cuda:0" = coil.permute(v0, [0, 2, 1, 3])
    v1: "f32[2, 16, 2, 8][768, 48, 8, 1]cuda:0+16" = coil.view(s1, [2, 16, 2, 8])
    k: "f32[2, 2, 16, 8][768, 8, 48, 1]cuda:0+16" = coil.permute(v1, [0, 2, 1, 3])
    v2: "f32[2, 16, 2, 8][768, 48, 8, 1]cuda:0+32" = coil.view(s2, [2, 16, 2, 8])
    v: "f32[2, 2, 16, 8][768, 8, 48, 1]cuda:0+32" = coil.permute(v2, [0, 2, 1, 3])
    out: "f32[2, 2, 16, 8][256, 8, 16, 1]cuda:0" = coil.scaled_dot_product_attention(q, k, v, is_causal=True)
    gv: "f32[2, 16, 2, 8][256, 16, 8, 1]cuda:0" = coil.view(g, [2, 16, 2, 8])
    gp: "f32[2, 2, 16, 8][256, 8, 16, 1]cuda:0" = coil.permute(gv, [0, 2, 1, 3])
    grads: "f32[3, 2, 2, 16, 8][16, 768, 8, 48, 1]cuda:0" = coil.scaled_dot_product_attention_backward(gp, q, k, v, out, True)
    d0: "f32[2, 2, 16, 8][768, 8, 48, 1]cuda:0" = coil.select(grads, 0, 0)
    d1: "f32[2, 2, 16, 8][768, 8, 48, 1]cuda:0+16" = coil.select(grads, 0, 1)
    d2: "f32[2, 2, 16, 8][768, 8, 48, 1]cuda:0+32" = coil.select(grads, 0, 2)
    p0: "f32[2, 16, 2, 8][768, 48, 8, 1]cuda:0" = coil.permute(d0, [0, 2, 1, 3])
    p1: "f32[2, 16, 2, 8][768, 48, 8, 1]cuda:0+16" = coil.permute(d1, [0, 2, 1, 3])
    p2: "f32[2, 16, 2, 8][768, 48, 8, 1]cuda:0+32" = coil.permute(d2, [0, 2, 1, 3])
    r0: "f32[2, 16, 16][768, 48, 1]cuda:0" = coil.reshape(p0, [2, 16, 16])
    r1: "f32[2, 16, 16][768, 48, 1]cuda:0+16" = coil.reshape(p1, [2, 16, 16])
    r2: "f32[2, 16, 16][768, 48, 1]cuda:0+32" = coil.reshape(p2, [2, 16, 16])
    cat: "f32[2, 16, 48][768, 48, 1]cuda:0" = coil.cat([r0, r1, r2], 2)
    dqkv: "f32[32, 48][48, 1]cuda:0" = coil.reshape(cat, [32, 48])
    bias_grad: "f32[1, 48][48, 1]cuda:0" = coil.sum(dqkv, [0], True)
    wt: "f32[48, 16][1, 48]cuda:0" = coil.t(w)
    dx: "f32[32, 16][16, 1]cuda:0" = coil.mm(dqkv, wt)
    xt: "f32[16, 32][1, 16]cuda:0" = coil.t(x)
    dw: "f32[16, 48][48, 1]cuda:0" = coil.mm(xt, dqkv)
    op: "f32[2, 16, 2, 8][256, 16, 8, 1]cuda:0" = coil.permute(out, [0, 2, 1, 3])
    rows: "f32[32, 16][16, 1]cuda:0" = coil.reshape(op, [32, 16])
    return (bias_grad, dx, dw, rows)
)";

// Every kernel of a module's source: its name and body.
std::vector<std::pair<std::string, std::string>> kernels_of(const std::string& source) {
  std::vector<std::pair<std::string, std::string>> out;
  const std::string mark = "__global__ void ";
  for (size_t at = source.find(mark); at != std::string::npos;) {
    size_t name = source.find(' ', at + mark.size()) + 1;  // past __launch_bounds__(...)
    if (source.compare(at + mark.size(), 17, "__launch_bounds__") != 0) name = at + mark.size();
    const size_t next = source.find(mark, at + 1);
    out.emplace_back(source.substr(name, source.find('(', name) - name),
                     source.substr(at, next == std::string::npos ? std::string::npos : next - at));
    at = next;
  }
  return out;
}

}  // namespace

// The annotations are the metas' layouts (the parser checks them): the output token-major, the
// gradients laid out as the projection. What is left to generate is the bias gradient's sum.
TEST(CudaCopiesSaved, AttentionWritesInTheProjectionsLayout) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  const std::string source = cuda_module_source(parse_graph(kAttentionGraph));
  for (const auto& [name, body] : kernels_of(source))
    EXPECT_EQ(name.rfind("red_", 0), 0u) << "a copy left: " << name << "\n" << body;
  EXPECT_FALSE(kernels_of(source).empty()) << source;
}

// On the CPU the kernels write contiguous results: the same program's annotations would differ.
TEST(CudaCopiesSaved, TheCpuKeepsContiguousResults) {
  std::string text = kAttentionGraph;
  for (size_t at; (at = text.find("cuda:0")) != std::string::npos;) text.replace(at, 6, "cpu");
  EXPECT_COIL_ERROR(parse_graph(text), "computes f32[2, 2, 16, 8][256, 128, 8, 1]cpu");
}

// A GELU's gradient g * gelu'(x), read by two products and summed for the bias: the sum reads
// the written gradient (no tanh in it).
TEST(CudaCopiesSaved, ABiasGradientReadsTheWrittenGeluGradient) {
  if (!cuda::is_built()) GTEST_SKIP() << "coil was built without CUDA";
  const std::string source = cuda_module_source(parse_graph(R"(
def forward(self, a: "f32[64, 96][96, 1]cuda:0", g: "f32[64, 32][32, 1]cuda:0", x: "f32[64, 32][32, 1]cuda:0"):
    w: "f32[96, 32][32, 1]cuda:0" = coil.parameter("w")
    wt: "f32[32, 96][1, 32]cuda:0" = coil.t(w)
    dy: "f32[64, 96][96, 1]cuda:0" = coil.mm(g, wt)
    d3: "f32[2, 32, 96][3072, 96, 1]cuda:0" = coil.reshape(dy, [2, 32, 96])
    a3: "f32[2, 32, 96][3072, 96, 1]cuda:0" = coil.reshape(a, [2, 32, 96])
    t: "f32[2, 32, 96][3072, 96, 1]cuda:0" = coil.tanh(a3)
    t2: "f32[2, 32, 96][3072, 96, 1]cuda:0" = coil.mul(t, t)
    dt: "f32[2, 32, 96][3072, 96, 1]cuda:0" = coil.sub(1, t2)
    grad: "f32[2, 32, 96][3072, 96, 1]cuda:0" = coil.mul(d3, dt)
    rows: "f32[64, 96][96, 1]cuda:0" = coil.reshape(grad, [64, 96])
    bias_grad: "f32[1, 96][96, 1]cuda:0" = coil.sum(rows, [0], True)
    rt: "f32[96, 64][1, 96]cuda:0" = coil.t(rows)
    dw: "f32[96, 32][32, 1]cuda:0" = coil.mm(rt, x)
    dx: "f32[64, 32][32, 1]cuda:0" = coil.mm(rows, w)
    return (bias_grad, dw, dx)
)"));
  int sums = 0;
  for (const auto& [name, body] : kernels_of(source)) {
    if (name.rfind("red_", 0) != 0) continue;
    ++sums;
    EXPECT_EQ(body.find("tanh"), std::string::npos) << name << " computes the gradient again\n"
                                                    << body;
  }
  EXPECT_GE(sums, 1) << source;
}

// One new token against a symbolic number of cached keys (a decode step): the result's dims of
// size 1 leave it contiguous, and the symbolic rule agrees with the meta function.
TEST(CudaCopiesSaved, ADecodeStepsResultIsContiguous) {
  const Graph g = parse_graph(R"(
# hints: s0=20
def forward(self, q: "f32[1, 2, 1, 8][16, 8, 16, 1]cuda:0", k: "f32[1, 2, s0, 8][16*s0, 8*s0, 8, 1]cuda:0", v: "f32[1, 2, s0, 8][16*s0, 8*s0, 8, 1]cuda:0"):
    out: "f32[1, 2, 1, 8][16, 8, 8, 1]cuda:0" = coil.scaled_dot_product_attention(q, k, v)
    return (out,)
)");
  for (const Node* n : g.nodes()) {
    if (n->kind() == NodeKind::Call) {
      EXPECT_EQ(n->tensor_meta().strides, (Shape{16, 8, 8, 1}));
    }
  }
}
