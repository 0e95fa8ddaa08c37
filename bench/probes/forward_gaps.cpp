// One inference forward on the GPU, eager or compiled, profiled with coil's profiler after
// warm-up (gaps_report.h): the models and sizes of coil-bench-models' inference rows, GPT-2 small
// at 8 x 512 tokens, ResNet-50 at 64 channels-last images of 224², in eval mode without
// gradients, under autocast where a dtype is given. PyTorch's side: torch_forward_kernels.py.
// "graphs" compiles with mode reduce-overhead: its replays are the work alone, without the host's
// time between launches, so its call time next to the others' says how host-bound they are.
// Usage: forward_gaps gpt2|resnet50 eager|compiled|graphs [bf16|fp16]
#include <cstdio>
#include <functional>
#include <string>

#include <coil/coil.h>
#include <coil/nn/gpt2.h>
#include <coil/nn/resnet.h>

#include "device_timing.h"
#include "gaps_report.h"

using namespace coil;

int main(int argc, char** argv) {
  const std::string model_name = argc > 1 ? argv[1] : "gpt2";
  const std::string mode = argc > 2 ? argv[2] : "eager";
  const bool compiled = mode != "eager";
  const Device cuda("cuda");
  manual_seed(0);
  std::shared_ptr<nn::Module> model;
  Tensor x;
  if (model_name == "resnet50") {
    model = nn::resnet50();
    model->to(cuda);
    model->to(MemoryFormat::ChannelsLast);
    x = randn({64, 3, 224, 224}).to(cuda).contiguous(MemoryFormat::ChannelsLast);
  } else {
    model = nn::gpt2(nn::GPT2Config::small());
    model->to(cuda);
    x = randint(0, 50257, {8, 512}).to(cuda);
  }
  model->eval();
  NoGradGuard no_grad;
  std::function<Tensor(const Tensor&)> forward = [model](const Tensor& a) {
    return model->forward(a);
  };
  if (argc > 3) {
    const DType amp = std::string(argv[3]) == "fp16" ? kFloat16 : kBFloat16;
    forward = [inner = forward, amp](const Tensor& a) {
      autocast guard(DeviceType::CUDA, amp);
      return inner(a);
    };
  }
  CompileOptions options;
  if (mode == "graphs") options.mode = "reduce-overhead";
  auto compiled_forward = coil::compile(forward, options);
  auto call = [&] {
    Tensor y = compiled ? compiled_forward(x) : forward(x);
    cuda::synchronize();
  };
  for (int i = 0; i < 3; ++i) call();
  report_gaps(model_name + " " + mode + " forward", call);
  std::printf("%s %s forward: %.3f ms a call (CUDA events around it, median of 10)\n",
              model_name.c_str(), mode.c_str(), median_device_ms(call));
}
