// Compiling one module's source in parts, side by side: the backends' module_source puts
// kPartBoundary between kernels, and a compiler that meets a large source may cut it there and
// compile each part (the prelude and a run of whole kernels) on its own thread or process, then
// put the results back together (a link on the CPU, a bundle of cubins on the GPU).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace coil::jit {

// Between the kernels of a module's source: where it may be cut.
inline constexpr std::string_view kPartBoundary = "\n// coil: part boundary\n";

// How many compilers may run at once: $COIL_COMPILE_THREADS, else one per hardware thread.
size_t compile_jobs();

// How many parts `source` is worth compiling in: 1 when it is under `split_bytes`, else up to
// one per compile job and per kernel, each part holding at least `min_part_bytes`.
size_t parts_for(std::string_view source, size_t split_bytes, size_t min_part_bytes);

// `source` cut at its boundaries into `parts` sources of about equal size, each the prelude
// (the text before the first boundary) followed by a run of whole kernels.
std::vector<std::string> split_source(std::string_view source, size_t parts);

// Calls fn(0) .. fn(n - 1), each on a thread of its own, and waits for all of them; the first
// exception one of them threw is rethrown here.
void run_parts(size_t n, const std::function<void(size_t)>& fn);

}  // namespace coil::jit
