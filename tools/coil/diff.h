// A line diff in the unified format (diff -u), for `coil passes --diff`: what a pass changed.
#pragma once

#include <string>

namespace coil::tool {

// The hunks that turn `before` into `after`, each with `context` unchanged lines around its
// changes, under "--- before_label" / "+++ after_label" headers; empty when the texts are equal.
std::string unified_diff(const std::string& before, const std::string& after,
                         const std::string& before_label, const std::string& after_label,
                         int context = 3);

}  // namespace coil::tool
