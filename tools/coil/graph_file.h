// Graph files: the text print_graph writes (and COIL_LOGS=graph_code prints), read back with
// parse_graph. Errors name the file, the line and the column.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace coil::tool {

// The file's text; "-" reads standard input.
std::string read_text(const std::string& path);
// How logs and the JIT name the graph: the file name without folder and extension.
std::string graph_name(const std::string& path);

// Parses and verifies the file. Its parameters become data-less proxies: enough to print,
// run passes, lower and generate code, not to run.
Graph load_graph(const std::string& path);

// A graph ready to run: parameters hold random values and `inputs` one random tensor per
// placeholder (its dtype, sizes and strides), all drawn from `seed`. Floating-point values
// are normal, integers in [0, 4), bools fair coin flips.
struct RunnableGraph {
  Graph graph;
  std::vector<Tensor> inputs;
};
RunnableGraph load_runnable_graph(const std::string& path, uint64_t seed);

}  // namespace coil::tool
