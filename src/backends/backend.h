// The seam a device plugs into (Inductor's BaseScheduling and wrapper codegen per device).
// Everything above it is device-neutral: the graph stages, lowering to the loop IR and the
// scheduler's kernels, which ask what differs by device of heuristics::for_device (each
// backend's answers), and eager ops, whose device kernels a backend registers with the
// dispatcher. A device backend says which graph ops it runs as library calls, turns
// each scheduled kernel into source in its language, compiles and loads that source through
// the code cache, and binds each kernel for the wrapper to call. The CPU backend (cpu/) is the
// first; a second device adds a folder beside it and a line in backend.cpp.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <coil/device.h>

#include "codegen/kernel_source.h"
#include "codegen/wrapper_plan.h"
#include "graph/graph.h"
#include "heuristics/heuristics.h"
#include "ir/program.h"
#include "jit/code_cache.h"
#include "schedule/kernel.h"

namespace coil::backends {

class DeviceBackend {
 public:
  virtual ~DeviceBackend() = default;

  virtual DeviceType device() const = 0;
  // Names the backend in logs and the timeline: "cpp", "cuda".
  virtual const char* name() const = 0;

  // Lowering: why `n` runs as a library call on this device (a matrix product, attention), or
  // nullopt when it is lowered to loops. Ops with no lowering run their eager kernel anyway.
  virtual std::optional<std::string> library_call(const Node& n) const = 0;

  // Code generation: one kernel of the schedule as a function of the backend's language, then
  // the compile unit of all of a graph's kernels (a prelude, then each kernel).
  virtual codegen::KernelSource generate_kernel(const schedule::Kernel& k,
                                                const ir::Program& program) const = 0;
  // mode="max-autotune": the same kernel with other launch configurations, for the first call
  // to time (KernelSource::alternatives); none where the backend has no such choice.
  virtual std::vector<codegen::KernelSource> launch_alternatives(
      const schedule::Kernel& /*k*/, const ir::Program& /*program*/) const {
    return {};
  }
  virtual std::string module_source(const std::vector<codegen::KernelSource>& kernels) const = 0;
  // The part of module_source() every compile unit shares (what output_code leaves out).
  virtual std::string_view prelude() const = 0;
  // The extension of its source files in the code cache (".cpp", ".cu").
  virtual const char* source_extension() const = 0;

  // The JIT: the compiler of compile units (for the code cache), and a compile unit as a
  // loaded module, compiled now or found in the code cache.
  virtual std::unique_ptr<jit::Compiler> compiler() const = 0;
  std::shared_ptr<const jit::Module> load(const std::string& source, const std::string& name_hint,
                                          jit::LoadInfo* info = nullptr) const {
    return jit::load(source, *compiler(), name_hint, info);
  }
  // The kernels this backend writes by hand, compiled into the disk cache unless they are
  // there (jit::precompile): what the build ships as the seed cache (jit/seed_cache.h). Returns
  // how many it compiled, naming each in `names` when that is given.
  virtual int precompile_library_kernels(std::vector<std::string>* names = nullptr) const {
    return 0;
  }

  // The wrapper: the kernel of `step` in `module`, as the wrapper calls it with a pointer per
  // argument (and the index error record, when the step has checks).
  virtual codegen::KernelCall bind(const jit::Module& module,
                                   const codegen::WrapperPlan::Step& step) const = 0;
};

// The backend that compiles for `device` (coil::Error naming the device when coil has none).
const DeviceBackend& backend_for(Device device);
// The CUDA backend for GPU `device` (-1: compile only, where there is no GPU), or nullptr when
// coil was built without CUDA.
const DeviceBackend* cuda_backend(int device);
// The GPU's heuristics (in every build: lowering for the GPU needs no toolkit).
const heuristics::DeviceHeuristics& cuda_heuristics();

}  // namespace coil::backends
