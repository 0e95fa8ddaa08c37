// Autocast in the dispatcher: call_op rewrites an op's arguments by the op's cast policy on the
// device autocast is on for, before autograd records the op (so the casts are recorded, and
// captured, as to_dtype calls). The policies are PyTorch's lists (autocast.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <coil/amp.h>

#include "graph/arg.h"
#include "graph/registry.h"

namespace coil {

enum class CastPolicy : uint8_t {
  LowerPrecision,  // floating inputs to autocast's dtype
  Float32,         // floating inputs to float32
  Float32Result,   // a reduction whose dtype argument, when none is given, becomes float32
  Promote,         // floating inputs to the widest of their types
};

// The op's policy on `device`, or nullopt for an op autocast leaves alone.
std::optional<CastPolicy> autocast_policy(DeviceType device, OpId op);

// Autocast's state in this thread as one number (which devices it is on for, and their dtypes):
// what a compiled function's guards compare, and its text ("cuda bfloat16", "off").
uint32_t autocast_state();
std::string autocast_state_str(uint32_t state);

// Whether autocast is on for any device in this thread (the dispatcher's quick test).
bool autocast_active();
// Casts `args` of `op` as autocast's policy says, where it is on for their device.
void apply_autocast(OpId op, std::vector<Arg>& args);

// RAII: autocast off for every device in this scope, restored after (replaying a captured graph,
// whose casts are explicit, and running a backward, whose ops take their forward's types).
class AutocastOff {
 public:
  AutocastOff();
  ~AutocastOff();
  AutocastOff(const AutocastOff&) = delete;
  AutocastOff& operator=(const AutocastOff&) = delete;

 private:
  bool was_[2];
};

}  // namespace coil
