#include "compile/cuda_graphs.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <set>

#include <coil/error.h>

#include "capture/counters.h"
#include "debug/log.h"
#include "runtime/copy.h"
#include "runtime/cuda_runtime.h"
#include "runtime/random.h"
#include "runtime/tensor_impl.h"

namespace coil::detail {

namespace {

// Graphs per function: past it a new input geometry runs without one (a dynamic graph called
// with ever new sizes would otherwise hold a recording per size).
constexpr int kMaxGraphs = 32;

// One recorded graph: the memory it reads and writes, and where each output lives.
struct Recording {
  void* exec = nullptr;
  std::vector<Tensor> inputs;  // the static inputs, which every replay's inputs are copied into
  // The graph's output memory, shared with the program's tensors while it holds them.
  std::vector<std::shared_ptr<Storage>> storages;
  struct Output {
    TensorMeta meta;
    int storage = -1;  // in `storages`...
    int input = -1;    // ...or a view of that input (meta.offset relative to the input's)...
    Tensor fixed;      // ...or always this tensor (a captured parameter, or undefined)
  };
  std::vector<Output> outputs;
  ~Recording() {
    if (exec) cuda::destroy_graph(exec);
  }
};

// The program still holds `s`, which the next replay would overwrite: its tensors move to a copy
// in memory of their own, and the graph keeps its memory in a Storage only the recording holds.
void hand_over(std::shared_ptr<Storage>& s, int device) {
  auto kept = std::make_shared<Storage>();
  kept->data = s->data;
  kept->nbytes = s->nbytes;
  kept->device = s->device;
  kept->deleter = std::move(s->deleter);
  s->data = cuda::allocate(s->nbytes, device);
  s->deleter = [device](void* p) { cuda::free(p, device); };
  cuda::copy(s->data, s->device, kept->data, kept->device, s->nbytes);
  s = std::move(kept);
  capture::bump(capture::Counter::cudagraph_copies);
}

}  // namespace

class CudaGraphPool {
 public:
  ~CudaGraphPool() {
    if (device >= 0) cuda::release_graph_pool(this, device);
  }
  std::mutex mutex;  // one replay at a time: they share the pool's memory
  int device = -1;   // set by the first recording
  int graphs = 0;
  std::set<Recording*> recordings;
};

std::shared_ptr<CudaGraphPool> make_cuda_graph_pool() { return std::make_shared<CudaGraphPool>(); }

namespace {

class Runner {
 public:
  Runner(std::shared_ptr<CudaGraphPool> pool, GraphRun run, std::string name)
      : pool_(std::move(pool)), run_(std::move(run)), name_(std::move(name)) {}
  ~Runner() {
    std::lock_guard<std::mutex> lock(pool_->mutex);
    for (auto& [key, slot] : slots_)
      if (slot.graph) pool_->recordings.erase(slot.graph.get());
  }
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

 private:
  struct Slot {
    bool warmed_up = false;
    std::unique_ptr<Recording> graph;
    bool skipped = false;
  };
  void skip(Slot& slot, const std::string& key, const std::string& why) {
    slot.skipped = true;
    debug::log("cudagraphs", name_, "inputs " + key + " run without a CUDA graph: " + why);
  }
  std::unique_ptr<Recording> record(const std::vector<Tensor>& inputs, int device);
  std::vector<Tensor> replay(Recording& r, const std::vector<Tensor>& inputs, bool copy_inputs);

  std::shared_ptr<CudaGraphPool> pool_;
  GraphRun run_;
  std::string name_;
  std::map<std::string, Slot> slots_;  // by the inputs' geometry
};

// The GPU all defined inputs are on, or -1 with the reason there is none.
int device_of(const std::vector<Tensor>& inputs, std::string& why) {
  int device = -1;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) continue;
    const Device d = inputs[i].device();
    if (!d.is_cuda() || (device >= 0 && d.index != device)) {
      why = "input " + std::to_string(i) + " is on " + d.str();
      return -1;
    }
    device = d.index;
  }
  if (device < 0) why = "no input is on a GPU";
  return device;
}

// "f32[8, 16]{16, 1} ..." : what a recording depends on besides the graph.
std::string geometry(const std::vector<Tensor>& inputs) {
  std::string key;
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      key += "undefined ";
      continue;
    }
    key += std::string(dtype_name(t.dtype())) + shape_str(t.sizes()) + "{" +
           shape_str(t.strides()) + "} ";
  }
  if (!key.empty()) key.pop_back();
  return key;
}

