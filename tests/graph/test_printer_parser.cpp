// The graph_code printer and its parser: golden text for small graphs, print -> parse -> print
// for an example of every op, constants and parameters, and parse errors with line:column.
#include <cmath>
#include <iostream>
#include <set>

#include "graph/parser.h"
#include "graph/printer.h"
#include "op_examples.h"

using namespace coil;
using namespace coil::testing;

namespace {

// print(parse(print(g))) == print(g), and the parsed graph verifies.
void expect_round_trip(const Graph& g, const std::map<std::string, Tensor>& params = {}) {
  std::string text = print_graph(g);
  Graph parsed = parse_graph(text, params);
  verify(parsed);
  EXPECT_EQ(print_graph(parsed), text);
}

TEST(GraphPrinter, MetaAnnotations) {
  EXPECT_EQ(meta_str(ops::contiguous_meta(kFloat32, {8, 16})), "f32[8, 16][16, 1]cpu");
  EXPECT_EQ(meta_str(ops::contiguous_meta(kBFloat16, {})), "bf16[][]cpu");
  EXPECT_EQ(meta_str(TensorMeta{kInt64, {3}, {2}, 5, kCUDA}), "i64[3][2]cuda:0+5");
}

TEST(GraphPrinter, GoldenGraphCode) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {8, 16}));
  Node* y = g.placeholder("y", ops::contiguous_meta(kFloat32, {16}));
  Node* sin = g.call(OpId::sin, {x});
  Node* add = g.call(OpId::add, {sin, y});
  Node* t = g.call(OpId::transpose, {add, int64_t{0}, int64_t{1}});
  Node* gelu = g.call(OpId::gelu, {t, std::string("tanh")});
  g.output({add, gelu});
  const char* expected =
      R"(def forward(self, x: "f32[8, 16][16, 1]cpu", y: "f32[16][1]cpu"):
    sin: "f32[8, 16][16, 1]cpu" = coil.sin(x)
    add: "f32[8, 16][16, 1]cpu" = coil.add(sin, y)
    transpose: "f32[16, 8][1, 16]cpu" = coil.transpose(add, 0, 1)
    gelu: "f32[16, 8][8, 1]cpu" = coil.gelu(transpose, "tanh")
    return (add, gelu)
)";
  EXPECT_EQ(print_graph(g), expected);
  expect_round_trip(g);
}

// The example of DESIGN.md / the brief, once sum's meta function exists.
TEST(GraphPrinter, GoldenWithReduction) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {8, 16}));
  Node* y = g.placeholder("y", ops::contiguous_meta(kFloat32, {16}));
  Node* sin = g.call(OpId::sin, {x});
  Node* add = g.call(OpId::add, {sin, y});
  Node* sum = nullptr;
  try {
    sum = g.call(OpId::sum, {add, Shape{0, 1}});
  } catch (const Error& e) {
    if (is_pending(e)) GTEST_SKIP() << e.what();
    throw;
  }
  g.output({add, sum});
  EXPECT_EQ(print_graph(g),
            R"(def forward(self, x: "f32[8, 16][16, 1]cpu", y: "f32[16][1]cpu"):
    sin: "f32[8, 16][16, 1]cpu" = coil.sin(x)
    add: "f32[8, 16][16, 1]cpu" = coil.add(sin, y)
    sum_1: "f32[][]cpu" = coil.sum(add, [0, 1])
    return (add, sum_1)
)");
  expect_round_trip(g);
}

