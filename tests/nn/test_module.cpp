// nn::Module: registration, dotted names, traversal, train/eval, to(), state_dict and
// load_state_dict with their errors, printing.
#include <coil/cuda.h>

#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

// fc1 -> relu -> fc2, plus a BatchNorm-like buffer of its own.
struct Net : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  Tensor scale;
  Net() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(4, 3));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(3, 2, /*bias=*/false));
    scale = register_buffer("scale", full({2}, 2.0));
    register_buffer("cache", zeros({5}), /*persistent=*/false);
  }
  Tensor forward(const Tensor& x) override { return fc2->forward(relu(fc1->forward(x))) * scale; }
};

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& v) {
  std::vector<std::string> out;
  for (const auto& [n, t] : v) out.push_back(n);
  return out;
}

}  // namespace

TEST(NnModule, NamedParametersUseDottedNamesInPyTorchOrder) {
  auto net = std::make_shared<Net>();
  EXPECT_EQ(names_of(net->named_parameters()),
            (std::vector<std::string>{"fc1.weight", "fc1.bias", "fc2.weight"}));
  EXPECT_EQ(names_of(net->named_parameters(/*recurse=*/false)), std::vector<std::string>{});
  EXPECT_EQ(names_of(net->named_buffers()), (std::vector<std::string>{"scale", "cache"}));
  EXPECT_EQ(net->parameters().size(), 3u);
  EXPECT_EQ(net->children().size(), 2u);
  EXPECT_EQ(net->named_children()[1].first, "fc2");
  for (const Tensor& p : net->parameters()) {
    EXPECT_TRUE(p.requires_grad());
    EXPECT_TRUE(p.is_leaf());
  }
  // The members and the registry hold the same tensors.
  EXPECT_TRUE(net->get_parameter("fc1.weight").is_same(net->fc1->weight));
  EXPECT_TRUE(net->get_buffer("scale").is_same(net->scale));
  EXPECT_EQ(net->get_submodule("fc2").get(), net->fc2.get());

  auto modules = net->named_modules();
  ASSERT_EQ(modules.size(), 3u);
  EXPECT_EQ(modules[0].first, "");
  EXPECT_EQ(modules[2].first, "fc2");

  auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(2, 2),
                                              std::make_shared<nn::ReLU>(), net);
  EXPECT_EQ(names_of(seq->named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.fc1.weight", "2.fc1.bias",
                                      "2.fc2.weight"}));
}

