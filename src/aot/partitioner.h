// The partitioner: splits a joint graph into the forward graph (which also returns the values
// the backward needs) and the backward graph. What crosses between them is a minimum cut:
// each forward value the backward reads is either saved, or recomputed in the backward from
// values that are, whichever needs fewer bytes saved (AOTAutograd's min-cut rematerialisation).
// Matrix products, convolutions, random ops and large reductions are never recomputed.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "aot/joint_graph.h"

namespace coil::aot {

struct Partition {
  // Placeholders: the primals. Outputs: the forward outputs, then the saved values.
  std::shared_ptr<Graph> forward;
  // Placeholders: the saved values, then the tangents. Outputs: the gradients, in the joint
  // graph's grad_targets order.
  std::shared_ptr<Graph> backward;
  size_t num_saved = 0;
  // What the partitioner decided, for COIL_LOGS=partitioner.
  std::vector<std::string> saved_names, recomputed_names;
  int64_t saved_bytes = 0;            // the cut
  int64_t save_everything_bytes = 0;  // every forward value the backward reads, saved as is
  std::string report() const;
};

Partition partition(const JointGraph& joint);

}  // namespace coil::aot
