// coil's fused attention kernel as generated for float32 (attention_tiles/tiles.cu: 64 query
// rows a block, 4 x 8 register tiles, two cp.async stages) against the one before it
// (rows.cu: a thread a query row), both after coil's CUDA prelude (../coil_cuda_prelude.cuh):
// compiled with NVRTC with coil's options, checked against each other, and timed in device time
// (CUDA events behind an L2-emptying write, as coil-bench). The files are coil's output for heads
// of 64; other head sizes and the variants (tile shapes, register caps, loads a float at a time)
// replace their #define lines, as attention_kernel_source would write them. (The tiles'
// one-buffer first version, docs/performance.md's third column, is in a771bcf's probe.)
//
//   nvcc -O2 bench/probes/attention_tiles.cpp -o /tmp/at -lnvrtc -lcuda
//   /tmp/at bench/probes/attention_tiles
#include <cuda.h>
#include <nvrtc.h>

#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "cuda_timer.cuh"

#define CU(x)                         \
  do {                                \
    CUresult r = (x);                 \
    if (r != CUDA_SUCCESS) {          \
      const char* m;                  \
      cuGetErrorString(r, &m);        \
      std::printf("%s: %s\n", #x, m); \
      std::exit(1);                   \
    }                                 \
  } while (0)

static std::string read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  if (s.str().empty()) std::printf("no %s\n", path.c_str()), std::exit(1);
  return s.str();
}

// `defines` replaces the source's "#define NAME value" lines ("BQ 128,MINB 1").
static CUfunction compile(std::string src, const std::string& defines) {
  std::stringstream list(defines);
  for (std::string d; std::getline(list, d, ',');) {
    const std::string name = "#define " + d.substr(0, d.find(' ')) + " ";
    const size_t at = src.find(name);
    if (at == std::string::npos) std::printf("no %s\n", name.c_str()), std::exit(1);
    src.replace(at, src.find('\n', at) - at, "#define " + d);
  }
  nvrtcProgram p;
  nvrtcCreateProgram(&p, src.c_str(), "k.cu", 0, nullptr, nullptr);
  const char* opts[] = {"--gpu-architecture=sm_90", "--std=c++17", "-default-device",
                        "--fmad=false"};
  if (nvrtcCompileProgram(p, 4, opts) != NVRTC_SUCCESS) {
    size_t n;
    nvrtcGetProgramLogSize(p, &n);
    std::string log(n, 0);
    nvrtcGetProgramLog(p, log.data());
    std::printf("%s\n", log.c_str());
    std::exit(1);
  }
  size_t n;
  nvrtcGetCUBINSize(p, &n);
  std::string cubin(n, 0);
  nvrtcGetCUBIN(p, cubin.data());
  CUmodule m;
  CU(cuModuleLoadData(&m, cubin.data()));
  CUfunction f;
  CU(cuModuleGetFunction(&f, m, "coil_attention"));
  return f;
}

