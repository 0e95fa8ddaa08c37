// The backends a user names in CompileOptions::backend (torch.compile's `backend=`), one table
// that option checking and compile_fx both read: how far down the pipeline each takes a
// captured graph before running it.
#pragma once

#include <string>
#include <vector>

namespace coil {

struct CompileBackend {
  enum class Depth {
    capture,  // the captured graph runs on the eager kernels, op by op
    graph,    // after the graph stages (passes, autograd, decompositions): still eager kernels
    code,     // on to lowering, fusion and generated code
  };
  const char* name;
  Depth depth;
};

const std::vector<CompileBackend>& compile_backends();
// The backend called `name`; coil::Error listing the known ones otherwise.
const CompileBackend& compile_backend(const std::string& name);

}  // namespace coil
