#include "compile/cuda_graphs.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
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

// Inputs are read where they are rather than copied into static inputs: a copy doubles a
// memory-bound graph's traffic, and each copy node costs a couple of microseconds however small.
// A call at a recorded address costs no copy; the addresses of up to kAddressSets calls (a
// program's rotating buffers, the caching allocator handing a freed batch's memory to the next)
// have a recording each; past that, a call at another records the graph again (updating the
// instantiated one), unless that took longer than the copies it saves would (then the slot
// copies its inputs from the next move on).
constexpr size_t kAddressSets = 8;

// How a recording reads an input.
enum class Read {
  Copied,         // from a static input, the call's input copied into it
  StaticAddress,  // where it is, always there (coil::mark_static_address; part of the key)
  InPlace,        // where it is, recorded again when a call's is elsewhere
};

// One recorded graph: the memory it reads and writes, and where each output lives.
struct Recording {
  cuda::RecordedGraph graph;
  // The static inputs, which every replay's inputs are copied into, or the program's tensor
  // itself where the graph reads it at a static address; for an input read in place, its meta
  // alone and (`at`) the address read, which the recording does not keep alive: it is replayed
  // only for a call whose input is there.
  std::vector<Tensor> inputs;
  std::vector<Read> reads;
  std::vector<const void*> at;
  // Per input, the graph's own copy into its static input (-1: none; a strided input is copied
  // before the launch), and each copy's source at the last launch.
  std::vector<int> copy_of;
  std::vector<cuda::GraphCopy> copies;
  // The graph's output memory, shared with the program's tensors while it holds them.
  std::vector<std::shared_ptr<Storage>> storages;
  struct Output {
    TensorMeta meta;
    int storage = -1;  // in `storages`...
    int input = -1;    // ...or a view of that input (meta.offset relative to the input's)...
    Tensor fixed;      // ...or always this tensor (a captured parameter, or undefined)
  };
  std::vector<Output> outputs;
  ~Recording() { cuda::destroy_graph(graph); }
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
    for (auto& [key, slot] : slots_) {
      if (slot.graph) pool_->recordings.erase(slot.graph.get());
      for (auto& r : slot.elsewhere) pool_->recordings.erase(r.get());
    }
  }
  std::vector<Tensor> operator()(const std::vector<Tensor>& inputs);

 private:
  struct Slot {
    bool warmed_up = false;
    std::unique_ptr<Recording> graph;
    // Recordings of the same geometry at other addresses of its inputs, latest first.
    std::vector<std::unique_ptr<Recording>> elsewhere;
    bool skipped = false;
    bool copy_inputs = false;  // recording again cost more than copying the inputs
  };
  void forget(std::unique_ptr<Recording>& r) {
    pool_->recordings.erase(r.get());
    --pool_->graphs;
    r.reset();
  }
  void skip(Slot& slot, const std::string& geometry, const std::string& why) {
    slot.skipped = true;
    debug::log("cudagraphs", name_, "inputs " + geometry + " run without a CUDA graph: " + why);
  }
  std::unique_ptr<Recording> record(const std::vector<Tensor>& inputs, int device, bool copy_inputs,
                                    Recording* previous = nullptr);
  void record_again(Slot& slot, const std::vector<Tensor>& inputs);
  void find_or_record(Slot& slot, const std::vector<Tensor>& inputs);
  // The slot's graph launched for `inputs` (recorded again first where they moved).
  std::vector<Tensor> launch(Slot& slot, const std::vector<Tensor>& inputs,
                             std::unique_lock<std::mutex>& lock);
  std::vector<Tensor> replay(Recording& r, const std::vector<Tensor>& inputs);

  std::shared_ptr<CudaGraphPool> pool_;
  GraphRun run_;
  std::string name_;
  std::map<std::string, Slot> slots_;  // by the inputs' geometry (see key())
  Slot* last_ = nullptr;               // the last call's, tried first
  bool said_no_gpu_ = false;           // a call without a GPU was logged
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

size_t bytes_of(const Tensor& t) { return static_cast<size_t>(t.numel()) * itemsize(t.dtype()); }

bool read_in_place(const Tensor& t) { return t.defined() && t.impl()->storage->static_address; }

// "float32[8, 16]{[16, 1]} ...": what a recording depends on besides the graph, and the memory
// of the inputs it reads in place.
std::string key(const std::vector<Tensor>& inputs) {
  std::string key;
  for (const Tensor& t : inputs) {
    if (!t.defined()) {
      key += "undefined ";
      continue;
    }
    key += std::string(dtype_name(t.dtype())) + shape_str(t.sizes()) + "{" +
           shape_str(t.strides()) + "}";
    if (read_in_place(t)) {
      char at[32];
      std::snprintf(at, sizeof at, "@%p", static_cast<void*>(t.impl()->data()));
      key += at;
    }
    key += " ";
  }
  if (!key.empty()) key.pop_back();
  return key;
}

