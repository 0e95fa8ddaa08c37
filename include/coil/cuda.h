// The GPU: whether there is one, and coil's use of its memory (as torch.cuda). Tensors move
// there with .to(coil::kCUDA) / .cuda() and back with .cpu(); coil's work on a device is queued
// on a stream of its own, so the host waits only where it reads results (.cpu(), .item(),
// printing) or calls synchronize().
#pragma once

#include <cstdint>
#include <string>

namespace coil::cuda {

// coil was built with CUDA (a CUDA toolkit was found when it was configured).
bool is_built();
// coil was built with CUDA, and a driver and a device are present.
bool is_available();
int device_count();
// "NVIDIA H100 80GB HBM3"
std::string device_name(int device = 0);
// Waits for all of coil's work on every device.
void synchronize();

// The caching allocator (as torch.cuda.memory_allocated and friends), in bytes: memory held by
// live tensors, the most it held since the start or the last reset, and all the memory coil has
// taken from the device (live and cached).
int64_t memory_allocated(int device = 0);
int64_t max_memory_allocated(int device = 0);
int64_t memory_reserved(int device = 0);
void reset_peak_memory_stats(int device = 0);
// Gives cached, unused memory back to the device (other programs can use it).
void empty_cache();

}  // namespace coil::cuda
