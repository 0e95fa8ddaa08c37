#include "runtime/autotune.h"

namespace coil {

namespace {
thread_local bool t_autotuning = false;
}  // namespace

bool autotuning() { return t_autotuning; }

AutotuneScope::AutotuneScope(bool on) : previous_(t_autotuning) { t_autotuning = on; }
AutotuneScope::~AutotuneScope() { t_autotuning = previous_; }

}  // namespace coil
