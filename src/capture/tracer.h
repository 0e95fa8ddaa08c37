// The tracer: while the user's function runs on proxy tensors, every op call lands here
// (it is the thread's DispatchHook) and becomes a node of the current graph segment.
//
// A value request on a proxy (item(), printing, data_ptr()) is a graph break. With
// fullgraph it is an error; otherwise the pending segment is compiled (cached by its
// structure), run on the real inputs, every live proxy receives its real data, and recording
// continues in a new segment whose inputs are those now-real tensors.
#pragma once

#include <functional>
#include <memory>
#include <source_location>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <coil/compile.h>

#include "graph/graph.h"

namespace coil::capture {

// A compiled graph and what running it means for the caller.
struct CompiledGraph {
  std::shared_ptr<const Graph> graph;
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> run;
  // The same, writing the first output into a given tensor where it can (generated code only;
  // null otherwise).
  std::function<std::vector<Tensor>(const std::vector<Tensor>&, const Tensor& into)> run_into;
};
// Compiles one captured graph with the function's backend (see compile_fx.h).
using GraphCompiler = std::function<CompiledGraph(std::shared_ptr<const Graph>)>;

// Where a finished graph's outputs go: results first (in order), then in-place updates of
// inputs and captured tensors, which the caller writes back after running it.
struct Mutation {
  int64_t placeholder = -1;  // an input, by placeholder position...
  Tensor target;             // ...or a captured tensor (a parameter)
};

class Tracer : public DispatchHook {
 public:
  struct State;  // shared with the proxies, which may outlive the tracer
  Tracer(const CompileOptions& options, GraphCompiler compile_segment);
  ~Tracer() override;

  // Proxies for the function's tensor inputs (placeholders, in order). Dims in `dynamic` (bit
  // d for dim d) get size symbols, but sizes 0 and 1, and inputs whose strides are not dense
  // in some dim order, which stay static (logged).
  Tensor input(const Tensor& real, const std::string& name, uint64_t dynamic = 0);
  // A proxy input with a given geometry over `env`'s symbols: a graph traced from another
  // dynamic graph (the joint graph from the forward) shares its env and symbols.
  Tensor input(const Tensor& real, const std::string& name, const SymLayout& layout,
               std::shared_ptr<ShapeEnv> env);
  // A proxy's geometry over the size symbols.
  SymLayout sym_layout(const Tensor& proxy) const;

  std::vector<Tensor> call(OpId op, std::vector<Arg>& args) override;
  void assign(const Tensor& self, const Tensor& value) override;

  // Ends recording with these results. Without a graph break: returns the whole graph
  // (outputs = results then mutations), for the caller to compile and cache. After a break:
  // runs the last segment and returns nullptr; `results` then hold real tensors.
  std::shared_ptr<Graph> finish(std::vector<Tensor>& results, std::vector<Mutation>& mutations);

  // Called by a proxy whose data is requested.
  void graph_break(TensorImpl& proxy, const char* what, const std::source_location& where);

 private:
  std::shared_ptr<State> state_;
};

// Records on `graph` which of its results (after the `num_results` the function returns) its
// caller writes back into its inputs (Graph::written_back).
void mark_written_back(Graph& graph, const std::vector<Mutation>& mutations, size_t num_results);

// Runs a finished graph's compiled code and applies the in-place updates it recorded (those
// the code wrote into their inputs' memory itself are done).
std::vector<Tensor> run_with_mutations(const CompiledGraph& cg, const std::vector<Tensor>& inputs,
                                       const std::vector<Mutation>& mutations, size_t num_results);

}  // namespace coil::capture
