// mode="reduce-overhead": a compiled graph whose tensors are all on one GPU runs as a CUDA graph,
// recorded once per input geometry and replayed, so that a call costs one graph launch instead of
// a launch per kernel and library call (torch.compile's cudagraph trees play this part).
//
// The first call at a geometry runs as usual (a warm-up: kernels loaded, library plans made); the
// second records the graph on the call's tensors, read where they are, and every later call
// replays it, one launch: a call with tensors elsewhere replays the geometry's recording at
// their addresses or makes one (up to a bound), past which the graph is recorded again, or,
// where that costs more than copying, recorded on static inputs that the graph's first nodes
// copy the call's tensors into (their sources updated when they change). What a recording
// allocates comes from the function's graph pool, shared by all its graphs and never handed to
// other work while they live. A replay rewrites the same output memory: outputs of earlier replays
// that the program still holds are first moved to fresh memory of their own (a copy on the GPU), so
// no result the program sees is ever overwritten. Where a graph cannot be used it runs as without
// the mode, and the cudagraphs log says why: tensors on the CPU, random draws (every replay would
// draw the same numbers), work that synchronises the host (the capture fails), more geometries than
// the bound.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <coil/tensor.h>

namespace coil::detail {

using GraphRun = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

// One per compiled function: its graphs' memory pool.
class CudaGraphPool;
std::shared_ptr<CudaGraphPool> make_cuda_graph_pool();

// `run` (a compiled graph's) as replays of CUDA graphs in `pool`; `name` prefixes its log lines.
GraphRun cuda_graph_run(std::shared_ptr<CudaGraphPool> pool, GraphRun run, std::string name);

}  // namespace coil::detail
