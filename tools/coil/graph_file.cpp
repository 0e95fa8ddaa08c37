#include "graph_file.h"

#include <coil/coil.h>

#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "graph/parser.h"
#include "runtime/tensor_impl.h"

namespace coil::tool {

namespace {

Graph parse_text(const std::string& text, const std::string& path,
                 const std::map<std::string, Tensor>& params) {
  try {
    Graph g = parse_graph(text, params);
    verify(g);
    return g;
  } catch (const Error& e) {
    // The parser says "graph text, line L:C: ..."; name the file instead, as compilers do
    // ("FILE:L:C: ..."), which editors and terminals turn into a link.
    std::string file = path == "-" ? "<stdin>" : path, what = e.what();
    const std::string parser_prefix = "graph text, line ";
    if (what.rfind(parser_prefix, 0) == 0)
      throw Error(file + ":" + what.substr(parser_prefix.size()));
    throw Error(file + ": " + what);
  }
}

Tensor random_like_meta(const TensorMeta& m) {
  Tensor values;
  if (is_floating(m.dtype))
    values = randn(m.sizes).to(m.dtype);
  else if (m.dtype == kBool)
    values = randint(0, 2, m.sizes).to(kBool);
  else
    values = randint(0, 4, m.sizes).to(m.dtype);
  Tensor t = empty_from_meta(m);  // the placeholder's very strides and offset
  t.copy_(values);
  return t;
}

}  // namespace

std::string read_text(const std::string& path) {
  if (path == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    return ss.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open graph file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error("cannot read graph file '" + path + "'");
  return ss.str();
}

std::string graph_name(const std::string& path) {
  if (path == "-") return "stdin";
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (size_t dot = name.find('.'); dot != std::string::npos && dot > 0) name.resize(dot);
  return name.empty() ? "graph" : name;
}

Graph load_graph(const std::string& path) { return parse_text(read_text(path), path, {}); }

RunnableGraph load_runnable_graph(const std::string& path, uint64_t seed) {
  // Standard input can be read once: keep its text for the second parse.
  std::string text = read_text(path);
  // The first parse learns the parameters' metas; the second gives them values.
  Graph proxies = parse_text(text, path, {});
  manual_seed(seed);
  RunnableGraph out;
  std::map<std::string, Tensor> params;
  for (const Node* n : proxies.nodes())
    if (n->kind() == NodeKind::Parameter)
      params.emplace(n->target(), random_like_meta(n->tensor_meta()));
  out.graph = parse_text(text, path, params);
  for (const Node* p : out.graph.placeholders())
    out.inputs.push_back(random_like_meta(p->tensor_meta()));
  return out;
}

}  // namespace coil::tool
