// The graph IR (FX's Graph): a mutable DAG of Nodes in topological order, each carrying the
// meta (dtype, sizes, strides, device) that eager would produce for it. Capture writes it;
// autograd, decompositions, passes and lowering read and rewrite it.
//
// Invariants the Graph keeps (and verify() checks): nodes are in topological order with the
// placeholders first and the output node, when there is one, last; every node's users list
// holds exactly the nodes that take it as an argument, once each; every call's arguments
// are normalized (one per schema argument, in the canonical alternative parse_literal
// yields) and its meta is what run_meta computes for them; names are unique identifiers.
#pragma once

#include <list>
#include <optional>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <variant>
#include <vector>

#include "graph/registry.h"
#include "graph/shape_env.h"

namespace coil {

class Node;
class Graph;

// A call node's argument: an Arg with each Tensor replaced by the Node that computes it.
// The alternatives are in Arg's order, so index() means the same kind in both.
using NodeArg = std::variant<std::monostate, Node*, std::vector<Node*>, Scalar, int64_t, double,
                             bool, Shape, DType, std::string, Device, SymIntArg, SymIntsArg>;

// The Arg a NodeArg stands for, with every node replaced by tensor_of(node).
template <typename F>
Arg to_arg(const NodeArg& a, F&& tensor_of) {
  return std::visit(
      [&](const auto& v) -> Arg {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Node*>) {
          return tensor_of(v);
        } else if constexpr (std::is_same_v<T, std::vector<Node*>>) {
          std::vector<Tensor> ts;
          for (Node* n : v) ts.push_back(tensor_of(n));
          return ts;
        } else {
          return v;
        }
      },
      a);
}
// A literal (non-tensor) Arg as a NodeArg; throws InternalError for a tensor.
NodeArg to_node_arg(const Arg& a);
// The argument as a node (nullptr when it is a plain number or not a tensor).
Node* node_arg(const NodeArg& a);

enum class NodeKind : uint8_t {
  Placeholder,  // a graph input, bound by position
  Parameter,    // a tensor captured by reference (a module weight): its value is not copied
  Constant,     // a small literal tensor owned by the graph
  Call,         // an op applied to normalized arguments
  GetItem,      // one output of a multi-output call (split, chunk)
  Output,       // the graph's results
};
const char* node_kind_name(NodeKind k);

class Node {
 public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  NodeKind kind() const { return kind_; }
  const std::string& name() const { return name_; }
  Graph* graph() const { return graph_; }

  // Call: the op and its normalized arguments (one per schema argument).
  // GetItem: {source, index}. Output: {results}. Others: empty.
  OpId op() const;
  const std::vector<NodeArg>& args() const { return args_; }
  // One TensorMeta per output: none for the output node, several for a multi-output call.
  const std::vector<TensorMeta>& meta() const { return meta_; }
  // The meta of a node with exactly one output (InternalError otherwise).
  const TensorMeta& tensor_meta() const;
  // Output i's geometry over the graph's size symbols (graph/shape_env.h): in a dynamic graph,
  // what meta() holds for the hints generalised; in a static one, meta()'s numbers.
  // Simplified by what the env has learned since (symbols unified or specialised are replaced);
  // `as_made` gives it as computed, over the symbols the inputs declared (what binds them).
  SymLayout sym_layout(size_t i = 0, bool as_made = false) const;
  bool is_multi_output() const { return kind_ == NodeKind::Call && op_info(op_).returns_list(); }

  // The nodes that take this one as an argument, each once, in the order they started to.
  const std::vector<Node*>& users() const { return users_; }
  // The nodes this one takes as arguments, each once, in argument order.
  std::vector<Node*> inputs() const;

  const Tensor& value() const;                // Parameter, Constant
  const std::string& target() const;          // Parameter: its qualified name ("fc.weight")
  Node* source() const;                       // GetItem
  int64_t index() const;                      // GetItem
  const std::vector<Node*>& results() const;  // Output

  // Whether this node comes before `other` in the graph's order (same graph).
  bool is_before(const Node* other) const { return pos_ < other->pos_; }

 private:
  friend class Graph;
  friend struct GraphInternals;  // tests reach in to corrupt graphs for the verifier
  Node(Graph* g, NodeKind kind) : graph_(g), kind_(kind) {}

  Graph* graph_;
  NodeKind kind_;
  std::string name_;
  OpId op_{};
  std::vector<NodeArg> args_;
  std::vector<TensorMeta> meta_;
  std::vector<SymLayout> sym_;  // empty when every output is static
  std::vector<Node*> users_;
  Tensor value_;        // Parameter, Constant
  std::string target_;  // Parameter
  int64_t pos_ = 0;     // increasing along the node list (with gaps for cheap insertion)
  std::list<std::unique_ptr<Node>>::iterator self_;
};

