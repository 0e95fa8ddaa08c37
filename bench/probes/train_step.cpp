// One training step on the GPU, eager or compiled, with the CUDA profiler switched on around one
// step after warm-up: run under Nsight Compute with --profile-from-start off, it gives every
// kernel of a step (bench/device_train_kernels.sh). The models and sizes are those of
// coil-bench-models: GPT-2 small at 8 x 512 tokens with AdamW, ResNet-50 at 32 images of 224²
// with SGD (momentum 0.9); or coil-bench's train_mlp (Linear 1024 -> 4096, GELU, Linear back,
// LayerNorm, loss mean(y^2), Adam) at 4096 rows. Usage: train_step gpt2|resnet50|mlp eager|compiled
// [gaps|kernels] [bf16|fp16 [channels-last]]; a dtype runs the loss under autocast in it (an fp16
// step unscaled: the probe times, it does not train); "channels-last" after it runs ResNet-50 in
// that layout (as coil-bench-models' AMP rows). With "gaps" it profiles the step with coil's own
// profiler instead: the step's wall time, the work's device time by name, and the device's idle
// time summed by the work that came after it (a host-bound step waits for the host before each
// piece of work: where the host is slow).
#include <cuda_profiler_api.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <coil/coil.h>
#include <coil/cuda.h>
#include <coil/nn/gpt2.h>
#include <coil/nn/resnet.h>

#include "gaps_report.h"

using namespace coil;

int main(int argc, char** argv) {
  const std::string model_name = argc > 1 ? argv[1] : "gpt2";
  const bool compiled = argc > 2 && std::string(argv[2]) == "compiled";
  const Device cuda("cuda");
  manual_seed(0);
  std::shared_ptr<nn::Module> model;
  std::unique_ptr<optim::Optimizer> opt;
  std::function<Tensor(const Tensor&, const Tensor&)> loss_of;
  Tensor x, y;
  if (model_name == "mlp") {
    auto mlp = std::make_shared<nn::Sequential>();
    mlp->push_back(std::make_shared<nn::Linear>(1024, 4096));
    mlp->push_back(std::make_shared<nn::GELU>());
    mlp->push_back(std::make_shared<nn::Linear>(4096, 1024));
    mlp->push_back(std::make_shared<nn::LayerNorm>(1024));
    mlp->to(cuda);
    model = mlp;
    x = randn({4096, 1024}).to(cuda);
    y = x;
    opt =
        std::make_unique<optim::Adam>(mlp->parameters(), optim::AdamOptions{.compiled = compiled});
    loss_of = [mlp](const Tensor& a, const Tensor&) {
      Tensor out = mlp->forward(a);
      return mean(out * out);
    };
  } else if (model_name == "resnet50") {
    auto resnet = nn::resnet50();
    resnet->to(cuda);
    model = resnet;
    x = randn({32, 3, 224, 224}).to(cuda);
    if (argc > 5 && std::string(argv[5]) == "channels-last") {
      resnet->to(MemoryFormat::ChannelsLast);
      x = x.contiguous(MemoryFormat::ChannelsLast);
    }
    y = randint(0, 1000, {32}).to(cuda);
    opt = std::make_unique<optim::SGD>(
        resnet->parameters(), optim::SGDOptions{.lr = 0.01, .momentum = 0.9, .compiled = compiled});
    loss_of = [resnet](const Tensor& a, const Tensor& b) {
      return cross_entropy(resnet->forward(a), b);
    };
  } else {
    auto gpt2 = nn::gpt2(nn::GPT2Config::small());
    gpt2->to(cuda);
    model = gpt2;
    x = randint(0, 50257, {8, 512}).to(cuda);
    y = randint(0, 50257, {8, 512}).to(cuda);
    opt = std::make_unique<optim::AdamW>(gpt2->parameters(),
                                         optim::AdamWOptions{.lr = 1e-4, .compiled = compiled});
    loss_of = [gpt2](const Tensor& a, const Tensor& b) {
      Tensor logits = gpt2->forward(a);
      return cross_entropy(logits.reshape({-1, logits.size(-1)}), b.reshape({-1}));
    };
  }
  model->train();
  if (argc > 4) {
    const DType amp = std::string(argv[4]) == "fp16" ? kFloat16 : kBFloat16;
    loss_of = [inner = loss_of, amp](const Tensor& a, const Tensor& b) {
      autocast guard(DeviceType::CUDA, amp);
      return inner(a, b);
    };
  }
  auto compiled_loss = coil::compile(loss_of);
  auto step = [&] {
    opt->zero_grad();
    Tensor l = compiled ? compiled_loss(x, y) : loss_of(x, y);
    l.backward();
    opt->step();
    return l.item<double>();
  };
  for (int i = 0; i < 3; ++i) step();
  if (argc > 3 && std::string(argv[3]) == "gaps") {
    {  // The host's time in each part of a step (the GPU's work is queued, not waited for).
      cuda::synchronize();
      using Clock = std::chrono::steady_clock;
      std::vector<Clock::time_point> t = {Clock::now()};
      opt->zero_grad();
      t.push_back(Clock::now());
      Tensor l = compiled ? compiled_loss(x, y) : loss_of(x, y);
      t.push_back(Clock::now());
      l.backward();
      t.push_back(Clock::now());
      opt->step();
      t.push_back(Clock::now());
      l.item<double>();
      t.push_back(Clock::now());
      const char* parts[] = {"zero_grad", "forward", "backward", "optimizer step",
                             "waiting for the loss"};
      std::printf("host, a step:");
      for (size_t i = 0; i + 1 < t.size(); ++i)
        std::printf(" %s %.3f ms;", parts[i],
                    std::chrono::duration<double, std::milli>(t[i + 1] - t[i]).count());
      std::printf("\n");
    }
    report_gaps(model_name + (compiled ? " compiled" : " eager") + " step", [&] { step(); });
    return 0;
  }
  cudaProfilerStart();
  double loss = step();
  cudaProfilerStop();
  std::printf("%s %s step done, loss %.4f\n", model_name.c_str(), compiled ? "compiled" : "eager",
              loss);
}
