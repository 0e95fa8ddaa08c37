// coil print: parse, verify and print a graph file (or draw it).
#include <iostream>

#include "commands.h"
#include "graph/printer.h"
#include "graph_file.h"

namespace coil::tool {

namespace {

int run_print(const Args& args) {
  Graph g = load_graph(args.file);
  if (args.has("--dot"))
    std::cout << to_dot(g);
  else
    std::cout << print_graph(g);
  return 0;
}

}  // namespace

Command print_command() {
  return {"print",
          "parse and verify a graph file, then print it as coil prints graphs",
          "coil print FILE [--dot]",
          "Reads the file, recomputes every node's meta (dtype, sizes, strides) with its op's\n"
          "meta function, checks the graph's invariants and prints it in the canonical form\n"
          "(annotations on every line, default arguments left out). A mistake in the file is\n"
          "reported with its line and column.",
          {{"--dot", nullptr,
            "write the graph in Graphviz's format instead (coil print F --dot | "
            "dot -Tsvg > g.svg)"}},
          run_print};
}

}  // namespace coil::tool