// Parameters, constants, multi-output calls, defaults skipped (then keywords), numbers as
// tensors, and a storage offset.
TEST(GraphPrinter, GoldenEveryNodeKind) {
  Graph g;
  Node* x = g.placeholder("x", ops::contiguous_meta(kFloat32, {4, 6}));
  Node* w = g.parameter("fc.weight", ones({6}));
  Node* c = g.constant(full({2}, 0.1));
  Node* mul = g.call(OpId::mul, {x, w});
  Node* sp = g.call(OpId::split, {mul, int64_t{2}});
  Node* g0 = g.getitem(sp, 0);
  Node* g1 = g.getitem(sp, 1);
  Node* sl = g.call(OpId::slice, {g1, int64_t{1}, NodeArg{}, NodeArg{}, int64_t{2}});
  Node* cl = g.call(OpId::clamp, {sl, NodeArg{}, 0.5});
  Node* add = g.call(OpId::add, {g0, Scalar(2)});
  g.output({cl, add, c});
  EXPECT_EQ(print_graph(g),
            R"(def forward(self, x: "f32[4, 6][6, 1]cpu"):
    fc_weight: "f32[6][1]cpu" = coil.parameter("fc.weight")
    constant: "f32[2][1]cpu" = coil.constant([0.1, 0.1])
    mul: "f32[4, 6][6, 1]cpu" = coil.mul(x, fc_weight)
    split = coil.split(mul, 2)
    getitem: "f32[2, 6][6, 1]cpu" = split[0]
    getitem_1: "f32[2, 6][6, 1]cpu+12" = split[1]
    slice_1: "f32[2, 3][6, 2]cpu+12" = coil.slice(getitem_1, 1, step=2)
    clamp: "f32[2, 3][3, 1]cpu" = coil.clamp(slice_1, max=0.5)
    add: "f32[2, 6][6, 1]cpu" = coil.add(getitem, 2)
    return (clamp, add, constant)
)");
  expect_round_trip(g, {{"fc.weight", w->value()}});
  expect_round_trip(g);  // unbound: the parameter becomes a proxy with the same meta
}

TEST(GraphPrinter, EmptyAndSingleResults) {
  Graph g;
  g.output({});
  EXPECT_EQ(print_graph(g), R"(def forward(self):
    return ()
)");
  expect_round_trip(g);
  Graph h;
  h.output({h.placeholder("x", ops::contiguous_meta(kInt64, {}))});
  EXPECT_EQ(print_graph(h), R"(def forward(self, x: "i64[][]cpu"):
    return (x,)
)");
  expect_round_trip(h);
}

// Every op with an example, as a graph of its own; ops still pending are reported, not failed.
TEST(GraphPrinter, RoundTripEveryOp) {
  std::set<std::string> pending;
  int done = 0;
  for (const OpExample& ex : op_examples()) {
    SCOPED_TRACE(ex.op);
    Graph g;
    try {
      g = example_graph(ex);
    } catch (const Error& e) {
      if (!is_pending(e)) throw;
      pending.insert(ex.op);
      continue;
    }
    verify(g);
    expect_round_trip(g);
    ++done;
  }
  EXPECT_GT(done, 100);
  for (const auto& op : pending) std::cout << "[ pending  ] " << op << ": not implemented yet\n";
}

TEST(GraphPrinter, EveryOpHasAnExample) {
  for (int i = 0; i < kNumOps; ++i) {
    const char* name = op_name(static_cast<OpId>(i));
    bool found = false;
    for (const OpExample& ex : op_examples()) found = found || std::string(ex.op) == name;
    EXPECT_TRUE(found) << "op '" << name << "' has no example in tests/graph/op_examples.h";
  }
}

TEST(GraphPrinter, NonContiguousInputsAndOffsets) {
  Graph g;
  Node* x = g.placeholder("x", TensorMeta{kFloat64, {3, 4}, {1, 3}, 2, kCPU});
  Node* s = g.call(OpId::select, {x, int64_t{1}, int64_t{2}});
  g.output({s, g.call(OpId::exp, {s})});
  std::string text = print_graph(g);
  EXPECT_NE(text.find("x: \"f64[3, 4][1, 3]cpu+2\""), std::string::npos) << text;
  EXPECT_NE(text.find("select: \"f64[3][1]cpu+8\""), std::string::npos) << text;
  expect_round_trip(g);
}

