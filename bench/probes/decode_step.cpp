// GPT-2 small's greedy decoding at batch 1, eager against the compiled step: the time per token
// of each after warm-up, for profiling the compiled step's host cost
// (bench/device_decode_profile.sh runs it under a profiler). Usage:
//   decode_step [eager|compiled] [reps] [device, default cuda]
// With PROFILE=1, coil's profiler's table of the last repetition.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include <coil/coil.h>
#include <coil/nn/gpt2.h>

using namespace coil;

int main(int argc, char** argv) {
  const bool compiled = argc > 1 && std::string(argv[1]) == "compiled";
  const int reps = argc > 2 ? std::atoi(argv[2]) : 5;
  const Device device(argc > 3 ? argv[3] : "cuda");
  const int64_t prompt = 16, new_tokens = 64;
  manual_seed(0);
  auto model = nn::gpt2(nn::GPT2Config::small());
  model->to(device);
  model->eval();
  Tensor p = randint(0, 50257, {1, prompt}).to(device);
  nn::generate_greedy(*model, p, new_tokens, compiled);  // warm-up: compiles
  std::unique_ptr<Profiler> profile;
  for (int r = 0; r < reps; ++r) {
    if (r == reps - 1 && std::getenv("PROFILE")) profile = std::make_unique<Profiler>();
    auto t0 = std::chrono::steady_clock::now();
    Tensor ids = nn::generate_greedy(*model, p, new_tokens, compiled);
    ids.cpu();
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: %.2f ms for %lld tokens, %.1f us per token\n", compiled ? "compiled" : "eager",
                ms, static_cast<long long>(new_tokens), ms * 1e3 / new_tokens);
  }
  if (profile) std::printf("%s", profile->table(25).c_str());
}