class Graph {
 public:
  Graph() = default;
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;  // use clone()
  Graph& operator=(const Graph&) = delete;
  ~Graph() = default;

  // ---- creating nodes: each gets a fresh name ("sin", "sin_1", ...). Nodes are inserted
  // before `before` when given, else at the end (before the output node, if any).
  // After the last one; `layout`, when given, is its geometry over size symbols (a dynamic
  // graph's input), `meta` then holds the hints.
  Node* placeholder(const std::string& name, const TensorMeta& meta,
                    const std::optional<SymLayout>& layout = std::nullopt);
  Node* parameter(const std::string& target, const Tensor& value, Node* before = nullptr);
  Node* constant(const Tensor& value, Node* before = nullptr);  // stores a contiguous copy
  // Fills defaults, checks argument types (coil::Error naming the op) and computes the meta
  // with the op's meta function (whose coil::Error propagates).
  Node* call(OpId op, std::vector<NodeArg> args, Node* before = nullptr);
  Node* getitem(Node* source, int64_t index, Node* before = nullptr);
  // Sets the graph's results; creates the output node the first time.
  Node* output(std::vector<Node*> results);

  // ---- rewriting
  // Gives a call node new arguments (normalized as call() does) and refreshes the meta of
  // the nodes downstream.
  void set_args(Node* node, std::vector<NodeArg> args);
  // Makes every user of `old_node` (except `new_node` itself, so that a node inserted after
  // `old_node` can take over its uses) use `new_node` instead. Both must produce the same
  // dtypes, sizes and devices; strides may differ, and downstream meta is refreshed.
  // Reorders the graph if a user came before `new_node`.
  void replace_all_uses_with(Node* old_node, Node* new_node);
  // Removes a node that has no users (InternalError otherwise).
  void erase(Node* node);
  // Renames a node; coil::Error when the name is not an identifier or is taken.
  void set_name(Node* node, const std::string& name);
  // Restores topological order, moving as few nodes as possible (a stable sort).
  void topological_sort();

  // A deep copy with the same names; `mapping`, when given, receives old node -> new node.
  // Parameters still reference the same tensors; constants share their (immutable) data.
  Graph clone(std::unordered_map<const Node*, Node*>* mapping = nullptr) const;

  // ---- dynamic shapes: a graph with a ShapeEnv may have symbolic sizes; its calls get their
  // symbolic layouts from the shape rules (graph/sym_rules.h), guarded in the env.
  const std::shared_ptr<ShapeEnv>& shape_env() const { return shape_env_; }
  void set_shape_env(std::shared_ptr<ShapeEnv> env) { shape_env_ = std::move(env); }
  bool is_dynamic() const;  // some node's layout is symbolic

  // ---- results the caller writes back into inputs (a function's in-place updates of its
  // arguments: an optimizer's parameters), as (result index, placeholder index): the compiled
  // code may then write such a result into the input's memory itself.
  const std::vector<std::pair<size_t, size_t>>& written_back() const { return written_back_; }
  void set_written_back(std::vector<std::pair<size_t, size_t>> w) { written_back_ = std::move(w); }

  // ---- reading
  std::vector<Node*> nodes() const;         // in order
  std::vector<Node*> placeholders() const;  // the inputs, in order
  Node* output_node() const;                // nullptr while there is none
  Node* find(const std::string& name) const;
  size_t size() const { return nodes_.size(); }

 private:
  friend struct GraphInternals;
  Node* insert(std::unique_ptr<Node> node, Node* before, const std::string& base_name);
  void check_owned(const Node* n, const char* what) const;
  void check_before_point(const Node* n, const Node* before) const;
  std::string fresh_name(const std::string& base);
  void add_use(Node* user);
  void remove_use(Node* user);
  void refresh_meta(const std::vector<Node*>& start);
  void renumber();

  void compute_sym(Node* n);

  std::list<std::unique_ptr<Node>> nodes_;
  std::shared_ptr<ShapeEnv> shape_env_;
  std::vector<std::pair<size_t, size_t>> written_back_;
  std::unordered_map<std::string, Node*> by_name_;
  std::unordered_map<std::string, int64_t> next_suffix_;
};

// Checks every invariant listed at the top of this file; throws coil::InternalError saying
// which node breaks which rule.
void verify(const Graph& g);

}  // namespace coil