TEST(GraphPrinter, ConstantsOfEveryDtypeRoundTripExactly) {
  std::vector<double> vals = {0.1, -2.5, 1e-5, 3e4, -0.0, 1.0 / 3, INFINITY, -INFINITY, NAN};
  for (DType t : {kFloat32, kFloat64, kFloat16, kBFloat16}) {
    SCOPED_TRACE(dtype_name(t));
    Tensor v = empty({static_cast<int64_t>(vals.size())}, kFloat64);
    for (size_t i = 0; i < vals.size(); ++i) v[static_cast<int64_t>(i)].fill_(vals[i]);
    Graph g;
    Node* c = g.constant(v.to(t));
    g.output({c});
    Graph parsed = parse_graph(print_graph(g));
    const Tensor& back = parsed.find("constant")->value();
    EXPECT_EQ(back.dtype(), t);
    std::vector<double> a = c->value().to_vector_double(), b = back.to_vector_double();
    for (size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(a[i])) {
        EXPECT_TRUE(std::isnan(b[i]));
      } else {
        EXPECT_EQ(a[i], b[i]) << "element " << i;
        EXPECT_EQ(std::signbit(a[i]), std::signbit(b[i])) << "element " << i;
      }
    }
    expect_round_trip(g);
  }
  Graph g;
  Node* i8 = g.constant(arange(-3, 3, 1, kInt8).view({2, 3}));
  Node* u8 = g.constant(full({2}, 255, kUInt8));
  Node* b = g.constant(arange(4).view({2, 2}) > 1);
  Node* zero_dim = g.constant(full({}, int64_t{1} << 40, kInt64));
  Node* empty_c = g.constant(zeros({0, 3}, kInt32));
  g.output({i8, u8, b, zero_dim, empty_c});
  std::string text = print_graph(g);
  EXPECT_NE(text.find("constant: \"i8[2, 3][3, 1]cpu\" = coil.constant([-3, -2, -1, 0, 1, 2])"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("= coil.constant([255, 255])"), std::string::npos) << text;
  EXPECT_NE(text.find("= coil.constant([False, False, True, True])"), std::string::npos) << text;
  EXPECT_NE(text.find("\"i64[][]cpu\" = coil.constant([1099511627776])"), std::string::npos);
  EXPECT_NE(text.find("\"i32[0, 3][3, 1]cpu\" = coil.constant([])"), std::string::npos) << text;
  expect_round_trip(g);
}

// ---- the parser ------------------------------------------------------------------------------

TEST(GraphParser, ReadsHandWrittenText) {
  // No annotations on calls, comments, blank lines, spaced keywords, a trailing comma.
  Graph g = parse_graph(
      R"(# a hand-written graph
def forward(self, x: "f32[4, 6][6, 1]cpu", y: "f32[6][1]cpu",):

    a = coil.add(x, y)   # broadcast
    b = coil.gelu(a, approximate = "tanh")
    c = coil.slice(b, dim=1, end=4)
    return (c, a,)
)");
  verify(g);
  EXPECT_EQ(print_graph(g),
            R"(def forward(self, x: "f32[4, 6][6, 1]cpu", y: "f32[6][1]cpu"):
    a: "f32[4, 6][6, 1]cpu" = coil.add(x, y)
    b: "f32[4, 6][6, 1]cpu" = coil.gelu(a, "tanh")
    c: "f32[4, 4][6, 1]cpu" = coil.slice(b, 1, end=4)
    return (c, a)
)");
  // New nodes get fresh names that do not clash with the parsed ones.
  EXPECT_EQ(g.call(OpId::sin, {g.find("a")})->name(), "sin");
}

TEST(GraphParser, BindsParametersByTarget) {
  const char* text =
      R"(def forward(self, x: "f32[2, 3][3, 1]cpu"):
    w: "f32[3][1]cpu" = coil.parameter("layer.w")
    m = coil.mul(x, w)
    return (m,)
)";
  Tensor w = arange(3, kFloat32);
  Graph g = parse_graph(text, {{"layer.w", w}});
  EXPECT_TRUE(g.find("w")->value().is_same(w));
  EXPECT_EQ(g.find("w")->target(), "layer.w");
  EXPECT_COIL_ERROR(parse_graph(text, {{"layer.w", arange(4, kFloat32)}}),
                    "line 2:9: parameter \"layer.w\" is f32[4][1]cpu but the annotation says "
                    "f32[3][1]cpu");
  Graph unbound = parse_graph(text);
  EXPECT_FALSE(unbound.find("w")->value().has_storage());
  verify(unbound);
}

