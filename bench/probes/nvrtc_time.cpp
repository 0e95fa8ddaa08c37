// How long NVRTC takes to compile a CUDA source with coil's options (docs/cuda.md), and how that
// splits between NVVM (the source to PTX) and ptxas (PTX to the cubin): each three times, the
// first including NVRTC's own start-up. No GPU needed. Extra arguments are more NVRTC options.
//   g++ -O2 -I/usr/local/cuda/include bench/probes/nvrtc_time.cpp -L/usr/local/cuda/lib64 \
//     -lnvrtc -Wl,-rpath,/usr/local/cuda/lib64 -o /tmp/nvrtc_time
//   cat bench/probes/coil_cuda_prelude.cuh bench/probes/attention_tiles/tiles.cu > /tmp/a.cu
//   /tmp/nvrtc_time /tmp/a.cu
#include <nvrtc.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: nvrtc_time SOURCE [NVRTC options]\n");
    return 2;
  }
  std::stringstream text;
  text << std::ifstream(argv[1]).rdbuf();
  const std::string src = text.str();
  for (const char* arch : {"--gpu-architecture=compute_90", "--gpu-architecture=sm_90"}) {
    std::vector<const char*> opts = {arch, "--std=c++17", "-default-device", "--fmad=false",
                                     "-lineinfo"};
    for (int i = 2; i < argc; ++i) opts.push_back(argv[i]);
    for (int rep = 0; rep < 3; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      nvrtcProgram p;
      nvrtcCreateProgram(&p, src.c_str(), "source.cu", 0, nullptr, nullptr);
      const nvrtcResult r = nvrtcCompileProgram(p, static_cast<int>(opts.size()), opts.data());
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (r != NVRTC_SUCCESS) {
        size_t n = 0;
        nvrtcGetProgramLogSize(p, &n);
        std::string log(n, '\0');
        nvrtcGetProgramLog(p, log.data());
        std::printf("%s\n", log.c_str());
        return 1;
      }
      std::printf("%-30s %7.1f ms\n",
                  arch[19] == 'c' ? "to PTX (NVVM)" : "to a cubin (NVVM + ptxas)", ms);
      nvrtcDestroyProgram(&p);
    }
  }
  return 0;
}
