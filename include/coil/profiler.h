// coil's profiler (as torch.profiler's key averages): while a Profiler is alive, the time of each
// generated kernel and library call of compiled graphs, and of each eager op called outside
// them, is recorded under its name. On the CPU a time is the host's (the work is synchronous);
// on the GPU it is device time between CUDA events queued around the work (launches stay
// asynchronous; the events are read when the rows are asked for). Work inside recorded work is
// not recorded again: the eager ops a library call runs, the kernels of a GPU eager op. The same
// records, in order and with their start times, are a timeline (timeline(), a Chrome trace).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace coil {

class Profiler {
 public:
  // Starts recording; one profiler at a time (a second is a coil::Error).
  Profiler();
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  struct Row {
    std::string name;    // the kernel's name (poi_fused_add_relu_0), or the op's (mm)
    std::string kind;    // "kernel", "library" (an extern call of a compiled graph) or "eager"
    std::string device;  // "cpu", "cuda:0"
    int64_t calls = 0;
    double total_ms = 0;
  };
  // Stops recording, waits for the GPU's marks, and sums the work by name, kind and device:
  // the largest total first.
  std::vector<Row> rows();
  // The rows as a table (at most `max_rows`, then one line for the rest), with each row's share
  // of the total.
  std::string table(size_t max_rows = 30);

  // Each piece of work recorded, in the order it was queued, with its start and end in ms (as
  // torch.profiler's trace). A GPU's spans are on that device's clock, from its first record's
  // start (CUDA events), so a gap between consecutive spans is time the device had no work of
  // coil's; the CPU's are on the host's clock, from the profiler's start. Stops recording, as
  // rows() does.
  struct Span {
    std::string name, kind, device;
    double start_ms = 0, end_ms = 0;
  };
  std::vector<Span> timeline();
  // The timeline as a Chrome trace (chrome://tracing, ui.perfetto.dev): one track per device.
  // coil::Error when `path` cannot be written.
  void export_chrome_trace(const std::string& path);

  struct Recording;

 private:
  std::unique_ptr<Recording> recording_;
};

}  // namespace coil
