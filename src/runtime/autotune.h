// mode="max-autotune": while an AutotuneScope is alive on a thread, the library calls it makes
// (cuBLASLt's products) time their candidate algorithms on the call's own operands and keep the
// fastest, instead of taking their heuristic's first pick. The choice is remembered per problem
// for the process and on disk (keyed by the GPU's name and the library's version), so only a
// problem's first call in the first process pays for the timing.
#pragma once

namespace coil {

bool autotuning();

class AutotuneScope {
 public:
  explicit AutotuneScope(bool on);
  ~AutotuneScope();
  AutotuneScope(const AutotuneScope&) = delete;
  AutotuneScope& operator=(const AutotuneScope&) = delete;

 private:
  bool previous_;
};

}  // namespace coil
