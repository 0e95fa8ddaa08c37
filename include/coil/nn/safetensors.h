// The safetensors format (https://github.com/huggingface/safetensors), so weights move between
// PyTorch and coil:
//   8 bytes    N, the header's length (unsigned, little-endian)
//   N bytes    a JSON object: {"name": {"dtype": "F32", "shape": [2, 3],
//              "data_offsets": [begin, end]}, ..., "__metadata__": {"key": "value"}}
//   the rest   the tensors' bytes, little-endian and row-major; offsets count from here.
// dtypes: F64 F32 F16 BF16 I64 I32 I8 U8 BOOL (I16 and the others have no coil dtype).
#pragma once

#include <map>
#include <string>

#include <coil/nn/state_dict.h>

namespace coil::nn {

// Writes `tensors` in their order (non-contiguous tensors are written contiguous) with optional
// string metadata. The file is written beside `path` and renamed into place, so a failure
// leaves no half-written file.
void save_safetensors(const std::string& path, const StateDict& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// Reads every tensor, in the header's order, into new contiguous CPU tensors. A malformed file
// (bad length, bad JSON, an unknown dtype, offsets out of range, overlapping or leaving gaps, a
// size that does not match the shape) is a coil::Error naming the file and the tensor.
StateDict load_safetensors(const std::string& path);

// The "__metadata__" strings of a safetensors file (empty when it has none).
std::map<std::string, std::string> load_safetensors_metadata(const std::string& path);

}  // namespace coil::nn
