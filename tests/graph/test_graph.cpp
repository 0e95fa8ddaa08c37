// The graph IR: building, naming, users lists, rewriting (replace_all_uses_with, erase,
// set_args), order, clone, the verifier on corrupted graphs, and the DOT export.
#include <algorithm>

#include "graph/graph.h"
#include "graph/printer.h"
#include "ops/meta_util.h"
#include "testing.h"

namespace coil {

// Reaches into a graph to break its invariants, so the verifier can be shown to catch them.
struct GraphInternals {
  static std::vector<Node*>& users(Node* n) { return n->users_; }
  static std::vector<TensorMeta>& meta(Node* n) { return n->meta_; }
  static std::vector<NodeArg>& args(Node* n) { return n->args_; }
  static void rename(Node* n, const std::string& s) { n->name_ = s; }
  static void swap_positions(Node* a, Node* b) { std::swap(a->pos_, b->pos_); }
  static void move_before(Graph& g, Node* n, Node* before) {
    g.nodes_.splice(before->self_, g.nodes_, n->self_);
    g.renumber();
  }
  static void append_output(Graph& g) {
    auto n = std::unique_ptr<Node>(new Node(&g, NodeKind::Output));
    n->name_ = "output_2";
    n->args_ = {std::vector<Node*>{}};
    n->pos_ = g.nodes_.back()->pos_ + 1;
    Node* raw = n.get();
    g.by_name_[raw->name_] = raw;
    raw->self_ = g.nodes_.insert(g.nodes_.end(), std::move(n));
  }
};

}  // namespace coil

using namespace coil;

namespace {

// Expects InternalError whose message contains `substr`.
#define EXPECT_INTERNAL_ERROR(stmt, substr)                            \
  do {                                                                 \
    try {                                                              \
      stmt;                                                            \
      ADD_FAILURE() << "expected coil::InternalError from: " #stmt;    \
    } catch (const ::coil::InternalError& e) {                         \
      EXPECT_NE(std::string(e.what()).find(substr), std::string::npos) \
          << "message was: " << e.what();                              \
    }                                                                  \
  } while (0)

// x: f32[8, 16], y: f32[16]; a = sin(x); b = add(a, y); c = mul(b, a); return (c,)
struct Small {
  Graph g;
  Node *x, *y, *a, *b, *c, *out;
  Small() {
    x = g.placeholder("x", ops::contiguous_meta(kFloat32, {8, 16}));
    y = g.placeholder("y", ops::contiguous_meta(kFloat32, {16}));
    a = g.call(OpId::sin, {x});
    b = g.call(OpId::add, {a, y});
    c = g.call(OpId::mul, {b, a});
    out = g.output({c});
  }
};

TEST(Graph, BuildsNodesWithMetaUsersAndNames) {
  Small s;
  EXPECT_EQ(s.g.size(), 6u);
  EXPECT_EQ(s.a->name(), "sin");
  EXPECT_EQ(s.b->name(), "add");
  EXPECT_EQ(s.out->name(), "output");
  EXPECT_EQ(s.b->tensor_meta().sizes, (Shape{8, 16}));
  EXPECT_EQ(s.b->tensor_meta().strides, (Shape{16, 1}));
  EXPECT_EQ(s.x->users(), (std::vector<Node*>{s.a}));
  EXPECT_EQ(s.a->users(), (std::vector<Node*>{s.b, s.c}));
  EXPECT_EQ(s.c->inputs(), (std::vector<Node*>{s.b, s.a}));
  EXPECT_EQ(s.c->users(), (std::vector<Node*>{s.out}));
  EXPECT_EQ(s.g.placeholders(), (std::vector<Node*>{s.x, s.y}));
  EXPECT_EQ(s.g.output_node(), s.out);
  EXPECT_EQ(s.g.find("add"), s.b);
  EXPECT_EQ(s.g.find("nope"), nullptr);
  EXPECT_TRUE(s.a->is_before(s.b));
  verify(s.g);
}

TEST(Graph, PlaceholdersStayFirstAndNodesGoBeforeTheOutput) {
  Small s;
  Node* z = s.g.placeholder("z", ops::contiguous_meta(kFloat32, {16}));
  Node* d = s.g.call(OpId::cos, {s.c});
  std::vector<Node*> order = s.g.nodes();
  EXPECT_EQ(order[2], z);
  EXPECT_EQ(order[order.size() - 2], d);
  EXPECT_EQ(order.back(), s.out);
  verify(s.g);
}

TEST(Graph, NamesAreUniqueIdentifiersAvoidingBuiltins) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {4}));
  EXPECT_EQ(g.placeholder("x", ops::contiguous_meta(kFloat32, {4}))->name(), "x_1");
  EXPECT_EQ(g.placeholder("self", ops::contiguous_meta(kFloat32, {4}))->name(), "self_1");
  EXPECT_EQ(g.placeholder("2d input", ops::contiguous_meta(kFloat32, {4}))->name(), "_2d_input");
  EXPECT_EQ(g.call(OpId::sin, {x})->name(), "sin");
  EXPECT_EQ(g.call(OpId::sin, {x})->name(), "sin_1");
  EXPECT_EQ(g.call(OpId::abs, {x})->name(), "abs_1");  // as FX: no shadowing of builtins
  EXPECT_EQ(g.call(OpId::round, {x})->name(), "round_1");
  EXPECT_EQ(g.parameter("layer1.0.weight", zeros({4}))->name(), "layer1_0_weight");
  EXPECT_EQ(g.constant(zeros({2}))->name(), "constant");
  Node* c1 = g.call(OpId::cos, {x});
  g.set_name(c1, "cosine");
  EXPECT_EQ(c1->name(), "cosine");
  EXPECT_EQ(g.find("cosine"), c1);
  EXPECT_EQ(g.find("cos"), nullptr);
  EXPECT_COIL_ERROR(g.set_name(c1, "sin"), "already taken");
  EXPECT_COIL_ERROR(g.set_name(c1, "1x"), "not a valid node name");
  EXPECT_COIL_ERROR(g.set_name(c1, "None"), "reserved");
  g.output({c1});
  verify(g);
}

