// What the runtime, the dispatcher and the wrapper call to be profiled (include/coil/profiler.h):
// a ProfileScope around each piece of work. When no profiler records, a scope costs one relaxed
// atomic load.
#pragma once

#include <string_view>

#include <coil/device.h>

namespace coil {

class ProfileScope {
 public:
  // `kind` and `name` must outlive the scope's end.
  ProfileScope(const char* kind, std::string_view name, const Device& device) {
    if (recording()) begin(kind, name, device);
  }
  ~ProfileScope() {
    if (counted_) end();
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  static bool recording();
  void begin(const char* kind, std::string_view name, const Device& device);
  void end();
  void* state_ = nullptr;  // this scope's record, when it is one (the thread's outermost)
  bool counted_ = false;   // begun while a profiler recorded: counted in the thread's depth
};

}  // namespace coil
