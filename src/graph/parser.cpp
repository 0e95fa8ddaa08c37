// parse_graph: a small hand-written reader for the printer's format. One statement per line:
//   def forward(self, NAME: "ANN", ...):
//   NAME[: "ANN"] = coil.OP(ARG, ..., KEYWORD=ARG, ...)
//   NAME: "ANN" = coil.parameter("TARGET")  |  NAME: "ANN" = coil.constant([V, ...])
//   NAME[: "ANN"] = NAME[INDEX]
//   return (NAME, ...)
// Blank lines and '#' comments are skipped; indentation does not matter. A dynamic graph starts
// with `# hints: s0=8 s1=16` (each size symbol's value at capture): its annotations and int
// arguments may then be expressions of the symbols ("f32[s0, 64][64, 1]cpu", [s0*s1]).
#include "graph/parser.h"

#include <cctype>
#include <optional>
#include <sstream>

#include "graph/graph_util.h"
#include "graph/printer.h"
#include "runtime/convert.h"

namespace coil {

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// The items of "[a, b, c]" with their offsets in the text; nullopt when not bracketed.
std::optional<std::vector<std::pair<std::string, size_t>>> list_items(const std::string& text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
  std::vector<std::pair<std::string, size_t>> items;
  size_t start = 1;
  for (size_t i = 1; i < text.size(); ++i) {
    if (text[i] != ',' && i + 1 != text.size()) continue;
    std::string item = text.substr(start, i - start);
    size_t lead = item.find_first_not_of(" \t");
    if (lead != std::string::npos) items.emplace_back(trim(item), start + lead);
    start = i + 1;
  }
  return items;
}

class Parser {
 public:
  Parser(const std::string& text, const std::map<std::string, Tensor>& params) : params_(params) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines_.push_back(line);
    }
  }

  Graph run() {
    bool header = false, returned = false;
    for (line_ = 0; line_ < lines_.size(); ++line_)
      if (trim(lines_[line_]).rfind("# hints:", 0) == 0) parse_hints(trim(lines_[line_]));
    for (line_ = 0; line_ < lines_.size(); ++line_) {
      s_ = lines_[line_];
      i_ = 0;
      if (at_end()) continue;  // blank or comment
      if (returned) error(i_, "nothing may follow the return statement");
      if (!header) {
        parse_header();
        header = true;
      } else {
        returned = parse_statement();
      }
      if (!at_end()) error(i_, "unexpected text after the statement");
    }
    if (!returned) {
      line_ = lines_.empty() ? 0 : lines_.size() - 1;
      s_ = lines_.empty() ? "" : lines_[line_];
      error(s_.size(), header ? "missing 'return (...)' at the end of the graph"
                              : "empty graph text: expected 'def forward(self, ...):'");
    }
    return std::move(g_);
  }

 private:
  // ---- errors: "line 3:21: message", then the line and a caret under the column.
  [[noreturn]] void error(size_t col, const std::string& msg) const {
    std::string caret(std::min(col, s_.size()), ' ');
    throw Error("graph text, line " + std::to_string(line_ + 1) + ":" + std::to_string(col + 1) +
                ": " + msg + "\n  " + s_ + "\n  " + caret + "^");
  }

  // ---- the cursor over the current line
  void skip_ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t')) ++i_;
  }
  bool at_end() {
    skip_ws();
    return i_ >= s_.size() || s_[i_] == '#';
  }
  bool peek(char c) {
    skip_ws();
    return i_ < s_.size() && s_[i_] == c;
  }
  void expect(char c, const std::string& context) {
    if (!peek(c)) error(i_, std::string("expected '") + c + "' " + context);
    ++i_;
  }
  std::string ident(const std::string& what) {
    skip_ws();
    if (i_ >= s_.size() || !ident_start(s_[i_])) error(i_, "expected " + what);
    size_t b = i_;
    while (i_ < s_.size() && ident_char(s_[i_])) ++i_;
    return s_.substr(b, i_ - b);
  }
  std::string string_lit(const std::string& what) {
    skip_ws();
    if (i_ >= s_.size() || s_[i_] != '"') error(i_, "expected " + what + " in double quotes");
    size_t open = i_++;
    std::string out;
    for (; i_ < s_.size() && s_[i_] != '"'; ++i_) {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) ++i_;
      out += s_[i_];
    }
    if (i_ >= s_.size()) error(open, "unterminated string");
    ++i_;
    return out;
  }
  // The text of one call argument: up to a ',' or ')' outside brackets and quotes.
  std::string raw_arg() {
    skip_ws();
    size_t b = i_;
    int depth = 0;
    bool quoted = false;
    for (; i_ < s_.size(); ++i_) {
      char c = s_[i_];
      if (c == '"') quoted = !quoted;
      if (quoted) continue;
      if (c == '[' || c == '(') ++depth;
      if ((c == ',' || c == ')') && depth == 0) break;
      if (c == ']' || c == ')') --depth;
    }
    if (i_ >= s_.size()) error(b, "unterminated argument list: missing ')'");
    std::string text = trim(s_.substr(b, i_ - b));
    if (text.empty()) error(b, "expected an argument");
    return text;
  }

  // ---- names and annotations
  std::string new_name() {
    size_t col = (skip_ws(), i_);
    std::string name = ident("a node name");
    if (detail_graph::is_reserved_name(name)) error(col, "'" + name + "' cannot name a node");
    if (g_.find(name)) error(col, "'" + name + "' is already defined");
    col_ = col;
    return name;
  }

  Node* lookup(const std::string& name, size_t col) {
    Node* n = g_.find(name);
    if (!n) error(col, "undefined name '" + name + "'");
    return n;
  }
  Node* lookup_tensor(const std::string& name, size_t col) {
    Node* n = lookup(name, col);
    if (n->meta().size() != 1)
      error(col, "'" + name + "' has " + std::to_string(n->meta().size()) +
                     " outputs; take one with " + name + "[i]");
    return n;
  }

  // "# hints: s0=8 s1=16": the graph's ShapeEnv, with its symbols in order.
  void parse_hints(const std::string& line) {
    s_ = line;
    auto env = std::make_shared<ShapeEnv>();
    std::istringstream in(line.substr(8));
    for (std::string item; in >> item;) {
      const size_t eq = item.find('=');
      const std::string name = item.substr(0, eq);
      const std::string expected = "s" + std::to_string(env->symbols().size());
      if (eq == std::string::npos || name != expected)
        error(line.find(item), "expected " + expected + "=VALUE in the hints");
      int64_t v = 0;
      try {
        v = std::stoll(item.substr(eq + 1));
      } catch (const std::exception&) {
        error(line.find(item), "a hint must be a number: " + item);
      }
      if (v < 2) error(line.find(item), "a size symbol stands for 2 or more, got " + item);
      env->create_symbol(v, name + " (from the graph text)");
    }
    g_.set_shape_env(std::move(env));
  }

  // A size expression over the hints' symbols ("s0*s1", "64").
  sym::Expr parse_size(const std::string& text) {
    const ShapeEnv* env = g_.shape_env().get();
    return sym::parse(text, [env](const std::string& name) -> sym::Expr {
      if (env)
        for (const ShapeEnv::Symbol& s : env->symbols())
          if (sym::to_string(s.var) == name) return s.var;
      return nullptr;
    });
  }
  // Whether `text` names a size symbol (a dynamic graph's argument).
  bool symbolic(const std::string& text) const {
    if (!g_.shape_env()) return false;
    for (size_t i = 0; i + 1 < text.size(); ++i)
      if (text[i] == 's' && std::isdigit(static_cast<unsigned char>(text[i + 1])) &&
          (i == 0 || !ident_char(text[i - 1])))
        return true;
    return false;
  }
  // "[s0, 64]" as expressions (a static graph's are plain int lists).
  SymShape parse_sizes(const std::string& text) {
    if (!g_.shape_env()) return sym_constants(std::get<Shape>(parse_literal(text, "int[]")));
    auto items = list_items(text);
    if (!items) throw Error("expected [size, ...]");
    SymShape out;
    for (const auto& [item, off] : *items) out.push_back(parse_size(item));
    return out;
  }
  int64_t value(sym::Expr e) const { return g_.shape_env() ? g_.shape_env()->hint(e) : e->value(); }

  // "f32[8, 16][16, 1]cpu" or "...cpu+4"; `col` is where the text starts in the line. In a
  // dynamic graph the sizes, strides and offset may be expressions of the symbols ("f32[s0,
  // 16][16, 1]cpu+(s0 - 1)"): last_layout_ receives them and the meta holds their values at the
  // hints.
  TensorMeta parse_meta(const std::string& text, size_t col) {
    auto bad = [&](size_t at, const std::string& why) {
      error(col + at, "bad annotation \"" + text + "\": " + why +
                          " (expected dtype[sizes][strides]device, like f32[8, 16][16, 1]cpu)");
    };
    TensorMeta m;
    SymLayout l{{}, {}, sym::constant(0)};
    size_t open = text.find('[');
    if (open == std::string::npos) bad(0, "no sizes");
    try {
      m.dtype = dtype_from_name(text.substr(0, open));
    } catch (const Error& e) {
      bad(0, e.what());
    }
    size_t at = open;
    for (SymShape* dims : {&l.sizes, &l.strides}) {
      size_t close = text.find(']', at);
      if (at >= text.size() || text[at] != '[' || close == std::string::npos)
        bad(at, dims == &l.sizes ? "no sizes" : "no strides");
      try {
        *dims = parse_sizes(text.substr(at, close - at + 1));
      } catch (const Error& e) {
        bad(at, e.what());
      }
      at = close + 1;
    }
    if (l.sizes.size() != l.strides.size()) bad(open, "sizes and strides differ in length");
    std::string rest = text.substr(at);
    size_t plus = rest.find('+');
    try {
      m.device = Device(rest.substr(0, plus));
      if (plus != std::string::npos) {
        std::string offset = rest.substr(plus + 1);
        if (offset.size() > 1 && offset.front() == '(' && offset.back() == ')')
          offset = offset.substr(1, offset.size() - 2);
        l.offset = g_.shape_env() ? parse_size(offset)
                                  : sym::constant(std::get<int64_t>(parse_literal(offset, "int")));
      }
    } catch (const Error& e) {
      bad(at, e.what());
    }
    for (sym::Expr e : l.sizes) m.sizes.push_back(value(e));
    for (sym::Expr e : l.strides) m.strides.push_back(value(e));
    m.offset = value(l.offset);
    last_layout_.reset();
    if (!l.is_static()) last_layout_ = l;
    return m;
  }

  // The optional ': "ANN"' after a name.
  std::optional<TensorMeta> annotation() {
    if (!peek(':')) return std::nullopt;
    ++i_;
    skip_ws();
    ann_col_ = i_ + 1;
    return parse_meta(string_lit("an annotation"), ann_col_);
  }
  void check_annotation(const std::optional<TensorMeta>& ann, const Node* n,
                        const std::string& what) {
    if (!ann) return;
    if (n->meta().size() != 1)
      error(ann_col_, what + " returns " + std::to_string(n->meta().size()) +
                          " tensors: leave the annotation out and annotate its getitems");
    if (!(*ann == n->tensor_meta()))
      error(ann_col_, "the annotation says " + meta_str(*ann) + " but " + what + " computes " +
                          meta_str(n->tensor_meta()));
    if (last_layout_ && last_layout_->sizes != n->sym_layout().sizes)
      error(ann_col_, "the annotation says sizes " + sym_shape_str(last_layout_->sizes) + " but " +
                          what + " computes " + sym_shape_str(n->sym_layout().sizes));
  }

  // ---- statements
  void parse_header() {
    if (ident("'def forward(self, ...):'") != "def") error(0, "expected 'def forward(self, ...):'");
    ident("a function name");
    expect('(', "after the function name");
    skip_ws();
    size_t save = i_;
    bool has_self = peek('s') && ident("self") == "self";
    if (!has_self) i_ = save;
    bool first = !has_self;  // without `self` the first input needs no comma
    while (!peek(')')) {
      if (!first) expect(',', "between inputs");
      first = false;
      if (peek(')')) break;  // trailing comma
      std::string name = new_name();
      expect(':', "and an annotation after input '" + name + "'");
      skip_ws();
      TensorMeta m = parse_meta(string_lit("an annotation"), i_ + 1);
      g_.set_name(g_.placeholder(name, m, last_layout_), name);
    }
    ++i_;
    expect(':', "at the end of the def line");
  }

  // Returns true for the return statement.
  bool parse_statement() {
    size_t save = i_;
    if (ident("a statement") == "return") {
      parse_return();
      return true;
    }
    i_ = save;
    std::string name = new_name();
    size_t name_col = col_;
    std::optional<TensorMeta> ann = annotation();
    expect('=', "after '" + name + "'");
    skip_ws();
    size_t rhs_col = i_;
    std::string head = ident("coil.<op>(...) or a getitem like split[0]");
    if (head != "coil") {
      Node* src = lookup(head, rhs_col);
      expect('[', "after '" + head + "' (a getitem like " + head + "[0])");
      skip_ws();
      size_t idx_col = i_;
      std::string idx = raw_index();
      if (!src->is_multi_output())
        error(rhs_col, "'" + head + "' is not a multi-output call; only those take [i]");
      int64_t k = std::stoll(idx);
      if (k >= static_cast<int64_t>(src->meta().size()))
        error(idx_col, "index " + idx + " is out of range: '" + head + "' has " +
                           std::to_string(src->meta().size()) + " outputs");
      Node* n = g_.getitem(src, k);
      check_annotation(ann, n, head + "[" + idx + "]");
      g_.set_name(n, name);
      return false;
    }
    expect('.', "after 'coil'");
    size_t op_col = (skip_ws(), i_);
    std::string op = ident("an op name");
    Node* n = nullptr;
    if (op == "parameter") {
      n = parse_parameter(ann, name_col);
    } else if (op == "constant") {
      n = parse_constant(ann, name_col);
    } else {
      n = parse_call(op, op_col);
      check_annotation(ann, n, "coil." + op);
    }
    g_.set_name(n, name);
    return false;
  }

  std::string raw_index() {
    size_t b = i_;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
    if (i_ == b || i_ - b > 9) error(b, "expected a small non-negative integer index");
    std::string idx = s_.substr(b, i_ - b);
    expect(']', "after the index");
    return idx;
  }

  void parse_return() {
    bool parens = peek('(');
    if (parens) ++i_;
    std::vector<Node*> results;
    while (!(parens ? peek(')') : at_end())) {
      if (!results.empty()) {
        expect(',', "between returned names");
        if (parens ? peek(')') : at_end()) break;
      }
      size_t col = (skip_ws(), i_);
      results.push_back(lookup_tensor(ident("a returned name"), col));
    }
    if (parens) ++i_;
    g_.output(results);
  }

  Node* parse_parameter(const std::optional<TensorMeta>& ann, size_t name_col) {
    expect('(', "after coil.parameter");
    std::string target = string_lit("the parameter's name");
    expect(')', "after the parameter's name");
    if (!ann) error(name_col, "coil.parameter needs an annotation: name: \"f32[...][...]cpu\"");
    auto it = params_.find(target);
    if (it == params_.end()) return g_.parameter(target, meta_tensor(*ann));
    if (!(meta_of(it->second) == *ann))
      error(ann_col_, "parameter \"" + target + "\" is " + meta_str(meta_of(it->second)) +
                          " but the annotation says " + meta_str(*ann));
    return g_.parameter(target, it->second);
  }

  Node* parse_constant(const std::optional<TensorMeta>& ann, size_t name_col) {
    expect('(', "after coil.constant");
    skip_ws();
    size_t col = i_;
    std::string text = raw_arg();
    expect(')', "after the constant's values");
    if (!ann) error(name_col, "coil.constant needs an annotation giving its dtype and shape");
    if (ann->strides != contiguous_strides(ann->sizes) || ann->offset != 0)
      error(ann_col_, "a constant is contiguous: its strides must be " +
                          shape_str(contiguous_strides(ann->sizes)));
    auto items = list_items(text);
    if (!items) error(col, "expected the constant's values as a list [v, ...]");
    if (static_cast<int64_t>(items->size()) != numel_of(ann->sizes))
      error(col, "the annotation's shape " + shape_str(ann->sizes) + " holds " +
                     std::to_string(numel_of(ann->sizes)) + " values but the list has " +
                     std::to_string(items->size()));
    Tensor t;
    try {
      t = empty_contiguous(ann->sizes, ann->dtype, ann->device);
    } catch (const Error& e) {
      error(ann_col_, e.what());
    }
    dispatch_dtype(ann->dtype, [&]<typename T>() {
      T* p = static_cast<T*>(t.data_ptr());
      for (size_t k = 0; k < items->size(); ++k) p[k] = element<T>((*items)[k], col);
    });
    return g_.constant(t);
  }

  template <typename T>
  T element(const std::pair<std::string, size_t>& item, size_t list_col) {
    size_t col = list_col + item.second;
    Scalar v;
    try {
      v = std::get<Scalar>(parse_literal(item.first, "Scalar"));
    } catch (const Error& e) {
      error(col, e.what());
    }
    if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_bool()) error(col, "a b8 constant holds True or False, not " + item.first);
      return v.to_bool();
    } else if constexpr (std::is_integral_v<T>) {
      if (!v.is_integral()) error(col, "an integer constant holds integers, not " + item.first);
      return convert<T>(v.to_int());
    } else {
      if (v.is_bool()) error(col, "a floating constant holds numbers, not " + item.first);
      return convert<T>(v.to_double());
    }
  }

  Node* parse_call(const std::string& op_name_text, size_t op_col) {
    std::optional<OpId> op = find_op(op_name_text);
    if (!op)
      error(op_col, "unknown op 'coil." + op_name_text +
                        "' (src/graph/op_list.def lists the ops coil knows)");
    const OpInfo& info = op_info(*op);
    const auto& params = info.schema.args;
    expect('(', "after coil." + op_name_text);
    std::vector<std::optional<NodeArg>> slots(params.size());
    size_t positional = 0;
    bool keywords = false;
    while (!peek(')')) {
      size_t arg_col = (skip_ws(), i_);
      std::optional<size_t> slot = keyword(info);
      if (slot) {
        keywords = true;
      } else {
        if (keywords) error(arg_col, "a positional argument cannot follow a keyword argument");
        if (positional >= params.size())
          error(arg_col, "coil." + op_name_text + " takes " + std::to_string(params.size()) +
                             " arguments; schema: " + info.schema.str());
        slot = positional++;
      }
      if (slots[*slot]) error(arg_col, "argument '" + params[*slot].name + "' is given twice");
      skip_ws();
      size_t val_col = i_;
      slots[*slot] = argument(info, *slot, raw_arg(), val_col);
      if (!peek(')')) expect(',', "between arguments");
    }
    size_t close_col = i_++;
    std::vector<NodeArg> args;
    for (size_t k = 0; k < params.size(); ++k) {
      if (slots[k]) {
        args.push_back(*slots[k]);
      } else if (params[k].default_value) {
        args.push_back(to_node_arg(*params[k].default_value));
      } else {
        error(close_col, "coil." + op_name_text + ": missing argument '" + params[k].name +
                             "'; schema: " + info.schema.str());
      }
    }
    try {
      return g_.call(*op, std::move(args));
    } catch (const Error& e) {
      error(op_col, e.what());
    }
  }

  // "name=" at the cursor: consumes it and returns the schema slot, else consumes nothing.
  std::optional<size_t> keyword(const OpInfo& info) {
    size_t save = i_;
    if (i_ >= s_.size() || !ident_start(s_[i_])) return std::nullopt;
    std::string name = ident("a keyword");
    if (!peek('=') || (i_ + 1 < s_.size() && s_[i_ + 1] == '=')) {
      i_ = save;
      return std::nullopt;
    }
    ++i_;
    int k = info.schema.index_of(name);
    if (k < 0)
      error(save, std::string("coil.") + info.name + " has no argument '" + name +
                      "'; schema: " + info.schema.str());
    return static_cast<size_t>(k);
  }

  NodeArg argument(const OpInfo& info, size_t k, const std::string& text, size_t col) {
    const ArgSchema& p = info.schema.args[k];
    std::string base = p.base_type();
    NodeArg a;
    if (base == "Tensor" && detail_graph::is_identifier(text) &&
        !detail_graph::is_reserved_name(text)) {
      a = lookup_tensor(text, col);
    } else if (base == "Tensor[]") {
      auto items = list_items(text);
      if (!items) error(col, "argument '" + p.name + "' is a list of tensors: [a, b, ...]");
      std::vector<Node*> nodes;
      for (const auto& [item, off] : *items) nodes.push_back(lookup_tensor(item, col + off));
      a = nodes;
    } else if (symbolic(text) && (base == "int" || base == "int[]" || base == "Scalar")) {
      try {
        if (base == "int[]") {
          SymShape exprs = parse_sizes(text);
          a = SymIntsArg{g_.shape_env()->hints(exprs), exprs};
        } else {
          sym::Expr e = parse_size(text);
          a = SymIntArg{g_.shape_env()->hint(e), e};
        }
      } catch (const Error& e) {
        error(col, std::string("argument '") + p.name + "' of coil." + info.name + ": " + e.what());
      }
    } else {
      try {
        a = to_node_arg(parse_literal(text, p.type));
      } catch (const Error& e) {
        error(col, std::string("argument '") + p.name + "' of coil." + info.name + ": " + e.what());
      }
    }
    Arg probe = to_arg(a, [](const Node* n) { return meta_tensor(n->tensor_meta()); });
    if (!arg_matches(probe, p.type, info.kind == OpKind::Pointwise))
      error(col, std::string("coil.") + info.name + ": argument '" + p.name + "' must be " +
                     p.type + " but got " + arg_kind_name(probe));
    return a;
  }

  const std::map<std::string, Tensor>& params_;
  std::vector<std::string> lines_;
  size_t line_ = 0;
  std::string s_;
  size_t i_ = 0;
  size_t col_ = 0;                        // where the last new_name() started
  size_t ann_col_ = 0;                    // where the last annotation's text started
  std::optional<SymLayout> last_layout_;  // the last annotation's, when symbolic
  Graph g_;
};

}  // namespace

Graph parse_graph(const std::string& text, const std::map<std::string, Tensor>& parameters) {
  return Parser(text, parameters).run();
}

}  // namespace coil