TEST(Graph, CallNormalizesArguments) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {4, 6}));
  // Defaults are filled in.
  Node* gelu = g.call(OpId::gelu, {x});
  ASSERT_EQ(gelu->args().size(), 2u);
  EXPECT_EQ(std::get<std::string>(gelu->args()[1]), "none");
  // Numbers take the alternative the parser would read: Scalar for Scalar, double for float,
  // int64 for int.
  Node* c = g.call(OpId::clamp, {x, int64_t{0}, 6.0});
  EXPECT_EQ(std::get<Scalar>(c->args()[1]), Scalar(0));
  EXPECT_EQ(std::get<Scalar>(c->args()[2]), Scalar(6.0));
  Node* p = g.call(OpId::pad, {x, Shape{1, 1}, std::string("constant"), int64_t{2}});
  EXPECT_TRUE(std::holds_alternative<double>(p->args()[3]));
  Node* s = g.call(OpId::select, {x, Scalar(1), Scalar(2)});
  EXPECT_TRUE(std::holds_alternative<int64_t>(s->args()[1]));
  EXPECT_EQ(s->tensor_meta().offset, 2);
  g.output({gelu, c, p, s});
  verify(g);
}

TEST(Graph, CallRejectsBadArgumentsWithTheOpsError) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {4, 6}));
  Node* y = g.placeholder("y", ops::contiguous_meta(kFloat32, {5}));
  EXPECT_COIL_ERROR(g.call(OpId::add, {x, y}), "broadcast");
  EXPECT_COIL_ERROR(g.call(OpId::sin, {x, y}), "at most 1");
  EXPECT_COIL_ERROR(g.call(OpId::transpose, {x, int64_t{0}}), "missing argument 'dim1'");
  EXPECT_COIL_ERROR(g.call(OpId::view, {x, int64_t{3}}), "argument 'size' must be int[]");
  Node* sp = g.call(OpId::split, {x, int64_t{2}});
  EXPECT_INTERNAL_ERROR(g.call(OpId::sin, {sp}), "take one with getitem");
  Graph other;
  Node* z = other.placeholder("z", ops::contiguous_meta(kFloat32, {4, 6}));
  EXPECT_INTERNAL_ERROR(g.call(OpId::sin, {z}), "belongs to another graph");
  EXPECT_INTERNAL_ERROR(g.getitem(x, 0), "not a multi-output call");
  EXPECT_INTERNAL_ERROR(g.getitem(sp, 2), "out of range");
  EXPECT_INTERNAL_ERROR(g.output({sp}), "getitem");
  // Nothing half-built stays behind.
  EXPECT_EQ(g.size(), 3u);
}

