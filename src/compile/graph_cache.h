// The compiled-graph cache (Inductor's FX graph cache): what compile_fx made of a graph, the
// kernels' source and the wrapper's plan, kept on disk under a key computed from the graph
// itself. A new process that captures the same graph loads the plan and the compiled library
// instead of running the passes, lowering, scheduling and code generation again.
//
// The key is XXH3-128 over the printed graph, the backend, and the build ID of coil's own library
// (the linker's hash of its contents: rebuilding coil starts afresh). The
// printed graph is exact: every node with its arguments, each value's dtype, sizes, strides and
// storage offset, and each constant's elements to the last bit. A parameter enters by name and
// layout but not by value, since no stage reads a parameter's elements: an entry stores which
// parameter each constant buffer is, and loading binds the graph's parameters of that call.
// A dynamic graph is printed over its size symbols without their hints, so one entry serves
// every size; the entry keeps the size guards compiling added, and loading restores them.
//
// Entries: <cache root>/graphs/<first 2 hex of key>/<key>.json, the plan, and <key>.src beside it,
// the source (disk_cache.h). COIL_GRAPH_CACHE=0 turns the cache off.
#pragma once

#include <optional>
#include <string>

#include <coil/compile.h>

#include "codegen/wrapper_plan.h"
#include "graph/graph.h"

namespace coil {

// What compile_fx made of one graph, as the cache keeps it.
struct CachedGraph {
  std::string source;  // the kernels' C++, as codegen::cpp_source writes it; empty without kernels
  codegen::WrapperPlan plan;
  // A dynamic graph's size guards after compiling (lowering may add some, deciding with the
  // hints): loading restores them, and is a miss when this call's hints break one.
  std::vector<SymGuard> guards;
};

// The key of `graph` compiled with `options`; "" when the cache is off.
std::string graph_cache_key(const Graph& graph, const CompileOptions& options);

// The entry of `key` with its parameters bound to `graph`'s; nullopt when there is none, or it
// cannot be read (an unreadable entry is a miss, and the compile that follows replaces it).
std::optional<CachedGraph> load_cached_graph(const std::string& key, const Graph& graph);

// Writes the entry of `key` (coil::Error when the cache directory is unusable). Returns "" when
// written, else why the entry cannot be kept (a constant that is not contiguous, say).
std::string store_cached_graph(const std::string& key, const Graph& graph,
                               const CachedGraph& entry);

}  // namespace coil