std::vector<Tensor> Runner::operator()(const std::vector<Tensor>& inputs) {
  std::string why;
  const int device = device_of(inputs, why);
  const std::string key = geometry(inputs);
  std::unique_lock<std::mutex> lock(pool_->mutex);
  Slot& slot = slots_[key];
  if (!slot.skipped && device < 0) skip(slot, key, why);
  if (slot.skipped) {
    lock.unlock();
    return run_(inputs);
  }
  if (slot.graph) return replay(*slot.graph, inputs, true);
  if (!slot.warmed_up) {  // kernels loaded, library plans made: what a recording cannot do
    slot.warmed_up = true;
    const uint64_t drawn = random_counters_used();
    std::vector<Tensor> outs = run_(inputs);
    if (random_counters_used() != drawn)
      skip(slot, key, "it draws random numbers (every replay would draw the same ones)");
    for (size_t i = 0; i < outs.size() && !slot.skipped; ++i)
      if (outs[i].defined() && outs[i].device() != Device(DeviceType::CUDA, device))
        skip(slot, key, "output " + std::to_string(i) + " is on " + outs[i].device().str());
    return outs;
  }
  if (pool_->device >= 0 && pool_->device != device)
    skip(slot, key, "the function's graphs are on cuda:" + std::to_string(pool_->device));
  else if (pool_->graphs >= kMaxGraphs)
    skip(slot, key, "the function has " + std::to_string(kMaxGraphs) + " graphs already");
  else
    try {
      slot.graph = record(inputs, device);
    } catch (const std::exception& e) {
      skip(slot, key, std::string("recording failed: ") + e.what());
    }
  if (slot.skipped) {
    lock.unlock();
    return run_(inputs);
  }
  return replay(*slot.graph, inputs, false);
}

std::unique_ptr<Recording> Runner::record(const std::vector<Tensor>& inputs, int device) {
  auto r = std::make_unique<Recording>();
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      r->inputs.push_back(t);
      continue;
    }
    Tensor copy = empty_from_meta(meta_of(t));
    copy_into(copy, t);
    r->inputs.push_back(copy);
  }
  if (pool_->device < 0) {
    cuda::add_graph_pool(pool_.get(), device);
    pool_->device = device;
  }
  std::vector<Tensor> outs;
  cuda::begin_capture(device, pool_.get());
  try {
    outs = run_(r->inputs);
  } catch (...) {
    try {
      cuda::destroy_graph(cuda::end_capture(device));
    } catch (const Error&) {  // the capture was broken already: what the first error says
    }
    throw;
  }
  r->exec = cuda::end_capture(device);

  int64_t graph_bytes = 0;
  for (const Tensor& o : outs) {
    Recording::Output out;
    if (o.defined()) {
      out.meta = meta_of(o);
      const std::shared_ptr<Storage>& s = o.impl()->storage;
      for (size_t i = 0; i < r->inputs.size() && out.input < 0; ++i)
        if (r->inputs[i].defined() && r->inputs[i].impl()->storage == s) {
          out.input = static_cast<int>(i);
          out.meta.offset -= r->inputs[i].impl()->meta.offset;
        }
      if (out.input < 0 && s && cuda::in_graph_pool(s->data, pool_.get(), device)) {
        auto it = std::find(r->storages.begin(), r->storages.end(), s);
        out.storage = static_cast<int>(it - r->storages.begin());
        if (it == r->storages.end()) {
          r->storages.push_back(s);
          graph_bytes += static_cast<int64_t>(s->nbytes);
        }
      } else if (out.input < 0) {
        out.fixed = o;
      }
    }
    r->outputs.push_back(std::move(out));
  }
  pool_->recordings.insert(r.get());
  ++pool_->graphs;
  capture::bump(capture::Counter::cudagraph_recordings);
  debug::log("cudagraphs", name_,
             "recorded a CUDA graph for inputs " + geometry(inputs) + " (graph " +
                 std::to_string(pool_->graphs) + " of the function; outputs in " +
                 std::to_string(graph_bytes) + " bytes of its pool)");
  return r;
}

std::vector<Tensor> Runner::replay(Recording& r, const std::vector<Tensor>& inputs,
                                   bool copy_inputs) {
  const int device = pool_->device;
  for (Recording* other : pool_->recordings)
    for (std::shared_ptr<Storage>& s : other->storages)
      if (s.use_count() > 1) hand_over(s, device);
  for (size_t i = 0; copy_inputs && i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    const Tensor& to = r.inputs[i];
    if (!in.defined() || in.impl()->data() == to.impl()->data()) continue;
    if (in.is_contiguous())
      cuda::copy(to.impl()->data(), to.device(), in.impl()->data(), in.device(),
                 static_cast<size_t>(in.numel()) * itemsize(in.dtype()));
    else
      copy_into(to, in);
  }
  cuda::launch_graph(r.exec, device);
  capture::bump(capture::Counter::cudagraph_replays);

  std::vector<Tensor> outs;
  outs.reserve(r.outputs.size());
  for (const Recording::Output& o : r.outputs) {
    if (o.input >= 0) {
      const Tensor& in = inputs[static_cast<size_t>(o.input)];
      outs.push_back(
          alias_with(in, o.meta.sizes, o.meta.strides, in.impl()->meta.offset + o.meta.offset));
    } else if (o.storage >= 0) {
      auto impl = std::make_shared<TensorImpl>();
      impl->storage = r.storages[static_cast<size_t>(o.storage)];
      impl->meta = o.meta;
      outs.emplace_back(std::move(impl));
    } else {
      outs.push_back(o.fixed);
    }
  }
  return outs;
}

}  // namespace

GraphRun cuda_graph_run(std::shared_ptr<CudaGraphPool> pool, GraphRun run, std::string name) {
  auto runner = std::make_shared<Runner>(std::move(pool), std::move(run), std::move(name));
  return [runner](const std::vector<Tensor>& inputs) { return (*runner)(inputs); };
}

}  // namespace coil::detail