// `inputs` are what `r` was recorded for (key() without making the string).
bool fits(const Recording& r, const std::vector<Tensor>& inputs) {
  if (inputs.size() != r.inputs.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].defined() != r.inputs[i].defined()) return false;
    if (!inputs[i].defined()) continue;
    const TensorMeta &a = inputs[i].impl()->meta, &b = r.inputs[i].impl()->meta;
    if (a.dtype != b.dtype || a.sizes != b.sizes || a.strides != b.strides || a.device != b.device)
      return false;
    const bool static_address = r.reads[i] == Read::StaticAddress;
    if (static_address != read_in_place(inputs[i])) return false;
    if (static_address && inputs[i].impl()->data() != r.inputs[i].impl()->data()) return false;
  }
  return true;
}

// The bytes of the inputs `r` reads in place that are elsewhere in this call (0: none moved).
size_t moved_bytes(const Recording& r, const std::vector<Tensor>& inputs) {
  size_t bytes = 0;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (r.reads[i] == Read::InPlace && inputs[i].impl()->data() != r.at[i])
      bytes += bytes_of(inputs[i]);
  return bytes;
}

std::vector<Tensor> Runner::operator()(const std::vector<Tensor>& inputs) {
  std::unique_lock<std::mutex> lock(pool_->mutex);
  if (last_ && last_->graph && fits(*last_->graph, inputs)) return launch(*last_, inputs, lock);
  std::string why;
  const int device = device_of(inputs, why);
  if (device < 0) {  // no slot: a CPU call costs no key per call, and is logged once
    if (!said_no_gpu_)
      debug::log("cudagraphs", name_,
                 "inputs " + key(inputs) + " run without a CUDA graph: " + why);
    said_no_gpu_ = true;
    lock.unlock();
    return run_(inputs);
  }
  const std::string geometry = key(inputs);
  Slot& slot = slots_[geometry];
  last_ = &slot;
  if (slot.skipped) {
    lock.unlock();
    return run_(inputs);
  }
  if (slot.graph) return launch(slot, inputs, lock);
  if (!slot.warmed_up) {  // kernels loaded, library plans made: what a recording cannot do
    slot.warmed_up = true;
    const uint64_t drawn = random_counters_used();
    std::vector<Tensor> outs = run_(inputs);
    if (random_counters_used() != drawn)
      skip(slot, geometry, "it draws random numbers (every replay would draw the same ones)");
    for (size_t i = 0; i < outs.size() && !slot.skipped; ++i)
      if (outs[i].defined() && outs[i].device() != Device(DeviceType::CUDA, device))
        skip(slot, geometry, "output " + std::to_string(i) + " is on " + outs[i].device().str());
    return outs;
  }
  if (pool_->device >= 0 && pool_->device != device)
    skip(slot, geometry, "the function's graphs are on cuda:" + std::to_string(pool_->device));
  else if (pool_->graphs >= kMaxGraphs)
    skip(slot, geometry, "the function has " + std::to_string(kMaxGraphs) + " graphs already");
  else
    try {
      slot.graph = record(inputs, device, false);
    } catch (const std::exception& e) {
      skip(slot, geometry, std::string("recording failed: ") + e.what());
    }
  if (slot.skipped) {
    lock.unlock();
    return run_(inputs);
  }
  return launch(slot, inputs, lock);
}

std::vector<Tensor> Runner::launch(Slot& slot, const std::vector<Tensor>& inputs,
                                   std::unique_lock<std::mutex>& lock) {
  if (moved_bytes(*slot.graph, inputs)) try {
      find_or_record(slot, inputs);
    } catch (const std::exception& e) {
      slot.graph.reset();
      for (auto& r : slot.elsewhere) forget(r);
      slot.elsewhere.clear();
      skip(slot, key(inputs), std::string("recording again failed: ") + e.what());
      lock.unlock();
      return run_(inputs);
    }
  return replay(*slot.graph, inputs);
}

