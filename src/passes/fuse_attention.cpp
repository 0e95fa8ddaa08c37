// Attention written out by hand, softmax(q @ k^T * scale) @ v, becomes one
// scaled_dot_product_attention call (Inductor's fuse_attention patterns, on the captured graph):
// its eager kernel (library products around a vectorised row softmax) is as fast as the code
// the decomposed form would generate, and a graph of nothing else then needs no generated code,
// so no C++ compiler run on its first call.
//
// The scale may multiply the product on either side or divide it; the key's transpose is the
// permute that view canonicalisation makes of transpose(-2, -1). The rewrite keeps the value
// except for a row whose scores are all -inf (only infinite inputs make one), where the
// attention kernel's safe softmax gives zeros instead of NaN. In float16 and bfloat16 (and
// under autocast, which takes the softmax to float32 and its result back) the fused kernel
// keeps the scores in float32 where the graph rounds them: the compiled result differs from
// eager's within the dtype's tolerance, as Inductor's does.
#include "passes/pass_util.h"
#include "passes/passes.h"
#include "passes/pattern_matcher.h"

namespace coil {

namespace {

using detail_passes::single_user;
using detail_passes::uniform_value;

bool is_call(const Node* n, OpId op) {
  return n != nullptr && n->kind() == NodeKind::Call && n->op() == op;
}
const Shape& sizes(const Node* n) { return n->tensor_meta().sizes; }

// The leading (batch) sizes of a matrix operand.
Shape batch_of(const Node* n) { return Shape(sizes(n).begin(), sizes(n).end() - 2); }

// Whether `n` permutes only its input's last two dims.
bool swaps_last_two(const Node* n) {
  if (!is_call(n, OpId::permute)) return false;
  const Shape& dims = std::get<Shape>(n->args()[1]);
  const int64_t r = static_cast<int64_t>(dims.size());
  if (r < 2) return false;
  for (int64_t i = 0; i < r; ++i) {
    int64_t want = i == r - 2 ? r - 1 : i == r - 1 ? r - 2 : i;
    if (dims[i] != want && dims[i] != want - r) return false;
  }
  return true;
}

struct Parts {
  Node *q, *k;
  double scale;
  bool cast_k;  // the key's transpose is cast (as autocast casts it), after the permute
};

// q, k and the scale behind the softmax's input, when it is (q @ permute(k)) scaled once at
// most, each intermediate read by nothing else.
std::optional<Parts> attention_scores(Node* s) {
  double scale = 1.0;
  if (is_call(s, OpId::mul) && single_user(s)) {
    for (int side = 0; side < 2; ++side) {
      std::optional<double> f = uniform_value(s->args()[side]);
      Node* x = node_arg(s->args()[1 - side]);
      if (f && x) {
        scale = *f;
        s = x;
        break;
      }
    }
  } else if (is_call(s, OpId::div) && single_user(s) &&
             std::holds_alternative<std::monostate>(s->args()[2])) {  // no rounding mode
    std::optional<double> d = uniform_value(s->args()[1]);
    Node* x = node_arg(s->args()[0]);
    if (d && *d != 0 && x) {
      scale = 1.0 / *d;
      s = x;
    }
  }
  if (!is_call(s, OpId::matmul) || !single_user(s)) return std::nullopt;
  Node* kt = node_arg(s->args()[1]);
  const bool cast_k = is_call(kt, OpId::to_dtype) && single_user(kt);
  if (cast_k) kt = node_arg(kt->args()[0]);
  if (!swaps_last_two(kt)) return std::nullopt;
  return Parts{node_arg(s->args()[0]), node_arg(kt->args()[0]), scale, cast_k};
}

bool is_16_bit(DType t) { return t == kFloat16 || t == kBFloat16; }

// The pattern, plain or with autocast's casts around the softmax (to float32 before it, back to
// the operands' dtype after it).
Pattern attention(bool cast) {
  Pattern p;
  PatternExpr scores = any("scores");
  if (cast) scores = op(OpId::to_dtype, {scores}, "widen");
  PatternExpr weights = op(OpId::softmax, {scores}, "softmax");
  if (cast) weights = op(OpId::to_dtype, {weights}, "narrow");
  p.name = cast ? "softmax(float(q @ k^T * scale)).to(dtype) @ v -> scaled_dot_product_attention"
                : "softmax(q @ k^T * scale) @ v -> scaled_dot_product_attention(q, k, v, scale)";
  p.expr = op(OpId::matmul, {weights, any("v")});
  p.predicate = [cast](const Match& m) {
    Node *softmax = m["softmax"], *v = m["v"];
    std::optional<Parts> parts = attention_scores(m["scores"]);
    if (!parts || !single_user(softmax) || !parts->q || !parts->k) return false;
    const int64_t r = static_cast<int64_t>(sizes(softmax).size());
    const int64_t dim = std::get<int64_t>(softmax->args()[1]);
    const DType t = v->tensor_meta().dtype;
    // sdpa's operands share a dtype and batch shape.
    for (const Node* x : {parts->q, parts->k, v})
      if ((x->tensor_meta().dtype != t && (x != parts->k || !parts->cast_k)) ||
          sizes(x).size() != sizes(softmax).size() || batch_of(x) != batch_of(softmax) ||
          x->tensor_meta().device != v->tensor_meta().device)
        return false;
    if (cast && (!is_16_bit(t) || !single_user(m["widen"]) || !single_user(m["narrow"]) ||
                 m["scores"]->tensor_meta().dtype != t ||
                 softmax->tensor_meta().dtype != kFloat32 || m["narrow"]->tensor_meta().dtype != t))
      return false;
    if (!cast && softmax->tensor_meta().dtype != t) return false;
    return r >= 2 && (dim == r - 1 || dim == -1) && is_floating(t) &&
           m.root->tensor_meta().dtype == t;
  };
  p.replacement = [](Graph& g, const Match& m) {
    Parts parts = *attention_scores(m["scores"]);
    Node* v = m["v"];
    Node* k =
        parts.cast_k ? g.call(OpId::to_dtype, {parts.k, v->tensor_meta().dtype}, m.root) : parts.k;
    return g.call(OpId::scaled_dot_product_attention,
                  {parts.q, k, v, std::monostate{}, 0.0, false, parts.scale}, m.root);
  };
  return p;
}

}  // namespace

bool run_fuse_attention(Graph& g) {
  static const std::vector<Pattern> patterns = {attention(false), attention(true)};
  return apply_patterns(g, patterns);
}

}  // namespace coil
