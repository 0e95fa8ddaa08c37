// coil's profiler (as torch.profiler's key averages): while a Profiler is alive, the time of each
// generated kernel and library call of compiled graphs, and of each eager op called outside
// them, is recorded under its name. On the CPU a time is the host's (the work is synchronous);
// on the GPU it is device time between CUDA events queued around the work (launches stay
// asynchronous; the events are read when the rows are asked for). Work inside recorded work is
// not recorded again: the eager ops a library call runs, the kernels of a GPU eager op.
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

  struct Recording;

 private:
  std::unique_ptr<Recording> recording_;
};

}  // namespace coil