// The message of parse_graph(text)'s coil::Error.
std::string parse_error(const std::string& text) {
  try {
    parse_graph(text);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error parsing:\n" << text;
  return "";
}

const char* kHead = "def forward(self, x: \"f32[4, 6][6, 1]cpu\", y: \"f32[6][1]cpu\"):\n";

// `body` followed by a return of `ret`.
std::string with(const std::string& body, const std::string& ret = "x") {
  return kHead + body + "    return (" + ret + ",)\n";
}

#define EXPECT_PARSE_ERROR(text, substr)                                      \
  do {                                                                        \
    std::string msg = parse_error(text);                                      \
    EXPECT_NE(msg.find(substr), std::string::npos) << "message was: " << msg; \
  } while (0)

TEST(GraphParser, ErrorsNameLineAndColumn) {
  EXPECT_PARSE_ERROR(with("    s = coil.sine(x)\n"), "line 2:14: unknown op 'coil.sine'");
  EXPECT_PARSE_ERROR(with("    a = coil.add(x, z)\n"), "line 2:21: undefined name 'z'");
  EXPECT_PARSE_ERROR(with("    s = coil.sin(x, y)\n"), "line 2:21: coil.sin takes 1 arguments");
  EXPECT_PARSE_ERROR(with("    v = coil.view(x, 3)\n"),
                     "line 2:22: argument 'size' of coil.view: cannot read '3' as a value of "
                     "type int[]");
  EXPECT_PARSE_ERROR(with("    v = coil.mm(x, 3)\n"),
                     "line 2:20: coil.mm: argument 'mat2' must be Tensor but got Scalar");
  EXPECT_PARSE_ERROR(with("    v = coil.transpose(x, 0)\n"),
                     "line 2:28: coil.transpose: missing argument 'dim1'");
  EXPECT_PARSE_ERROR(with("    s: \"f32[4, 6][1, 4]cpu\" = coil.sin(x)\n"),
                     "line 2:9: the annotation says f32[4, 6][1, 4]cpu but coil.sin computes "
                     "f32[4, 6][6, 1]cpu");
  EXPECT_PARSE_ERROR(with("    a = coil.add(x, x)\n    a = coil.sin(x)\n"),
                     "line 3:5: 'a' is already defined");
  EXPECT_PARSE_ERROR(with("    a = coil.amax(x, dims=[0])\n"),
                     "line 2:22: coil.amax has no argument 'dims'");
  EXPECT_PARSE_ERROR(with("    a = coil.amax(x, keepdim=True, [0])\n"),
                     "line 2:36: a positional argument cannot follow a keyword argument");
  EXPECT_PARSE_ERROR(with("    a = coil.amax(x, [0], dim=[1])\n"),
                     "line 2:27: argument 'dim' is given twice");
  EXPECT_PARSE_ERROR(with("    a = coil.sin(x\n"),
                     "line 2:18: unterminated argument list: missing ')'");
  EXPECT_PARSE_ERROR(with("    a coil.sin(x)\n"), "line 2:7: expected '=' after 'a'");
  EXPECT_PARSE_ERROR(with("    a = torch.sin(x)\n"), "line 2:9: undefined name 'torch'");
  EXPECT_PARSE_ERROR(with("    a = coil.sin(x) + 1\n"), "line 2:21: unexpected text");
  EXPECT_PARSE_ERROR(with("    None = coil.sin(x)\n"), "line 2:5: 'None' cannot name a node");
}

TEST(GraphParser, ErrorsOnAnnotations) {
  EXPECT_PARSE_ERROR(R"(def forward(self, x: "f33[4][1]cpu"):
    return (x,)
)",
                     "line 1:23: bad annotation \"f33[4][1]cpu\": unknown dtype 'f33'");
  EXPECT_PARSE_ERROR(R"(def forward(self, x: "f32[4]cpu"):
    return (x,)
)",
                     "line 1:29: bad annotation \"f32[4]cpu\": no strides");
  EXPECT_PARSE_ERROR(R"(def forward(self, x: "f32[4][1, 1]cpu"):
    return (x,)
)",
                     "sizes and strides differ in length");
  EXPECT_PARSE_ERROR(R"(def forward(self, x: "f32[4][1]gpu"):
    return (x,)
)",
                     "line 1:32: bad annotation \"f32[4][1]gpu\": unknown device 'gpu'");
  EXPECT_PARSE_ERROR(R"(def forward(self, x: "f32[a][1]cpu"):
    return (x,)
)",
                     "cannot read '[a]' as a value of type int[]");
  EXPECT_PARSE_ERROR(R"(def forward(self, x):
    return (x,)
)",
                     "line 1:20: expected ':' and an annotation after input 'x'");
  EXPECT_PARSE_ERROR(R"(def forward(self, x: "f32[4][1]cpu):
    return (x,)
)",
                     "line 1:22: unterminated string");
}

