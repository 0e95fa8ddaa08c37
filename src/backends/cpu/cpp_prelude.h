// The text every generated C++ source starts with. Generated code includes no header (a
// standard header costs more compile time than the kernels): it declares the few types,
// helpers and vector-math entry points it uses itself.
#pragma once

#include <string>

namespace coil::cpu {

const std::string& cpp_prelude();

}  // namespace coil::cpu