TEST(NnModule, SharedParametersAreListedOnceButSavedUnderEachName) {
  auto a = std::make_shared<nn::Linear>(3, 3);
  auto seq = std::make_shared<nn::Sequential>(a, std::make_shared<nn::ReLU>(), a);
  EXPECT_EQ(names_of(seq->named_parameters()), (std::vector<std::string>{"0.weight", "0.bias"}));
  EXPECT_EQ(seq->state_dict().keys(),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
}

TEST(NnModule, RegistrationErrors) {
  nn::Module m;
  m.register_parameter("w", ones({2}));
  EXPECT_COIL_ERROR(m.register_parameter("w", ones({2})), "'w' is already a parameter");
  EXPECT_COIL_ERROR(m.register_buffer("w", ones({2})), "'w' is already a parameter");
  EXPECT_COIL_ERROR(m.register_parameter("a.b", ones({2})), "must not contain '.'");
  EXPECT_COIL_ERROR(m.register_parameter("", ones({2})), "must not be empty");
  EXPECT_COIL_ERROR(m.register_parameter("i", ones({2}, kInt64)),
                    "only floating-point parameters can require grad");
  EXPECT_COIL_ERROR(m.register_module("null", std::shared_ptr<nn::Linear>()), "null module");
  Tensor w = ones({2}).requires_grad_();
  Tensor derived = w * 2;
  EXPECT_COIL_ERROR(m.register_parameter("d", derived), "not a leaf");
  // An integer tensor is fine as a buffer, or as a parameter without grad.
  m.register_buffer("count", zeros({}, kInt64));
  m.register_parameter("frozen", ones({2}, kInt64), /*requires_grad=*/false);
  EXPECT_COIL_ERROR(m.get_parameter("nope"), "has no parameter 'nope'");
  EXPECT_COIL_ERROR(m.get_submodule("x.y"), "has no submodule 'x'");
  EXPECT_COIL_ERROR(m.forward(ones({1})), "has no forward(Tensor)");
}

TEST(NnModule, AbsentParametersAreSkipped) {
  nn::Linear lin(3, 2, /*bias=*/false);
  EXPECT_FALSE(lin.bias.defined());
  EXPECT_EQ(names_of(lin.named_parameters()), std::vector<std::string>{"weight"});
  EXPECT_EQ(lin.state_dict().keys(), std::vector<std::string>{"weight"});
}

TEST(NnModule, TrainAndEvalReachEverySubmodule) {
  auto net = std::make_shared<Net>();
  EXPECT_TRUE(net->is_training());
  net->eval();
  EXPECT_FALSE(net->is_training());
  EXPECT_FALSE(net->fc1->is_training());
  net->train();
  EXPECT_TRUE(net->fc2->is_training());
  int visited = 0;
  net->apply([&](nn::Module&) { ++visited; });
  EXPECT_EQ(visited, 3);
}

TEST(NnModule, StateDictRoundTrip) {
  manual_seed(1);
  auto a = std::make_shared<Net>();
  auto b = std::make_shared<Net>();
  nn::StateDict sd = a->state_dict();
  // Persistent buffers are in; the non-persistent one is not.
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"scale", "fc1.weight", "fc1.bias", "fc2.weight"}));
  EXPECT_FALSE(sd["fc1.weight"].requires_grad());
  EXPECT_TRUE(sd["fc1.weight"].shares_storage(a->fc1->weight));
  EXPECT_FALSE(equal(a->fc1->weight, b->fc1->weight));
  Tensor b_weight = b->fc1->weight;
  nn::LoadResult r = b->load_state_dict(sd);
  EXPECT_TRUE(r.missing_keys.empty() && r.unexpected_keys.empty());
  EXPECT_TRUE(b_weight.is_same(b->fc1->weight));  // loaded in place
  EXPECT_TRUE(equal(a->fc1->weight, b->fc1->weight));
  EXPECT_TRUE(b->fc1->weight.requires_grad());
  Tensor x = randn({5, 4});
  EXPECT_TRUE(equal(a->forward(x), b->forward(x)));
  // Loading a module's own state dict back is a no-op.
  a->load_state_dict(a->state_dict());
  EXPECT_TRUE(equal(a->forward(x), b->forward(x)));
}

TEST(NnModule, LoadStateDictConvertsDtype) {
  nn::Linear a(3, 2), b(3, 2);
  nn::StateDict sd;
  for (const auto& [k, v] : a.state_dict()) sd.insert(k, v.to(kFloat64));
  b.load_state_dict(sd);
  EXPECT_EQ(b.weight.dtype(), kFloat32);
  EXPECT_TRUE(equal(a.weight, b.weight));
}

TEST(NnModule, LoadStateDictErrorsNameKeysAndShapes) {
  auto net = std::make_shared<Net>();
  nn::StateDict sd = net->state_dict();
  Tensor before = net->fc1->weight.clone();

  nn::StateDict missing = sd;
  missing.erase("fc1.bias");
  EXPECT_COIL_ERROR(net->load_state_dict(missing), "Missing key(s) in state_dict: \"fc1.bias\"");
  nn::LoadResult r = net->load_state_dict(missing, /*strict=*/false);
  EXPECT_EQ(r.missing_keys, std::vector<std::string>{"fc1.bias"});

  nn::StateDict extra = sd;
  extra.insert("fc3.weight", zeros({1}));
  EXPECT_COIL_ERROR(net->load_state_dict(extra), "Unexpected key(s) in state_dict: \"fc3.weight\"");
  r = net->load_state_dict(extra, /*strict=*/false);
  EXPECT_EQ(r.unexpected_keys, std::vector<std::string>{"fc3.weight"});

  nn::StateDict wrong;
  for (const auto& [k, v] : sd) wrong.insert(k, k == "fc1.weight" ? zeros({4, 3}) : zeros_like(v));
  EXPECT_COIL_ERROR(net->load_state_dict(wrong),
                    "size mismatch for fc1.weight: copying a tensor "
                    "of shape [4, 3] from the state dict, the shape "
                    "in the current model is [3, 4]");
  // Shape mismatches are errors even when not strict, and nothing was copied.
  EXPECT_COIL_ERROR(net->load_state_dict(wrong, /*strict=*/false), "size mismatch for fc1.weight");
  EXPECT_TRUE(equal(net->fc1->weight, before));
  EXPECT_COIL_ERROR(net->load_state_dict(missing), "error(s) in loading state_dict for Net");
}

