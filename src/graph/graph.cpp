#include "graph/graph.h"

#include <algorithm>
#include <cctype>
#include <unordered_set>

#include "graph/graph_util.h"
#include "graph/sym_rules.h"
#include "runtime/copy.h"

namespace coil {

namespace {
constexpr int64_t kGap = 1 << 16;  // room for many insertions between two nodes

// FX avoids names that shadow Python builtins, so the first coil.sum is `sum_1`.
bool shadows_builtin(const std::string& s) {
  static const std::unordered_set<std::string> builtins = {
      "abs",   "all",  "any",  "round", "sum",  "pow",    "min",    "max",   "slice",
      "len",   "list", "dict", "set",   "int",  "float",  "bool",   "str",   "type",
      "id",    "map",  "iter", "next",  "zip",  "range",  "tuple",  "hash",  "input",
      "print", "open", "eval", "exec",  "vars", "format", "object", "filter"};
  return builtins.count(s) > 0;
}

// Turns a qualified name like "layer1.0.weight" into an identifier.
std::string sanitize(const std::string& base) {
  std::string s;
  for (char c : base) s += std::isalnum(static_cast<unsigned char>(c)) || c == '_' ? c : '_';
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) s = "_" + s;
  return s;
}

template <typename F>
void for_each_node_arg(const std::vector<NodeArg>& args, F f) {
  for (const NodeArg& a : args) {
    if (auto* n = std::get_if<Node*>(&a)) f(*n);
    if (auto* v = std::get_if<std::vector<Node*>>(&a))
      for (Node* n : *v) f(n);
  }
}

}  // namespace

// ---- Node --------------------------------------------------------------------------------

const char* node_kind_name(NodeKind k) {
  static const char* names[] = {"placeholder", "parameter", "constant",
                                "call",        "getitem",   "output"};
  return names[static_cast<int>(k)];
}

Node* node_arg(const NodeArg& a) {
  const auto* n = std::get_if<Node*>(&a);
  return n ? *n : nullptr;
}

NodeArg to_node_arg(const Arg& a) {
  return std::visit(
      [](const auto& v) -> NodeArg {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Tensor> || std::is_same_v<T, std::vector<Tensor>>) {
          COIL_ASSERT(false, "a tensor argument has no literal NodeArg form");
          return {};
        } else {
          return v;
        }
      },
      a);
}

OpId Node::op() const {
  COIL_ASSERT(kind_ == NodeKind::Call, "node '", name_, "' is a ", node_kind_name(kind_),
              ", not a call");
  return op_;
}

const TensorMeta& Node::tensor_meta() const {
  COIL_ASSERT(meta_.size() == 1, "node '", name_, "' has ", meta_.size(),
              " outputs, not one tensor");
  return meta_[0];
}

SymLayout Node::sym_layout(size_t i, bool as_made) const {
  if (sym_.empty()) return SymLayout::of(meta_.at(i));
  const ShapeEnv* env = graph_->shape_env().get();
  if (as_made || !env || env->replacements().empty()) return sym_.at(i);
  const SymLayout& l = sym_.at(i);
  return SymLayout{env->simplify(l.sizes), env->simplify(l.strides), env->simplify(l.offset)};
}

std::vector<Node*> Node::inputs() const {
  std::vector<Node*> out;
  for_each_node_arg(args_, [&](Node* n) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  });
  return out;
}

const Tensor& Node::value() const {
  COIL_ASSERT(kind_ == NodeKind::Parameter || kind_ == NodeKind::Constant, "node '", name_,
              "' holds no tensor");
  return value_;
}
const std::string& Node::target() const {
  COIL_ASSERT(kind_ == NodeKind::Parameter, "node '", name_, "' is not a parameter");
  return target_;
}
Node* Node::source() const {
  COIL_ASSERT(kind_ == NodeKind::GetItem, "node '", name_, "' is not a getitem");
  return std::get<Node*>(args_[0]);
}
int64_t Node::index() const {
  COIL_ASSERT(kind_ == NodeKind::GetItem, "node '", name_, "' is not a getitem");
  return std::get<int64_t>(args_[1]);
}
const std::vector<Node*>& Node::results() const {
  COIL_ASSERT(kind_ == NodeKind::Output, "node '", name_, "' is not the output");
  return std::get<std::vector<Node*>>(args_[0]);
}

// ---- helpers shared with the verifier ------------------------------------------------------

namespace detail_graph {

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  return true;
}