std::unique_ptr<Recording> Runner::record(const std::vector<Tensor>& inputs, int device,
                                          bool copy_inputs, Recording* previous) {
  auto r = std::make_unique<Recording>();
  for (const Tensor& t : inputs) {
    r->reads.push_back(read_in_place(t)              ? Read::StaticAddress
                       : t.defined() && !copy_inputs ? Read::InPlace
                                                     : Read::Copied);
    const Read read = r->reads.back();
    r->at.push_back(read == Read::InPlace ? t.impl()->data() : nullptr);
    r->inputs.push_back(!t.defined() || read == Read::StaticAddress ? t
                        : read == Read::InPlace                     ? meta_tensor(meta_of(t))
                                                                    : empty_from_meta(meta_of(t)));
  }
  if (pool_->device < 0) {
    cuda::add_graph_pool(pool_.get(), device);
    pool_->device = device;
  }
  // The capture runs on the call's own tensors where the graph reads them in place.
  std::vector<Tensor> captured = r->inputs;
  for (size_t i = 0; i < inputs.size(); ++i)
    if (r->reads[i] == Read::InPlace) captured[i] = inputs[i];
  std::vector<Tensor> outs;
  cuda::begin_capture(device, pool_.get());
  try {
    outs = run_(captured);
  } catch (...) {
    try {
      cuda::RecordedGraph broken = cuda::end_capture(device);
      cuda::destroy_graph(broken);
    } catch (const Error&) {  // the capture was broken already: what the first error says
    }
    throw;
  }
  // Contiguous inputs are copied by the graph itself, before its work: no launch of their own.
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    const bool copied =
        t.defined() && r->reads[i] == Read::Copied && t.is_contiguous() && t.numel();
    r->copy_of.push_back(copied ? static_cast<int>(r->copies.size()) : -1);
    if (copied) r->copies.push_back({r->inputs[i].impl()->data(), t.impl()->data(), bytes_of(t)});
  }
  r->graph = cuda::end_capture(device, r->copies, previous ? &previous->graph : nullptr);

  int64_t graph_bytes = 0;
  for (const Tensor& o : outs) {
    Recording::Output out;
    if (o.defined()) {
      out.meta = meta_of(o);
      const std::shared_ptr<Storage>& s = o.impl()->storage;
      for (size_t i = 0; i < captured.size() && out.input < 0; ++i)
        if (captured[i].defined() && captured[i].impl()->storage == s) {
          out.input = static_cast<int>(i);
          out.meta.offset -= captured[i].impl()->meta.offset;
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
             "recorded a CUDA graph for inputs " + key(inputs) + " (graph " +
                 std::to_string(pool_->graphs) + " of the function; outputs in " +
                 std::to_string(graph_bytes) + " bytes of its pool)");
  return r;
}

// A call whose inputs are not where the slot's graph reads them: the slot's recording at
// their addresses if it has one, else a new one while it has fewer than kAddressSets, else its
// graph recorded again.
void Runner::find_or_record(Slot& slot, const std::vector<Tensor>& inputs) {
  for (auto it = slot.elsewhere.begin(); it != slot.elsewhere.end(); ++it)
    if (!moved_bytes(**it, inputs)) {
      std::swap(slot.graph, *it);
      std::rotate(slot.elsewhere.begin(), it, it + 1);  // the one it replaced, latest first
      return;
    }
  if (!slot.copy_inputs && slot.elsewhere.size() + 1 < kAddressSets && pool_->graphs < kMaxGraphs) {
    std::unique_ptr<Recording> fresh = record(inputs, pool_->device, false);
    slot.elsewhere.insert(slot.elsewhere.begin(), std::move(slot.graph));
    slot.graph = std::move(fresh);
    return;
  }
  record_again(slot, inputs);
}

// The slot's graph recorded again for inputs elsewhere than it reads them, and the instantiated
// graph updated. Where that took longer than copying those inputs would, the slot copies them
// from the next move on (and forgets its recordings at other addresses).
void Runner::record_again(Slot& slot, const std::vector<Tensor>& inputs) {
  const size_t bytes = moved_bytes(*slot.graph, inputs);
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Recording> old = std::move(slot.graph);
  pool_->recordings.erase(old.get());
  --pool_->graphs;
  slot.graph = record(inputs, pool_->device, slot.copy_inputs, old.get());
  old.reset();
  capture::bump(capture::Counter::cudagraph_rerecordings);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double copy_seconds =
      2.0 * static_cast<double>(bytes) / cuda::device_info(pool_->device).memory_bytes_per_second;
  if (!slot.copy_inputs && seconds > copy_seconds) {
    slot.copy_inputs = true;
    for (auto& r : slot.elsewhere) forget(r);
    slot.elsewhere.clear();
    debug::log("cudagraphs", name_,
               "recording again for inputs elsewhere took longer than copying their " +
                   std::to_string(bytes) + " bytes would: copied from the next move on");
  }
}

std::vector<Tensor> Runner::replay(Recording& r, const std::vector<Tensor>& inputs) {
  const int device = pool_->device;
  for (Recording* other : pool_->recordings)
    for (std::shared_ptr<Storage>& s : other->storages)
      if (s.use_count() > 1) hand_over(s, device);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || r.reads[i] != Read::Copied) continue;
    const void* src = inputs[i].impl()->data();
    if (r.copy_of[i] < 0) {
      copy_into(r.inputs[i], inputs[i]);
    } else if (cuda::GraphCopy& c = r.copies[static_cast<size_t>(r.copy_of[i])]; c.src != src) {
      c.src = src;
      cuda::set_graph_copy(r.graph, static_cast<size_t>(r.copy_of[i]), c);
    }
  }
  cuda::launch_graph(r.graph, device);
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
