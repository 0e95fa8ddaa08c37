#include "schedule/placement.h"

#include <algorithm>

namespace coil::schedule {

std::map<std::string, NodePlacement> place_nodes(const ir::Program& program, const Schedule& s) {
  std::map<std::string, NodePlacement> out;
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    for (const KernelNode& kn : s.kernels[k].nodes) {
      for (const std::string& node : program.buffer(kn.buffer).origins) {
        std::vector<int>& ks = out[node].kernels;
        if (std::find(ks.begin(), ks.end(), static_cast<int>(k)) == ks.end())
          ks.push_back(static_cast<int>(k));
      }
    }
  }
  for (const Step& step : s.steps) {
    if (step.kernel >= 0) continue;
    const ir::Buffer& b = program.buffer(step.buffer);
    for (const std::string& node : b.origins) {
      out[node].extern_call = true;
      out[node].extern_reason = b.call ? b.call->reason : "";
    }
  }
  for (auto& [name, p] : out) std::sort(p.kernels.begin(), p.kernels.end());
  return out;
}

}  // namespace coil::schedule