// Words the printed text could not use as a name: Python's keywords, the `coil` and `self`
// of the printed code, and the float literals the parser reads.
bool is_reserved_name(const std::string& s) {
  static const std::unordered_set<std::string> reserved = {
      "False",   "None",     "True",     "and",    "as",   "assert", "async",  "await",
      "break",   "class",    "continue", "def",    "del",  "elif",   "else",   "except",
      "finally", "for",      "from",     "global", "if",   "import", "in",     "is",
      "lambda",  "nonlocal", "not",      "or",     "pass", "raise",  "return", "try",
      "while",   "with",     "yield",    "coil",   "self", "inf",    "nan"};
  return reserved.count(s) > 0;
}

std::vector<Arg> meta_args(const std::vector<NodeArg>& args) {
  std::vector<Arg> out;
  out.reserve(args.size());
  for (const NodeArg& a : args)
    out.push_back(to_arg(a, [](const Node* n) { return meta_tensor(n->tensor_meta()); }));
  return out;
}

// The alternative parse_literal gives for the schema type, so that printing and parsing back
// yields the very same argument (an int passed as a float prints as "1" but reads as 1.0).
void canonicalize(NodeArg& a, const ArgSchema& s) {
  std::string base = s.base_type();
  if (base == "float") {
    if (auto* i = std::get_if<int64_t>(&a)) a = static_cast<double>(*i);
    if (auto* sc = std::get_if<Scalar>(&a)) a = sc->to_double();
  } else if (base == "int") {
    if (auto* sc = std::get_if<Scalar>(&a)) a = sc->to_int();
  } else if (base == "Scalar") {
    if (auto* i = std::get_if<int64_t>(&a)) a = Scalar(*i);
    if (auto* d = std::get_if<double>(&a)) a = Scalar(*d);
    if (auto* b = std::get_if<bool>(&a)) a = Scalar(*b);
  }
}

void substitute(std::vector<NodeArg>& args, const Node* from, Node* to) {
  for (NodeArg& a : args) {
    if (auto* n = std::get_if<Node*>(&a); n && *n == from) *n = to;
    if (auto* v = std::get_if<std::vector<Node*>>(&a))
      for (Node*& n : *v)
        if (n == from) n = to;
  }
}

std::vector<TensorMeta> compute_meta(const Node& n) {
  switch (n.kind()) {
    case NodeKind::Call:
      return run_meta(n.op(), meta_args(n.args()));
    case NodeKind::GetItem:
      return {n.source()->meta().at(static_cast<size_t>(n.index()))};
    case NodeKind::Parameter:
    case NodeKind::Constant:
      return {meta_of(n.value())};
    default:
      return n.meta();
  }
}

}  // namespace detail_graph

// ---- Graph: construction -------------------------------------------------------------------

Graph::Graph(Graph&& other) noexcept { *this = std::move(other); }

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this == &other) return *this;
  nodes_ = std::move(other.nodes_);
  by_name_ = std::move(other.by_name_);
  next_suffix_ = std::move(other.next_suffix_);
  shape_env_ = std::move(other.shape_env_);
  written_back_ = std::move(other.written_back_);
  for (auto& n : nodes_) n->graph_ = this;
  return *this;
}

void Graph::check_owned(const Node* n, const char* what) const {
  COIL_ASSERT(n != nullptr, what, " is null");
  COIL_ASSERT(n->graph_ == this, what, " '", n->name_, "' belongs to another graph");
}

// Insertion must keep topological order: every input before the insertion point.
void Graph::check_before_point(const Node* n, const Node* before) const {
  if (before == nullptr) return;
  for_each_node_arg(n->args_, [&](const Node* in) {
    COIL_ASSERT(in->pos_ < before->pos_, "cannot insert '", n->name_, "' before '", before->name_,
                "': its input '", in->name_, "' comes after that point");
  });
}

std::string Graph::fresh_name(const std::string& base_in) {
  std::string base = sanitize(base_in);
  if (!detail_graph::is_reserved_name(base) && !shadows_builtin(base) && !by_name_.count(base))
    return base;
  int64_t& k = next_suffix_[base];
  std::string name;
  do name = base + "_" + std::to_string(++k);
  while (by_name_.count(name));
  return name;
}

void Graph::renumber() {
  int64_t p = 0;
  for (auto& n : nodes_) n->pos_ = p += kGap;
}

Node* Graph::insert(std::unique_ptr<Node> node, Node* before, const std::string& base_name) {
  Node* n = node.get();
  n->name_ = fresh_name(base_name);
  for_each_node_arg(n->args_, [&](Node* in) { check_owned(in, "argument"); });
  if (before) {
    check_owned(before, "insertion point");
    COIL_ASSERT(before->kind_ != NodeKind::Placeholder || n->kind_ == NodeKind::Placeholder,
                "cannot insert '", n->name_, "' before placeholder '", before->name_,
                "': placeholders come first");
  } else {
    before = output_node();  // "at the end" is before the output node, which stays last
  }
  check_before_point(n, before);
  auto it = before ? before->self_ : nodes_.end();
  int64_t hi = before ? before->pos_ : (nodes_.empty() ? 0 : nodes_.back()->pos_) + 2 * kGap;
  int64_t lo = it == nodes_.begin() ? hi - 2 * kGap : (*std::prev(it))->pos_;
  n->self_ = nodes_.insert(it, std::move(node));
  if (hi - lo < 2) {
    renumber();
  } else {
    n->pos_ = lo + (hi - lo) / 2;
  }
  by_name_[n->name_] = n;
  add_use(n);
  return n;
}

