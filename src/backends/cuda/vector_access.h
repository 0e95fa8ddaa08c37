// The vector accesses of a CUDA kernel: where consecutive elements for consecutive values of a
// loop variable (a pointwise kernel's flat index, a row's r) are read or written several at a
// time as one access of a `coil_vec` (16 bytes for float32's four, or for 16-bit floats' eight
// in a pointwise kernel), and which of a row kernel's are read by several passes (kept in
// registers).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "schedule/kernel.h"
#include "sym/expr.h"

namespace coil::cuda {

// Elements per access (and per thread of a vectorised kernel).
inline constexpr int64_t kVector = 4;
// ... in a pointwise kernel whose narrowest access is of 16-bit values: 16 bytes of those.
inline constexpr int64_t kWideVector = 8;

// Where `index` reads `i + offset` with the offset free of i (consecutive elements for
// consecutive i: a vector access), the offset; nullopt otherwise, or when a constant offset
// could never be aligned to a vector of `width` elements. With `across_runs`, an offset that
// moves with i only between aligned runs of `width` values (a padded operand's clamped rows,
// min(i // C, R - 1) * C - (i // C) * C with C a multiple of the width) is one too, taken at the
// run's first element: written in coil_base, which a vectorised pointwise thread defines.
std::optional<sym::Expr> unit_offset(sym::Expr index, sym::Expr i, int64_t width = kVector,
                                     bool across_runs = false);

// One vector access: `buffer[i + offset]` for `width` consecutive i.
struct VectorAccess {
  std::string buffer;
  sym::Expr offset;
  DType dtype;
  bool store;
  std::string name;  // the register array holding the kVector values
  // A row kernel's input that several passes read: the registers holding the thread's runs of
  // it (indexed by coil_k), read once before the first pass; empty for the others.
  std::string cache;
  bool stream = false;  // read with the streaming hint (coil_ld_stream)
  int64_t width = kVector;

  std::string at() const;                        // the address of element i = 0
  std::string type() const;                      // coil_vec<T, width>
  std::string load(const std::string& i) const;  // the vector read from element i on
  std::string aligned() const;                   // whether that address suits a vector access
  bool same_element(const VectorAccess& o) const {
    return buffer == o.buffer && offset == o.offset;
  }
};

// The vector accesses along `var` of `nodes` (a pointwise kernel's, bound to its flat index; a
// pass over a row), `width` elements each: every store outside a reduction (all must be
// consecutive along var: none otherwise) and the loads that are, of buffers the kernel does not
// compute (`computed`); offsets `across_runs` as unit_offset takes them.
std::vector<VectorAccess> vector_accesses(const std::vector<const schedule::KernelNode*>& nodes,
                                          sym::Expr var,
                                          const std::function<bool(const std::string&)>& computed,
                                          int64_t width = kVector, bool across_runs = false);

// A pointwise kernel's: kWideVector elements each where the narrowest access is of 16-bit
// values and every access of kVector's can be that wide (its 16-bit accesses then 16 bytes, as
// float32's), else kVector.
std::vector<VectorAccess> pointwise_vector_accesses(
    const std::vector<const schedule::KernelNode*>& nodes, sym::Expr var,
    const std::function<bool(const std::string&)>& computed);

// The loads that two or more of a row kernel's passes read (the same buffer at the same
// offset), each named by the registers (`cache`) that hold the thread's `vectors` runs of it,
// while they hold at most 256 bytes a thread.
std::vector<VectorAccess> cache_rows(const std::vector<std::vector<VectorAccess>>& passes,
                                     int64_t vectors);

// Whether `index` reads one element for each aligned run of `width` values of `var` (a
// channel's parameter by flat index, (i // HW) % C): "" where that holds at every size, the
// run-time check under which it holds where a symbolic size must be a multiple of the width
// ("s3 % 4 == 0", for HW = s2 * s3), nullopt otherwise.
std::optional<std::string> run_uniform(sym::Expr index, sym::Expr var, int64_t width = kVector);

// The passes' alignment checks, joined by && in the order of first use (kernels alike print
// alike, whatever their buffers' names); "true" for none.
std::string aligned(const std::vector<std::vector<VectorAccess>>& passes);

}  // namespace coil::cuda
