// One GPT-2 small training step (8 x 512 tokens, AdamW) on the GPU, eager or compiled, with
// the CUDA profiler switched on around one step after warm-up: run under Nsight Compute with
// --profile-from-start off, it gives every kernel of a step
// (bench/device_train_kernels.sh). Usage: gpt2_train_step eager|compiled
#include <cuda_profiler_api.h>

#include <cstdio>
#include <string>

#include <coil/coil.h>
#include <coil/nn/gpt2.h>

using namespace coil;

int main(int argc, char** argv) {
  const bool compiled = argc > 1 && std::string(argv[1]) == "compiled";
  manual_seed(0);
  auto model = nn::gpt2(nn::GPT2Config::small());
  model->to(Device("cuda"));
  model->train();
  Tensor ids = randint(0, 50257, {8, 512}).to(Device("cuda"));
  Tensor labels = randint(0, 50257, {8, 512}).to(Device("cuda"));
  optim::AdamW opt(model->parameters(), {.lr = 1e-4, .compiled = compiled});
  auto loss_of = [&](const Tensor& a, const Tensor& b) {
    Tensor logits = model->forward(a);
    return cross_entropy(logits.reshape({-1, logits.size(-1)}), b.reshape({-1}));
  };
  auto compiled_loss = coil::compile(loss_of);
  auto step = [&] {
    opt.zero_grad();
    Tensor l = compiled ? compiled_loss(ids, labels) : loss_of(ids, labels);
    l.backward();
    opt.step();
    return l.item<double>();
  };
  for (int i = 0; i < 3; ++i) step();
  cudaProfilerStart();
  double loss = step();
  cudaProfilerStop();
  std::printf("%s step done, loss %.4f\n", compiled ? "compiled" : "eager", loss);
}