TEST(NnModule, ToDtypeConvertsFloatingTensorsInPlace) {
  auto net = std::make_shared<Net>();
  auto bn = std::make_shared<nn::BatchNorm2d>(3);
  auto seq = std::make_shared<nn::Sequential>(net, bn);
  Tensor w = net->fc1->weight;
  Tensor w64 = w.to(kFloat64);
  seq->to(kFloat64);
  EXPECT_EQ(w.dtype(), kFloat64);  // the same handle sees the conversion
  EXPECT_TRUE(w.is_same(net->fc1->weight));
  EXPECT_TRUE(w.requires_grad());
  EXPECT_TRUE(equal(w, w64));
  EXPECT_EQ(net->scale.dtype(), kFloat64);
  EXPECT_EQ(bn->running_var.dtype(), kFloat64);
  EXPECT_EQ(bn->num_batches_tracked.dtype(), kInt64);  // integer buffers stay
  EXPECT_EQ(net->forward(randn({2, 4}, kFloat64)).dtype(), kFloat64);
  EXPECT_COIL_ERROR(seq->to(kInt32), "only floating-point dtypes");
  seq->to(kCPU);                // already there
  if (!cuda::is_available()) {  // with a GPU: tests/cuda/
    EXPECT_THROW(seq->to(kCUDA), Error);
  }
}

TEST(NnModule, ToConvertsGradients) {
  nn::Linear lin(2, 2);
  lin.weight.set_grad(ones({2, 2}));
  lin.to(kFloat64);
  EXPECT_EQ(lin.weight.grad().dtype(), kFloat64);
}

TEST(NnModule, ZeroGrad) {
  nn::Linear lin(2, 2);
  lin.weight.set_grad(ones({2, 2}));
  lin.bias.set_grad(ones({2}));
  Tensor g = lin.bias.grad();
  lin.zero_grad(/*set_to_none=*/false);
  EXPECT_TRUE(equal(g, zeros({2})));  // zeroed in place
  lin.zero_grad();
  EXPECT_FALSE(lin.weight.grad().defined());
  EXPECT_FALSE(lin.bias.grad().defined());
}

TEST(NnModule, PrintsLikePyTorch) {
  auto seq = std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(4, 8),
                                              std::make_shared<nn::ReLU>(),
                                              std::make_shared<nn::Dropout>(0.25));
  EXPECT_EQ(seq->str(),
            "Sequential(\n"
            "  (0): Linear(in_features=4, out_features=8, bias=True)\n"
            "  (1): ReLU()\n"
            "  (2): Dropout(p=0.25, inplace=False)\n"
            ")");
  auto net = std::make_shared<Net>();
  EXPECT_EQ(net->str(),
            "Net(\n"
            "  (fc1): Linear(in_features=4, out_features=3, bias=True)\n"
            "  (fc2): Linear(in_features=3, out_features=2, bias=False)\n"
            ")");
  std::ostringstream os;
  os << nn::LayerNorm(8);
  EXPECT_EQ(os.str(), "LayerNorm((8,), eps=1e-05, elementwise_affine=True)");
}

TEST(NnModule, StateDictContainer) {
  nn::StateDict d{{"a", ones({1})}, {"b", zeros({2})}};
  EXPECT_EQ(d.size(), 2u);
  EXPECT_TRUE(d.contains("b"));
  EXPECT_EQ(d.find("c"), nullptr);
  EXPECT_COIL_ERROR(d.insert("a", ones({1})), "already present");
  EXPECT_COIL_ERROR(d.at("c"), "no key 'c'; the keys are: 'a', 'b'");
  d.insert_or_assign("a", full({3}, 7.0));
  EXPECT_EQ(d["a"].numel(), 3);
  EXPECT_TRUE(d.erase("a"));
  EXPECT_FALSE(d.erase("a"));
  EXPECT_EQ(d.keys(), std::vector<std::string>{"b"});
}
