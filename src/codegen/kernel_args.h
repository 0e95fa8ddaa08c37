// What a scheduled kernel takes and may share, whatever the backend prints: the buffers it
// stores and reads, in the order its function takes them, and the buffers whose memory a result
// may take over (Inductor's in-place buffers).
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/program.h"
#include "schedule/kernel.h"

namespace coil::codegen {

// Buffers the kernel stores to, and those it reads from memory or writes, in first-use order.
std::set<std::string> written(const schedule::Kernel& k);
std::vector<std::string> arguments(const schedule::Kernel& k);

// A buffer whose memory is the compiled graph's own and holds exactly its elements.
bool owned_dense(const ir::Buffer& b);

// The size symbols the kernel's code reads (loop bounds, indices, index values, the bounds of
// its checks), in number order: what a dynamic graph's kernel takes besides its buffers.
std::vector<sym::Expr> kernel_symbols(const schedule::Kernel& k);

// Stored buffers that may take over the memory of a buffer the kernel reads: every read of it
// is at the element the stored node writes, and none comes after that node (later nodes would
// see the new values). In a row kernel the node is one of the inner loops' stores: the row's
// earlier passes, which read the same elements, are done before its pass starts, and each row
// is one thread's, or one block's (softmax writes over its input, so no fresh buffer is fetched
// to be overwritten). Not where a Welford variance of the same pass reads it. `pass_of`: each
// node's pass over the row (row kernels).
std::vector<std::pair<std::string, std::string>> inplace_pairs(
    const schedule::Kernel& k, const ir::Program& p,
    const std::map<const schedule::KernelNode*, size_t>& pass_of);
// A combo kernel's: each part's, where no other part reads the buffer (the parts run side by
// side).
std::vector<std::pair<std::string, std::string>> combo_inplace_pairs(const schedule::Kernel& k,
                                                                     const ir::Program& p);

}  // namespace coil::codegen
