// Host memory for tensors. Large blocks are cached after they are freed and handed out again for
// the next request of the same size, as PyTorch's CUDA caching allocator does on the GPU: a
// compiled graph or a training step that runs again asks for the same sizes, and fresh memory costs
// a page fault per 4 KiB page on first touch (before this cache, page faults took a large share of
// a compiled MLP's time; measured: docs/performance.md). At most a quarter of the machine's memory
// (at least 2 GiB) stays cached. Large blocks also ask the kernel for transparent huge pages.
#pragma once

#include <cstddef>

namespace coil {

// 64-byte aligned; coil::Error when the memory is not there.
void* allocate_host(size_t nbytes);
void free_host(void* p, size_t nbytes);

}  // namespace coil
