// Kernels compiled once: a model's layers make the same kernels over different buffers (GPT-2's
// twelve layer norms, softmaxes, GELUs), and Inductor compiles each distinct kernel source once.
#pragma once

#include <string>
#include <vector>

#include "codegen/kernel_source.h"

namespace coil::codegen {

// `k`'s code with its name and its argument buffers' names (also inside identifiers made from
// them, acc_buf3) replaced by their positions, and other buffers' names (values kept in
// registers) by their order of appearance: two kernels with equal keys compute the same thing
// from the same positional arguments.
std::string positional_code(const KernelSource& k);

// Sets each kernel's `function`: its own name, or the name of the first earlier kernel whose
// positional code is the same, whose compiled function it then runs. Returns how many kernels
// share another's function.
int share_identical_kernels(std::vector<KernelSource>& kernels);

}  // namespace coil::codegen