TEST(Graph, MultiOutputCallsAreReadThroughGetitem) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {5, 6}));
  Node* sp = g.call(OpId::split, {x, int64_t{2}});
  ASSERT_TRUE(sp->is_multi_output());
  ASSERT_EQ(sp->meta().size(), 3u);
  Node* g2 = g.getitem(sp, 2);
  EXPECT_EQ(g2->name(), "getitem");
  EXPECT_EQ(g2->source(), sp);
  EXPECT_EQ(g2->index(), 2);
  EXPECT_EQ(g2->tensor_meta().sizes, (Shape{1, 6}));
  EXPECT_EQ(g2->tensor_meta().offset, 24);
  EXPECT_EQ(sp->users(), (std::vector<Node*>{g2}));
  g.output({g2});
  verify(g);
}

TEST(Graph, InsertBeforeKeepsTopologicalOrder) {
  Small s;
  Node* n = s.g.call(OpId::cos, {s.a}, s.b);
  std::vector<Node*> order = s.g.nodes();
  EXPECT_EQ(std::find(order.begin(), order.end(), n) + 1,
            std::find(order.begin(), order.end(), s.b));
  verify(s.g);
  // Many insertions at one point exhaust the gaps and renumber: order still holds.
  for (int i = 0; i < 40; ++i) s.g.call(OpId::neg, {s.a}, s.b);
  verify(s.g);
  EXPECT_INTERNAL_ERROR(s.g.call(OpId::cos, {s.b}, s.a), "comes after that point");
  EXPECT_INTERNAL_ERROR(s.g.call(OpId::cos, {s.x}, s.y), "placeholders come first");
}

TEST(Graph, ReplaceAllUsesWithMovesEveryUse) {
  Small s;
  Node* cos = s.g.call(OpId::cos, {s.x}, s.b);
  s.g.replace_all_uses_with(s.a, cos);
  EXPECT_TRUE(s.a->users().empty());
  EXPECT_EQ(cos->users(), (std::vector<Node*>{s.b, s.c}));
  EXPECT_EQ(s.c->inputs(), (std::vector<Node*>{s.b, cos}));
  s.g.erase(s.a);
  EXPECT_EQ(s.g.find("sin"), nullptr);
  EXPECT_EQ(s.x->users(), (std::vector<Node*>{cos}));
  verify(s.g);
}

TEST(Graph, ReplaceAllUsesWithSparesTheReplacementAndReorders) {
  Small s;
  // A node after all uses of `a` that takes `a` itself: the usual "insert after, take over".
  Node* r = s.g.call(OpId::relu, {s.a});
  s.g.replace_all_uses_with(s.a, r);
  EXPECT_EQ(s.a->users(), (std::vector<Node*>{r}));
  EXPECT_EQ(r->users(), (std::vector<Node*>{s.b, s.c}));
  // `r` was created at the end, after its new users: the graph was reordered.
  EXPECT_TRUE(r->is_before(s.b));
  verify(s.g);
  EXPECT_EQ(print_graph(s.g),
            R"(def forward(self, x: "f32[8, 16][16, 1]cpu", y: "f32[16][1]cpu"):
    sin: "f32[8, 16][16, 1]cpu" = coil.sin(x)
    relu: "f32[8, 16][16, 1]cpu" = coil.relu(sin)
    add: "f32[8, 16][16, 1]cpu" = coil.add(relu, y)
    mul: "f32[8, 16][16, 1]cpu" = coil.mul(add, relu)
    return (mul,)
)");
}

