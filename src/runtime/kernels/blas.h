// OpenBLAS, loaded on first use rather than linked. OpenBLAS picks its kernels from the CPU model
// when it is loaded, and on processors it does not know it can pick badly: on an AVX-512 CPU that
// reports only a generic model name, OpenBLAS 0.3.21 chose its Cooperlake kernels, whose sgemm ran
// several times slower than with its SkylakeX kernels (measured: docs/performance.md). Loading it
// ourselves lets coil ask for the SkylakeX kernels on AVX-512 machines before OpenBLAS reads
// OPENBLAS_CORETYPE; a user who sets OPENBLAS_CORETYPE keeps their choice.
#pragma once

#include <cblas.h>

namespace coil {

struct Blas {
  decltype(&cblas_sgemm) sgemm;
  decltype(&cblas_dgemm) dgemm;
  decltype(&cblas_sgemv) sgemv;
  decltype(&cblas_dgemv) dgemv;
  const char* core;  // the kernel family OpenBLAS chose ("SkylakeX")
};

// The loaded library; coil::Error if it cannot be loaded.
const Blas& blas();

}  // namespace coil