void Graph::add_use(Node* user) {
  for (Node* in : user->inputs()) {
    auto& u = in->users_;
    if (std::find(u.begin(), u.end(), user) == u.end()) u.push_back(user);
  }
}

void Graph::remove_use(Node* user) {
  for (Node* in : user->inputs()) std::erase(in->users_, user);
}

Node* Graph::placeholder(const std::string& name, const TensorMeta& meta,
                         const std::optional<SymLayout>& layout) {
  auto n = std::unique_ptr<Node>(new Node(this, NodeKind::Placeholder));
  n->meta_ = {meta};
  if (layout && !layout->is_static()) {
    COIL_ASSERT(shape_env_, "placeholder '", name, "' with symbolic sizes in a graph without a ",
                "shape env");
    n->sym_ = {*layout};
  }
  Node* first_other = nullptr;
  for (auto& m : nodes_) {
    if (m->kind_ != NodeKind::Placeholder) {
      first_other = m.get();
      break;
    }
  }
  return insert(std::move(n), first_other, name);  // null: no other node yet, append
}

Node* Graph::parameter(const std::string& target, const Tensor& value, Node* before) {
  COIL_ASSERT(value.defined(), "parameter '", target, "' is an undefined tensor");
  auto n = std::unique_ptr<Node>(new Node(this, NodeKind::Parameter));
  n->value_ = value;
  n->target_ = target;
  n->meta_ = {meta_of(value)};
  return insert(std::move(n), before, target);
}

Node* Graph::constant(const Tensor& value, Node* before) {
  COIL_ASSERT(value.defined(), "constant: undefined tensor");
  COIL_CHECK(value.has_storage(),
             "constant: the tensor has no data (a proxy or meta tensor); "
             "a graph constant needs its values");
  auto n = std::unique_ptr<Node>(new Node(this, NodeKind::Constant));
  n->value_ = contiguous_copy(value);
  n->meta_ = {meta_of(n->value_)};
  return insert(std::move(n), before, "constant");
}

namespace {
// Fills defaults, checks types and canonicalizes; returns the meta inputs for run_meta.
std::vector<Arg> normalize_node_args(OpId op, std::vector<NodeArg>& args) {
  const OpInfo& info = op_info(op);
  for (size_t i = 0; i < args.size(); ++i) {
    const NodeArg& a = args[i];
    auto check = [&](const Node* n) {
      COIL_ASSERT(n != nullptr, info.name, ": argument ", i, " is a null node");
      COIL_ASSERT(n->meta().size() == 1, info.name, ": argument ", i, " is '", n->name(),
                  "', which has ", n->meta().size(), " outputs; take one with getitem first");
    };
    if (auto* n = std::get_if<Node*>(&a)) check(*n);
    if (auto* v = std::get_if<std::vector<Node*>>(&a))
      for (Node* n : *v) check(n);
  }
  std::vector<Arg> margs = detail_graph::meta_args(args);
  normalize_args(op, margs);  // coil::Error naming the op and the argument
  for (size_t i = args.size(); i < margs.size(); ++i) args.push_back(to_node_arg(margs[i]));
  for (size_t i = 0; i < args.size(); ++i) detail_graph::canonicalize(args[i], info.schema.args[i]);
  return detail_graph::meta_args(args);
}
}  // namespace

Node* Graph::call(OpId op, std::vector<NodeArg> args, Node* before) {
  for_each_node_arg(args, [&](Node* in) { check_owned(in, "argument"); });
  std::vector<Arg> margs = normalize_node_args(op, args);
  auto n = std::unique_ptr<Node>(new Node(this, NodeKind::Call));
  n->meta_ = run_meta(op, margs);
  n->op_ = op;
  n->args_ = std::move(args);
  compute_sym(n.get());
  return insert(std::move(n), before, op_name(op));
}

