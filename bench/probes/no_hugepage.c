// LD_PRELOAD shim: madvise(MADV_HUGEPAGE) does nothing, every other advice goes through. For
// measuring what coil's allocator's huge-page advice does to a first call, where first-touch
// page faults (and, with defrag=madvise, the kernel's compaction for 2 MiB pages) land.
//   gcc -O2 -shared -fPIC bench/probes/no_hugepage.c -o /tmp/no_hugepage.so -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <sys/mman.h>

int madvise(void* addr, size_t length, int advice) {
  static int (*real)(void*, size_t, int);
  if (advice == MADV_HUGEPAGE) return 0;
  if (!real) real = (int (*)(void*, size_t, int))dlsym(RTLD_NEXT, "madvise");
  return real(addr, length, advice);
}