TEST(Graph, ReplaceAllUsesWithRejectsCyclesAndShapeChanges) {
  Small s;
  Node* d = s.g.call(OpId::neg, {s.b});  // depends on b, a user of a
  EXPECT_INTERNAL_ERROR(s.g.replace_all_uses_with(s.a, d), "cycle");
  Node* v = s.g.call(OpId::sub, {s.y, s.y});
  EXPECT_INTERNAL_ERROR(s.g.replace_all_uses_with(s.a, v), "same dtypes and sizes");
  Node* i = s.g.call(OpId::to_dtype, {s.x, kFloat64});
  EXPECT_INTERNAL_ERROR(s.g.replace_all_uses_with(s.a, i), "same dtypes and sizes");
  verify(s.g);  // the refusals changed nothing
  EXPECT_EQ(s.a->users(), (std::vector<Node*>{s.b, s.c}));
}

TEST(Graph, ReplaceAllUsesWithRefreshesStridesDownstream) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {3, 4}));
  Node* xt = g.call(OpId::t, {x});                                  // [4, 3] strides [1, 4]
  Node* c = g.call(OpId::contiguous, {xt});                         // [4, 3] strides [3, 1]
  Node* tt = g.call(OpId::transpose, {c, int64_t{0}, int64_t{1}});  // strides [1, 3]
  Node* u = g.call(OpId::unsqueeze, {tt, int64_t{0}});
  g.output({u});
  EXPECT_EQ(u->tensor_meta().strides, (Shape{3, 1, 3}));
  g.replace_all_uses_with(c, xt);
  EXPECT_EQ(tt->tensor_meta().strides, (Shape{4, 1}));
  EXPECT_EQ(u->tensor_meta().strides, (Shape{12, 4, 1}));
  verify(g);
}

TEST(Graph, ReplaceAllUsesWithMovesGetitemsOfMultiOutputCalls) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {4, 6}));
  Node* sp = g.call(OpId::split, {x, int64_t{2}});
  Node* g1 = g.getitem(sp, 1);
  g.output({g1});
  Node* ch = g.call(OpId::chunk, {x, int64_t{2}}, sp);
  g.replace_all_uses_with(sp, ch);
  EXPECT_EQ(g1->source(), ch);
  EXPECT_EQ(ch->users(), (std::vector<Node*>{g1}));
  g.erase(sp);
  verify(g);
  Node* four = g.call(OpId::chunk, {x, int64_t{4}});
  EXPECT_INTERNAL_ERROR(g.replace_all_uses_with(ch, four), "same dtypes and sizes");
}

TEST(Graph, EraseOnlyUnusedNodes) {
  Small s;
  EXPECT_INTERNAL_ERROR(s.g.erase(s.a), "still used by 'add', 'mul'");
  Node* d = s.g.call(OpId::neg, {s.a});
  s.g.erase(d);
  EXPECT_EQ(s.a->users(), (std::vector<Node*>{s.b, s.c}));
  verify(s.g);
  // Erasing the output then everything else, from the back, leaves an empty graph.
  std::vector<Node*> order = s.g.nodes();
  for (auto it = order.rbegin(); it != order.rend(); ++it) s.g.erase(*it);
  EXPECT_EQ(s.g.size(), 0u);
}

TEST(Graph, SetArgsRecomputesMetaAndUsers) {
  Small s;
  Node* z = s.g.placeholder("z", ops::contiguous_meta(kFloat64, {8, 16}));
  s.g.set_args(s.b, {s.a, z});
  EXPECT_EQ(s.b->tensor_meta().dtype, kFloat64);
  EXPECT_EQ(s.c->tensor_meta().dtype, kFloat64);  // refreshed downstream
  EXPECT_TRUE(s.y->users().empty());
  EXPECT_EQ(z->users(), (std::vector<Node*>{s.b}));
  verify(s.g);
  EXPECT_COIL_ERROR(s.g.set_args(s.b, {s.a, s.x, s.x}), "at most 2");
  EXPECT_INTERNAL_ERROR(s.g.set_args(s.b, {s.a, s.c}), "comes after it");
  verify(s.g);
}

TEST(Graph, TopologicalSortIsStable) {
  Small s;
  std::vector<Node*> before = s.g.nodes();
  s.g.topological_sort();
  EXPECT_EQ(s.g.nodes(), before);
  verify(s.g);
}

