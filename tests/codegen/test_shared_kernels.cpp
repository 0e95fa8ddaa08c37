// Kernels whose code is the same but for their names and their buffers' (a model's layers) are
// compiled once: the module holds the first, and the later ones run it with their own
// arguments.
#include <coil/coil.h>

#include "codegen/shared_kernels.h"
#include "testing.h"
#include "testing_stages.h"

namespace coil::testing {
namespace {

TEST(SharedKernels, PositionalCodeNamesArgumentsByPosition) {
  codegen::KernelSource k;
  k.name = "kernel7";
  k.args = {"buf3", "in1"};
  k.code =
      "void kernel7(float* buf3, const float* in1) { float acc_buf9 = in1[0]; buf3[0] = acc_buf9 "
      "+ acc_buf3 + coil_min2 + 2.5e-3f; }";
  EXPECT_EQ(codegen::positional_code(k),
            "void @kernel(float* @0, const float* @1) { float acc_@r0 = @1[0]; @0[0] = acc_@r0 "
            "+ acc_@0 + coil_min2 + 2.5e-3f; }");
}

// Two layers of sin(h) * 2 between products make the same kernel twice; a third with another
// constant does not share it. The compiled function matches eager.
TEST(SharedKernels, IdenticalLayersShareOneFunction) {
  const char* text = R"(def forward(self, x: "f32[16, 16][16, 1]cpu", w: "f32[16, 16][16, 1]cpu"):
    mm: "f32[16, 16][16, 1]cpu" = coil.mm(x, w)
    sin: "f32[16, 16][16, 1]cpu" = coil.sin(mm)
    mul: "f32[16, 16][16, 1]cpu" = coil.mul(sin, 2.0)
    mm_1: "f32[16, 16][16, 1]cpu" = coil.mm(mul, w)
    sin_1: "f32[16, 16][16, 1]cpu" = coil.sin(mm_1)
    mul_1: "f32[16, 16][16, 1]cpu" = coil.mul(sin_1, 2.0)
    mm_2: "f32[16, 16][16, 1]cpu" = coil.mm(mul_1, w)
    sin_2: "f32[16, 16][16, 1]cpu" = coil.sin(mm_2)
    mul_2: "f32[16, 16][16, 1]cpu" = coil.mul(sin_2, 3.0)
    return (mul_2,)
)";
  Graph g = parse_graph(text);
  testing_stages::Compiled c = testing_stages::lowered_and_scheduled(g);
  debug::CompileTrace trace("t", "t", CompileOptions{}, {});
  const backends::DeviceBackend& cpu = backends::backend_for(kCPU);
  std::vector<codegen::KernelSource> ks = stages::codegen(g, c.program, c.schedule, cpu, trace);
  ASSERT_EQ(ks.size(), 3u);
  EXPECT_EQ(ks[0].function, ks[0].name);
  EXPECT_EQ(ks[1].function, ks[0].name);
  EXPECT_EQ(ks[2].function, ks[2].name);
  const std::string source = cpu.module_source(ks);
  EXPECT_NE(source.find("void " + ks[0].name + "("), std::string::npos) << source;
  EXPECT_EQ(source.find("void " + ks[1].name + "("), std::string::npos) << source;

  auto f = [](const Tensor& x, const Tensor& w) {
    Tensor h = coil::mm(x, w);
    h = coil::mm(h.sin() * 2.0, w);
    h = coil::mm(h.sin() * 2.0, w);
    return h.sin() * 3.0;
  };
  Tensor x = random({16, 16}), w = random({16, 16});
  compiler_reset();
  Tensor got = compile(f)(x, w);
  EXPECT_TRUE(allclose(got, f(x, w), 1e-4, 1e-4));
  EXPECT_EQ(counters()["generated_kernels"], 3);
}

}  // namespace
}  // namespace coil::testing
