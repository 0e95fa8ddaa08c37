// mode="max-autotune" for generated kernels: a kernel printed with several launches (other
// blocks, groups, rows a block: KernelSource::alternatives) is timed, every launch on the call's
// own buffers, at its first call under an AutotuneScope, and the fastest is kept for the
// process and on disk (keyed by the module, the kernel and the GPU), so a
// later process reads the choice instead of timing. The kernels only write their outputs, so
// running one several times gives the same result; a call whose buffers share memory (a kernel
// writing in place) is not timed, and runs the heuristics' launch. COIL_KERNEL_LAUNCH=n runs
// candidate n of every such kernel instead (to check each launch's results).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace coil::cuda {

// How max-autotune times a candidate (a kernel's launch, cuBLASLt's algorithm): a warm-up call
// of `run`, then the median device milliseconds of `runs` more, each between two events on
// `stream`; the calls where `run` returns false (a launch the library refused) are left out.
// nullopt when the warm-up or every timed call failed.
std::optional<float> median_device_ms(void* stream, int runs, const std::function<bool()>& run);

struct TunedKernel {
  std::string module_path;  // the code cache's file: its name is the source's hash
  std::string kernel;       // the heuristics' function
  int device = 0;
  size_t candidates = 1;  // the heuristics' launch first, then the alternatives
};

// The candidate to run: the one an earlier call or process chose, or, the first time (and only
// under an AutotuneScope), the fastest of `run(i)` for every candidate i, timed on the current
// stream. A dynamic kernel is timed at the sizes of its first call under the mode (`sizes`, the
// call's size symbols in text, for the log), and that choice serves every size, as Inductor
// tunes at the hints: timing again at each new size would stall a loop whose sizes grow with
// every step (a decoder's cache). `aliased`: the call's buffers overlap, so it is not timed.
// nullopt where nothing is decided yet: outside an AutotuneScope, or a call that is not timed
// (the caller runs the heuristics' launch and asks again at its next call).
std::optional<size_t> tuned_candidate(const TunedKernel& k, const std::string& sizes, bool aliased,
                                      const std::function<void(size_t)>& run);

}  // namespace coil::cuda
