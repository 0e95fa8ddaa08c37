// The CPU backend's heuristics (heuristics/heuristics.h).
#pragma once

#include "heuristics/heuristics.h"

namespace coil::cpu {

const heuristics::DeviceHeuristics& heuristics();

}  // namespace coil::cpu