TEST(Graph, TopologicalSortRepairsOrder) {
  Small s;
  GraphInternals::move_before(s.g, s.c, s.a);  // mul before its inputs
  EXPECT_THROW(verify(s.g), InternalError);
  s.g.topological_sort();
  verify(s.g);
  EXPECT_EQ(s.g.nodes(), (std::vector<Node*>{s.x, s.y, s.a, s.b, s.c, s.out}));
}

TEST(Graph, CloneIsDeepAndIndependent) {
  Small s;
  Node* w = s.g.parameter("w", ones({16}), s.out);
  s.g.output({s.c, w});
  std::unordered_map<const Node*, Node*> map;
  Graph copy = s.g.clone(&map);
  verify(copy);
  EXPECT_EQ(print_graph(copy), print_graph(s.g));
  ASSERT_EQ(map.size(), s.g.size());
  EXPECT_EQ(map.at(s.b)->name(), "add");
  EXPECT_EQ(map.at(s.b)->graph(), &copy);
  EXPECT_TRUE(map.at(w)->value().is_same(w->value()));  // a parameter is a reference
  // Rewriting the copy leaves the original alone; fresh names continue the original's.
  Node* extra = copy.call(OpId::sin, {map.at(s.x)});
  EXPECT_EQ(extra->name(), "sin_1");
  copy.erase(extra);
  copy.replace_all_uses_with(map.at(s.b), map.at(s.a));
  EXPECT_EQ(s.b->users(), (std::vector<Node*>{s.c}));
  verify(s.g);
  verify(copy);
}

TEST(Graph, MoveKeepsNodesPointingAtTheirGraph) {
  Small s;
  Graph moved = std::move(s.g);
  for (Node* n : moved.nodes()) EXPECT_EQ(n->graph(), &moved);
  moved.call(OpId::cos, {s.c});
  verify(moved);
}

TEST(Graph, ConstantsAreContiguousCopies) {
  Graph g;
  Tensor src = arange(6, kFloat32).view({2, 3}).t();
  Node* c = g.constant(src);
  EXPECT_TRUE(c->value().is_contiguous());
  EXPECT_FALSE(c->value().shares_storage(src));
  EXPECT_EQ(c->value().to_vector_double(), src.to_vector_double());
  EXPECT_COIL_ERROR(g.constant(meta_tensor(ops::contiguous_meta(kFloat32, {2}))), "has no data");
  g.output({c});
  verify(g);
}

// ---- the verifier catches each kind of corruption --------------------------------------------

TEST(GraphVerifier, CatchesUsersListCorruption) {
  {
    Small s;
    std::erase(GraphInternals::users(s.a), s.c);
    EXPECT_INTERNAL_ERROR(verify(s.g), "'mul' takes it as an argument but is not in its users");
  }
  {
    Small s;
    GraphInternals::users(s.a).push_back(s.b);
    EXPECT_INTERNAL_ERROR(verify(s.g), "'add' is twice in its users list");
  }
  {
    Small s;
    GraphInternals::users(s.y).push_back(s.c);
    EXPECT_INTERNAL_ERROR(verify(s.g), "holds 'mul', which does not take it as an argument");
  }
}

TEST(GraphVerifier, CatchesOrderAndStructureCorruption) {
  {
    Small s;
    GraphInternals::swap_positions(s.b, s.c);
    EXPECT_INTERNAL_ERROR(verify(s.g), "position number");
  }
  {
    Small s;
    GraphInternals::move_before(s.g, s.b, s.a);
    EXPECT_INTERNAL_ERROR(verify(s.g), "node 'add' (call): its input 'sin' does not come before");
  }
  {
    Small s;
    GraphInternals::move_before(s.g, s.a, s.y);
    EXPECT_INTERNAL_ERROR(verify(s.g), "placeholders must come first");
  }
  {
    Small s;
    GraphInternals::append_output(s.g);
    EXPECT_INTERNAL_ERROR(verify(s.g), "the output node is not the last node");
  }
  {
    Small s;
    s.g.erase(s.out);
    EXPECT_INTERNAL_ERROR(verify(s.g), "has 0 output nodes");
  }
  {
    Small s;
    GraphInternals::rename(s.b, "sin");
    EXPECT_INTERNAL_ERROR(verify(s.g), "another node has the same name");
  }
}

