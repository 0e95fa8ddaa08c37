// Trains an MLP classifier on the handwritten-digits data set twice, in lockstep: once eagerly
// and once with its forward and backward compiled by coil::compile (a joint graph, partitioned
// and compiled), both from the same initial weights, with the same batches and Adam. Prints the
// two losses step by step, the test accuracy and the time per step.
//
// The data: scikit-learn's digits (1797 8x8 images), which Debian ships in python3-sklearn.
// `bash scripts/fetch_digits.sh` puts it at data/digits.csv without installing the package.
//
//   train_digits [--device cpu|cuda] [path/to/digits.csv]   (default: data/digits.csv, or
//                                                           $COIL_DIGITS; the CPU)
//
// Exits with 1 unless the losses agree step for step and test accuracy is above 95 %; with 77
// (a skip, for ctest) when asked for a GPU that is not there.
#include <coil/coil.h>
#include <coil/cuda.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

using namespace coil;

namespace {

struct Data {
  Tensor x, y;  // [N, 64] float32 in [0, 1]; [N] int64 labels
};

Data load_digits(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    std::fprintf(stderr,
                 "cannot read %s: run `bash scripts/fetch_digits.sh` (it extracts the data set "
                 "from Debian's python3-sklearn package) or pass the CSV's path\n",
                 path.c_str());
    std::exit(2);
  }
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  std::string line;
  while (std::getline(in, line)) {
    std::stringstream row(line);
    std::string cell;
    for (int i = 0; i < 64 && std::getline(row, cell, ','); ++i)
      pixels.push_back(std::stof(cell) / 16.0f);
    std::getline(row, cell, ',');
    labels.push_back(std::stoll(cell));
  }
  const int64_t n = static_cast<int64_t>(labels.size());
  return {tensor(pixels, Shape{n, 64}), tensor(labels)};
}

std::shared_ptr<nn::Sequential> make_model() {
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(64, 128),
                                          std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(128, 10));
}

double accuracy(nn::Module& model, const Data& d) {
  NoGradGuard no_grad;
  Tensor predicted = argmax(model.forward(d.x), 1);
  return sum(predicted == d.y).item<double>() / static_cast<double>(d.y.numel());
}

// A fixed shuffle of 0..n-1 (std::mt19937_64 is the same everywhere).
Tensor permutation(int64_t n) {
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::shuffle(idx.begin(), idx.end(), std::mt19937_64(2026));
  return tensor(idx);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("COIL_DIGITS");
  std::string path = env ? env : COIL_SOURCE_DIR "/data/digits.csv";
  Device device = kCPU;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--device" && i + 1 < argc)
      device = Device(argv[++i]);
    else
      path = argv[i];
  }
  if (device.is_cuda() && !cuda::is_available()) {
    std::printf("no GPU: skipped\n");
    return 77;
  }
  Data all = load_digits(path);
  all = {all.x.to(device), all.y.to(device)};
  const int64_t n = all.x.size(0), n_train = 1440, batch = 80, epochs = 25;
  // One fixed shuffle, then the first 1440 samples train and the rest test.
  manual_seed(2);
  Tensor order = permutation(n).to(device);
  Data train{index_select(all.x, 0, order.narrow(0, 0, n_train)),
             index_select(all.y, 0, order.narrow(0, 0, n_train))};
  Data test{index_select(all.x, 0, order.narrow(0, n_train, n - n_train)),
            index_select(all.y, 0, order.narrow(0, n_train, n - n_train))};

  auto eager_model = make_model();
  auto compiled_model = make_model();
  compiled_model->load_state_dict(eager_model->state_dict());
  eager_model->to(device);
  compiled_model->to(device);
  optim::Adam eager_opt(eager_model->parameters(), {.lr = 1e-2});
  optim::Adam compiled_opt(compiled_model->parameters(), {.lr = 1e-2, .compiled = true});
  auto loss_of = [](nn::Module& model, const Tensor& x, const Tensor& y) {
    return cross_entropy(model.forward(x), y);
  };
  auto compiled_loss =
      compile([&](const Tensor& x, const Tensor& y) { return loss_of(*compiled_model, x, y); },
              CompileOptions{.name = "digits_step"});

  std::printf("%6s %12s %12s %10s\n", "step", "eager loss", "compiled", "|diff|");
  double worst = 0, eager_s = 0, compiled_s = 0;
  int step = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (int64_t b = 0; b < n_train; b += batch, ++step) {
      Tensor x = train.x.narrow(0, b, batch), y = train.y.narrow(0, b, batch);
      auto t0 = std::chrono::steady_clock::now();
      Tensor le = loss_of(*eager_model, x, y);
      le.backward();
      eager_opt.step();
      eager_opt.zero_grad();
      if (step > 0) eager_s += seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      Tensor lc = compiled_loss(x, y);
      lc.backward();
      compiled_opt.step();
      compiled_opt.zero_grad();
      if (step > 0) compiled_s += seconds_since(t0);  // the first step compiles
      const double e = le.item<double>(), c = lc.item<double>();
      worst = std::max(worst, std::abs(e - c) / std::max(1.0, std::abs(e)));
      if (step % 18 == 0) std::printf("%6d %12.6f %12.6f %10.2e\n", step, e, c, std::abs(e - c));
    }
  }
  const double acc_e = accuracy(*eager_model, test), acc_c = accuracy(*compiled_model, test);
  std::printf("\n%d steps of %lld samples; largest relative loss difference %.2e\n", step,
              static_cast<long long>(batch), worst);
  std::printf("test accuracy: eager %.2f %%, compiled %.2f %% (%lld test images)\n", 100 * acc_e,
              100 * acc_c, static_cast<long long>(n - n_train));
  std::printf("time per step (forward + backward + Adam): eager %.1f us, compiled %.1f us\n",
              1e6 * eager_s / (step - 1), 1e6 * compiled_s / (step - 1));
  const bool ok = worst < 1e-3 && acc_e > 0.95 && acc_c > 0.95;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
