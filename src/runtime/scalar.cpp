#include <coil/scalar.h>

#include <cmath>
#include <cstdio>

namespace coil {

std::string Scalar::str() const {
  if (kind_ == Kind::Bool) return i_ ? "True" : "False";
  if (kind_ == Kind::Int) return std::to_string(i_);
  if (std::isnan(d_)) return "nan";
  if (std::isinf(d_)) return d_ > 0 ? "inf" : "-inf";
  // Shortest text that reads back to the same double, always with a '.' or exponent so the
  // parser knows it is a float.
  char buf[32];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, d_);
    if (std::strtod(buf, nullptr) == d_) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

}  // namespace coil