struct Case {
  long b, h, L, S, e, ev;
  int causal;
};

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : "bench/probes/attention_tiles";
  const std::string prelude = read(dir + "/../coil_cuda_prelude.cuh");
  CHECK(cudaFree(0));
  Timer timer;
  Case cases[] = {{8, 12, 1024, 1024, 64, 64, 0}, {8, 12, 1024, 1024, 64, 64, 1},
                  {1, 12, 512, 512, 64, 64, 1},   {2, 3, 1000, 777, 40, 72, 0},
                  {2, 3, 333, 333, 40, 72, 1},    {4, 8, 1024, 1024, 128, 128, 0},
                  {2, 2, 300, 300, 128, 128, 1}};
  for (const Case& c : cases) {
    const long nq = c.b * c.h * c.L * c.e, nk = c.b * c.h * c.S * c.e, nv = c.b * c.h * c.S * c.ev,
               no = c.b * c.h * c.L * c.ev;
    std::vector<float> hq(nq), hk(nk), hv(nv);
    std::mt19937 g(1);
    std::normal_distribution<float> d;
    for (auto& x : hq) x = d(g);
    for (auto& x : hk) x = d(g);
    for (auto& x : hv) x = d(g);
    float *q, *k, *v, *o[2];
    CHECK(cudaMalloc(&q, nq * 4));
    CHECK(cudaMalloc(&k, nk * 4));
    CHECK(cudaMalloc(&v, nv * 4));
    for (auto& p : o) CHECK(cudaMalloc(&p, no * 4));
    CHECK(cudaMemcpy(q, hq.data(), nq * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(k, hk.data(), nk * 4, cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(v, hv.data(), nv * 4, cudaMemcpyHostToDevice));
    struct Variant {
      const char* name;
      const char* file;
      std::string defines;  // beyond the head sizes'
      int fast;
      long rows, keys;  // keys: 0 for rows.cu
    };
    // The head sizes as each kernel pads them (flash_attention.cpp's plan).
    const long ep = (c.e + 3) / 4 * 4, bk = ep <= 64 ? 64 : 32;
    const std::string heads = "E " + std::to_string(c.e) + ",EP " + std::to_string(ep) + ",EV " +
                              std::to_string(c.ev) + ",EVP ";
    const std::string row_heads = heads + std::to_string((c.ev + 3) / 4 * 4);
    const std::string tile_heads = heads + std::to_string((c.ev + 31) / 32 * 32);
    const std::string bk_default = ",BK " + std::to_string(bk);
    std::vector<Variant> variants = {
        {"a thread a row (before)", "rows.cu", row_heads, 0, 128, 0},
        {"tiles, cp.async", "tiles.cu", tile_heads + bk_default, 1, 64, bk},
        {"tiles, float loads", "tiles.cu", tile_heads + bk_default, 0, 64, bk},
        {"tiles, 128 registers", "tiles.cu", tile_heads + bk_default + ",MINB 4", 1, 64, bk},
        {"tiles BQ128 BK32", "tiles.cu", tile_heads + ",BQ 128,BK 32,MINB 2", 1, 128, 32},
        {"tiles BQ128 BK32 r255", "tiles.cu", tile_heads + ",BQ 128,BK 32,MINB 1", 1, 128, 32},
        {"tiles BK32", "tiles.cu", tile_heads + ",BK 32", 1, 64, 32}};
    const double flop = 4.0 * c.b * c.h * c.L * c.S * c.e / (c.causal ? 2 : 1);
    std::printf("b %ld h %ld L %ld S %ld e %ld ev %ld%s:\n", c.b, c.h, c.L, c.S, c.e, c.ev,
                c.causal ? " causal" : "");
    std::vector<float> ref(no), got(no);
    for (size_t i = 0; i < variants.size(); ++i) {
      const Variant& w = variants[i];
      CUfunction f = compile(prelude + read(dir + "/" + w.file), w.defines);
      long L = c.L, S = c.S, inner = c.h, rb = (c.L + w.rows - 1) / w.rows;
      long qs1 = c.L * c.e, qs0 = c.h * qs1, qrow = c.e, ks1 = c.S * c.e, ks0 = c.h * ks1,
           krow = c.e, vs1 = c.S * c.ev, vs0 = c.h * vs1, vrow = c.ev;
      float scale = 1.4426950408889634f / std::sqrt(float(c.e));
      int causal = c.causal, fast = w.fast;
      void* args[] = {&q,    &k,   &v,   &o[i ? 1 : 0], &L,   &S,   &inner, &rb,    &qs0,    &qs1,
                      &qrow, &ks0, &ks1, &krow,         &vs0, &vs1, &vrow,  &scale, &causal, &fast};
      unsigned shared = 0, threads = 128;
      if (w.keys) {  // the query tile and two stages of keys (or weights) and values
        const long evp = (c.ev + 31) / 32 * 32, bq = w.rows;
        shared = unsigned(4 * (bq * (ep + 4) + 2 * (std::max(w.keys * (ep + 4), bq * (w.keys + 4)) +
                                                    w.keys * evp)));
        threads = unsigned(2 * bq);
      }
      if (shared > 48 * 1024)
        CU(cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared));
      auto run = [&] {
        CU(cuLaunchKernel(f, unsigned(c.b * c.h * rb), 1, 1, threads, 1, 1, shared, nullptr, args,
                          nullptr));
      };
      const double ms = timer.median_ms(run, 30);
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy((i ? got : ref).data(), o[i ? 1 : 0], no * 4, cudaMemcpyDeviceToHost));
      double worst = 0;
      if (i)
        for (long j = 0; j < no; ++j) {
          const double d = std::fabs(got[j] - ref[j]);
          if (!(d <= worst)) worst = d;  // (a NaN too)
        }
      if (i) CHECK(cudaMemset(o[1], 0xff, no * 4));  // NaNs: a variant that writes nothing fails
      int regs;
      cuFuncGetAttribute(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, f);
      std::printf("  %-22s %8.4f ms  %6.1f TFLOP/s  %3d registers  max |diff| %.2e\n", w.name, ms,
                  flop / ms / 1e9, regs, worst);
    }
    cudaFree(q), cudaFree(k), cudaFree(v);
    for (auto& p : o) cudaFree(p);
  }
}
