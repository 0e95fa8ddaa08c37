// coil's two kinds of failure: a user mistake (coil::Error) and a broken internal
// invariant (coil::InternalError). Neither ever aborts the host process.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace coil {

// A user mistake: bad shapes, an unsupported dtype, a bad option. The message names the
// op, the shapes/dtypes involved and what to do about it.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A bug in coil itself: an invariant that must hold did not.
class InternalError : public std::logic_error {
 public:
  explicit InternalError(const std::string& what) : std::logic_error(what) {}
};

namespace detail {
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  ((os << args), ...);
  return os.str();
}
}  // namespace detail

}  // namespace coil

// COIL_CHECK(cond, "op: ", shape, " is wrong; do X") throws coil::Error when cond fails.
#define COIL_CHECK(cond, ...)                                               \
  do {                                                                      \
    if (!(cond)) throw ::coil::Error(::coil::detail::str_cat(__VA_ARGS__)); \
  } while (0)

// COIL_ASSERT guards coil's own invariants; failing it is a coil bug.
#define COIL_ASSERT(cond, ...)                                                              \
  do {                                                                                      \
    if (!(cond))                                                                            \
      throw ::coil::InternalError(::coil::detail::str_cat(                                  \
          "internal error at ", __FILE__, ":", __LINE__, ": ", #cond, " ", ##__VA_ARGS__)); \
  } while (0)