// A call's or getitem's symbolic layouts, from its inputs' (static ones are not stored).
void Graph::compute_sym(Node* n) {
  n->sym_.clear();
  if (!shape_env_) return;
  std::vector<SymLayout> layouts;
  if (n->kind_ == NodeKind::GetItem) {
    layouts = {n->source()->sym_layout(static_cast<size_t>(n->index()))};
  } else if (n->kind_ == NodeKind::Call) {
    layouts = sym_layouts(
        n->op_, n->args_, [](const Node* in) { return in->sym_layout(); }, n->meta_,
        shape_env_.get());
  }
  for (const SymLayout& l : layouts)
    if (!l.is_static()) {
      n->sym_ = std::move(layouts);
      return;
    }
}

bool Graph::is_dynamic() const {
  for (const auto& n : nodes_)
    if (!n->sym_.empty()) return true;
  return false;
}

Node* Graph::getitem(Node* source, int64_t index, Node* before) {
  check_owned(source, "getitem source");
  COIL_ASSERT(source->is_multi_output(), "getitem: '", source->name_,
              "' is not a multi-output call");
  COIL_ASSERT(index >= 0 && index < static_cast<int64_t>(source->meta_.size()), "getitem: index ",
              index, " out of range for '", source->name_, "' with ", source->meta_.size(),
              " outputs");
  auto n = std::unique_ptr<Node>(new Node(this, NodeKind::GetItem));
  n->args_ = {source, index};
  n->meta_ = {source->meta_[static_cast<size_t>(index)]};
  compute_sym(n.get());
  return insert(std::move(n), before, "getitem");
}

Node* Graph::output(std::vector<Node*> results) {
  for (Node* r : results) {
    check_owned(r, "result");
    COIL_ASSERT(r->meta_.size() == 1, "output: '", r->name_, "' has ", r->meta_.size(),
                " outputs; return single tensors (take them with getitem)");
  }
  if (Node* out = output_node()) {
    remove_use(out);
    out->args_ = {std::move(results)};
    add_use(out);
    return out;
  }
  auto n = std::unique_ptr<Node>(new Node(this, NodeKind::Output));
  n->args_ = {std::move(results)};
  return insert(std::move(n), nullptr, "output");
}

// ---- Graph: rewriting ----------------------------------------------------------------------

void Graph::set_args(Node* node, std::vector<NodeArg> args) {
  check_owned(node, "node");
  COIL_ASSERT(node->kind_ == NodeKind::Call, "set_args: '", node->name_, "' is not a call");
  for_each_node_arg(args, [&](Node* in) {
    check_owned(in, "argument");
    COIL_ASSERT(in->pos_ < node->pos_, "set_args: '", node->name_, "' cannot take '", in->name_,
                "', which comes after it");
  });
  std::vector<Arg> margs = normalize_node_args(node->op_, args);
  std::vector<TensorMeta> meta = run_meta(node->op_, margs);
  remove_use(node);
  node->args_ = std::move(args);
  add_use(node);
  node->meta_ = std::move(meta);
  compute_sym(node);
  refresh_meta(node->users_);
}

Graph Graph::clone(std::unordered_map<const Node*, Node*>* mapping) const {
  Graph g;
  std::unordered_map<const Node*, Node*> map;
  for (const auto& src : nodes_) {
    auto n = std::unique_ptr<Node>(new Node(&g, src->kind_));
    n->name_ = src->name_;
    n->op_ = src->op_;
    n->args_ = src->args_;
    for (NodeArg& a : n->args_) {
      if (auto* p = std::get_if<Node*>(&a)) *p = map.at(*p);
      if (auto* v = std::get_if<std::vector<Node*>>(&a))
        for (Node*& p : *v) p = map.at(p);
    }
    n->meta_ = src->meta_;
    n->sym_ = src->sym_;
    n->value_ = src->value_;
    n->target_ = src->target_;
    n->pos_ = src->pos_;
    Node* raw = n.get();
    raw->self_ = g.nodes_.insert(g.nodes_.end(), std::move(n));
    g.by_name_[raw->name_] = raw;
    g.add_use(raw);
    map[src.get()] = raw;
  }
  g.next_suffix_ = next_suffix_;
  g.shape_env_ = shape_env_;
  g.written_back_ = written_back_;
  if (mapping) *mapping = std::move(map);
  return g;
}

// ---- Graph: reading ------------------------------------------------------------------------

std::vector<Node*> Graph::nodes() const {
  std::vector<Node*> out;
  out.reserve(nodes_.size());
  for (auto& n : nodes_) out.push_back(n.get());
  return out;
}

std::vector<Node*> Graph::placeholders() const {
  std::vector<Node*> out;
  for (auto& n : nodes_)
    if (n->kind_ == NodeKind::Placeholder) out.push_back(n.get());
  return out;
}

Node* Graph::output_node() const {
  return !nodes_.empty() && nodes_.back()->kind_ == NodeKind::Output ? nodes_.back().get()
                                                                     : nullptr;
}

Node* Graph::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

}  // namespace coil
