// mode="max-autotune"'s candidates: a generated kernel printed with other launches than the
// heuristics' (cuda_kernel.h).
#include "backends/cuda/cuda_kernel.h"

namespace coil::cuda {

using codegen::KernelSource;
using schedule::Kernel;

std::vector<KernelSource> launch_alternatives(const Kernel& k, const ir::Program& program) {
  std::vector<LaunchChoice> choices;
  if (k.parts.empty() && k.is_reduction()) {
    for (const RowLaunch& l : row_launch_alternatives(with_two_pass_variances(k), program))
      choices.push_back({0, l});
  } else if (k.parts.empty()) {
    for (int64_t b : {128, 512, 1024}) choices.push_back({b, std::nullopt});
  }
  std::vector<KernelSource> out;
  for (const LaunchChoice& c : choices) {
    Kernel named = k;
    named.name = k.name + "_at" + std::to_string(out.size() + 1);
    out.push_back(generate_kernel(named, program, c));
  }
  return out;
}

}  // namespace coil::cuda