TEST(GraphVerifier, CatchesBadArgumentsAndMeta) {
  {
    Small s;
    GraphInternals::meta(s.b)[0].sizes = {8, 17};
    EXPECT_INTERNAL_ERROR(verify(s.g), "differs from what coil.add computes");
  }
  {
    Small s;
    GraphInternals::meta(s.b)[0].dtype = kFloat64;
    // The stored meta of `add` is wrong, and so is what `mul` was computed from.
    EXPECT_INTERNAL_ERROR(verify(s.g), "node 'add' (call): its stored meta");
  }
  {
    Small s;
    GraphInternals::args(s.a).push_back(int64_t{1});
    EXPECT_INTERNAL_ERROR(verify(s.g), "coil.sin has 2 arguments but its schema");
  }
  {
    Small s;
    GraphInternals::args(s.b)[1] = std::string("oops");
    std::erase(GraphInternals::users(s.y), s.b);
    EXPECT_INTERNAL_ERROR(verify(s.g), "argument 'other' is str but the schema wants Tensor");
  }
  {
    Small s;
    Graph other;
    Node* z = other.placeholder("z", ops::contiguous_meta(kFloat32, {16}));
    GraphInternals::args(s.b)[1] = z;
    std::erase(GraphInternals::users(s.y), s.b);
    EXPECT_INTERNAL_ERROR(verify(s.g), "an argument is not a node of this graph");
  }
  {
    Small s;
    Node* y2 = s.g.placeholder("y2", ops::contiguous_meta(kFloat32, {3}));
    GraphInternals::args(s.b)[1] = y2;  // users kept consistent: only the meta is wrong
    std::erase(GraphInternals::users(s.y), s.b);
    GraphInternals::users(y2).push_back(s.b);
    EXPECT_INTERNAL_ERROR(verify(s.g), "the meta function rejects its arguments");
  }
}

// ---- DOT ----------------------------------------------------------------------------------------

TEST(GraphDot, HasEveryNodeAndEdge) {
  Small s;
  std::string dot = to_dot(s.g);
  EXPECT_EQ(dot.rfind("digraph graph_ir {", 0), 0u);
  EXPECT_NE(dot.find("n2 [label=\"sin\\ncoil.sin\\nf32[8, 16][16, 1]cpu\"]"), std::string::npos)
      << dot;
  EXPECT_NE(dot.find("n0 [label=\"x\\nplaceholder\\nf32[8, 16][16, 1]cpu\"]"), std::string::npos);
  EXPECT_NE(dot.find("n5 [label=\"output\\noutput\"]"), std::string::npos);
  for (const char* edge :
       {"n0 -> n2;", "n2 -> n3;", "n1 -> n3;", "n3 -> n4;", "n2 -> n4;", "n4 -> n5;"})
    EXPECT_NE(dot.find(edge), std::string::npos) << edge << "\n" << dot;
  EXPECT_EQ(std::count(dot.begin(), dot.end(), '>'), 6);  // no duplicate edges
  EXPECT_EQ(dot.find("cluster"), std::string::npos);
}

TEST(GraphDot, GroupsBecomeColouredClusters) {
  Small s;
  std::string dot = to_dot(s.g, {{s.a, 0}, {s.b, 0}, {s.c, 1}});
  size_t c0 = dot.find("subgraph cluster_0 {"), c1 = dot.find("subgraph cluster_1 {");
  ASSERT_NE(c0, std::string::npos) << dot;
  ASSERT_NE(c1, std::string::npos) << dot;
  size_t sin = dot.find("n2 [label=\"sin"), add = dot.find("n3 [label=\"add"),
         mul = dot.find("n4 [label=\"mul");
  EXPECT_TRUE(c0 < sin && sin < c1 && c0 < add && add < c1 && c1 < mul) << dot;
  std::string sin_line = dot.substr(sin, dot.find('\n', sin) - sin);
  std::string mul_line = dot.substr(mul, dot.find('\n', mul) - mul);
  EXPECT_NE(sin_line.find("fillcolor=\"#"), std::string::npos);
  EXPECT_NE(sin_line.substr(sin_line.find("fillcolor")),
            mul_line.substr(mul_line.find("fillcolor")));
}

}  // namespace