TEST(GraphParser, ErrorsOnStructure) {
  EXPECT_PARSE_ERROR("", "line 1:1: empty graph text");
  EXPECT_PARSE_ERROR("a = coil.sin(x)\n", "line 1:1: expected 'def forward(self, ...):'");
  EXPECT_PARSE_ERROR(std::string(kHead) + "    a = coil.sin(x)\n",
                     "line 2:20: missing 'return (...)'");
  EXPECT_PARSE_ERROR(with("") + "    a = coil.sin(x)\n",
                     "line 3:5: nothing may follow the return statement");
  EXPECT_PARSE_ERROR(kHead + std::string("    return (x, q)\n"), "line 2:16: undefined name 'q'");
  EXPECT_PARSE_ERROR(with("    a = coil.add(x, coil.sin(y))\n"),
                     "line 2:21: argument 'other' of coil.add: cannot read 'coil.sin(y)'");
}

TEST(GraphParser, ErrorsOnMultiOutputUse) {
  std::string split = "    sp = coil.split(x, 2)\n";
  EXPECT_PARSE_ERROR(with(split + "    s = coil.sin(sp)\n"),
                     "line 3:18: 'sp' has 2 outputs; take one with sp[i]");
  EXPECT_PARSE_ERROR(with(split + "    g = sp[5]\n"),
                     "line 3:12: index 5 is out of range: 'sp' has 2 outputs");
  EXPECT_PARSE_ERROR(with("    g = x[0]\n"), "line 2:9: 'x' is not a multi-output call");
  EXPECT_PARSE_ERROR(with("    sp: \"f32[2, 6][6, 1]cpu\" = coil.split(x, 2)\n"),
                     "line 2:10: coil.split returns 2 tensors: leave the annotation out");
  EXPECT_PARSE_ERROR(with(split, "sp"), "'sp' has 2 outputs");
}

TEST(GraphParser, ErrorsFromMetaFunctionsAndConstants) {
  EXPECT_PARSE_ERROR(
      R"(def forward(self, x: "f32[4, 6][6, 1]cpu", z: "f32[5][1]cpu"):
    a = coil.add(x, z)
    return (a,)
)",
      "line 2:14: add: shapes [4, 6] and [5] cannot be broadcast");
  EXPECT_PARSE_ERROR(with("    c: \"f32[3][1]cpu\" = coil.constant([1.0, 2.0])\n"),
                     "line 2:39: the annotation's shape [3] holds 3 values but the list has 2");
  EXPECT_PARSE_ERROR(with("    c: \"i64[2][1]cpu\" = coil.constant([1, 2.5])\n"),
                     "line 2:43: an integer constant holds integers, not 2.5");
  EXPECT_PARSE_ERROR(with("    c: \"f32[2][2]cpu\" = coil.constant([1.0, 2.0])\n"),
                     "line 2:9: a constant is contiguous: its strides must be [1]");
  EXPECT_PARSE_ERROR(with("    c = coil.constant([1.0])\n"),
                     "line 2:5: coil.constant needs an annotation");
  EXPECT_PARSE_ERROR(with("    w = coil.parameter(\"w\")\n"),
                     "line 2:5: coil.parameter needs an annotation");
}

TEST(GraphParser, ErrorShowsTheLineAndACaret) {
  std::string msg = parse_error(with("    a = coil.add(x, z)\n"));
  EXPECT_NE(msg.find("\n      a = coil.add(x, z)\n                      ^"), std::string::npos)
      << msg;
}

}  // namespace
