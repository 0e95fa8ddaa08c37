// coil::Profiler: the time of each kernel and library call of compiled graphs and of each eager
// op, summed by name; work inside recorded work is not counted twice.
#include <gtest/gtest.h>

#include <coil/coil.h>
#include <coil/cuda.h>

#include <algorithm>
#include <fstream>
#include <iterator>

#include "testing.h"

using namespace coil;

namespace {

const Profiler::Row* find(const std::vector<Profiler::Row>& rows, const std::string& kind,
                          const std::string& name_prefix) {
  for (const Profiler::Row& r : rows)
    if (r.kind == kind && r.name.rfind(name_prefix, 0) == 0) return &r;
  return nullptr;
}

void profile_on(const Device& device) {
  manual_seed(3);
  Tensor a = randn({64, 32}).to(device), b = randn({32, 16}).to(device);
  auto f = compile([](const Tensor& x, const Tensor& w) { return softmax(matmul(x, w) + 1.0, 1); });
  Tensor want = f(a, b);  // compiled before recording
  Profiler p;
  for (int i = 0; i < 3; ++i) f(a, b);
  Tensor r = relu(a);
  std::vector<Profiler::Row> rows = p.rows();
  const Profiler::Row* product = find(rows, "library", "mm");
  ASSERT_NE(product, nullptr);
  EXPECT_EQ(product->calls, 3);
  EXPECT_EQ(product->device, device.str());
  const Profiler::Row* kernel = find(rows, "kernel", "");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->calls, 3);
  EXPECT_NE(kernel->name.find("exp"), std::string::npos) << kernel->name;  // the softmax
  EXPECT_GT(kernel->total_ms, 0.0);
  const Profiler::Row* eager = find(rows, "eager", "relu");
  ASSERT_NE(eager, nullptr);
  EXPECT_EQ(eager->calls, 1);
  // The library call's eager product is inside the recorded call, not a row of its own; the
  // rows come largest first.
  EXPECT_EQ(find(rows, "eager", "mm"), nullptr);
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end(),
                             [](const auto& x, const auto& y) { return x.total_ms > y.total_ms; }));
  // Recording stopped with rows(): later work is not in them.
  relu(a);
  EXPECT_EQ(find(p.rows(), "eager", "relu")->calls, 1);
  EXPECT_NE(p.table().find("total"), std::string::npos);
}

}  // namespace

// The timeline: each record in the order it was queued, its spans in order on its device's
// clock and not overlapping (one stream); the Chrome trace holds one event per span.
void timeline_on(const Device& device) {
  Tensor a = randn({64, 32}).to(device), b = randn({32, 16}).to(device);
  auto f = compile([](const Tensor& x, const Tensor& w) { return softmax(matmul(x, w) + 1.0, 1); });
  f(a, b);
  Profiler p;
  f(a, b);
  relu(a);
  const std::vector<Profiler::Span> spans = p.timeline();
  ASSERT_EQ(spans.size(), 3u);
  EXPECT_EQ(spans[0].kind, "library");
  EXPECT_EQ(spans[1].kind, "kernel");
  EXPECT_EQ(spans[2].kind, "eager");
  EXPECT_EQ(spans[2].name, "relu");
  // A GPU's clock starts at its first record; the host's at the profiler's start.
  if (device.is_cuda()) {
    EXPECT_EQ(spans[0].start_ms, 0.0);
  } else {
    EXPECT_GE(spans[0].start_ms, 0.0);
  }
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(spans[i].device, device.str());
    EXPECT_GE(spans[i].end_ms, spans[i].start_ms);
    if (i > 0) {
      EXPECT_GE(spans[i].start_ms, spans[i - 1].end_ms) << spans[i].name;
    }
  }
  const std::string path = ::testing::TempDir() + "coil_trace_" + device.str() + ".json";
  p.export_chrome_trace(path);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("{\"traceEvents\": [", 0), 0u) << text;
  size_t events = 0;
  for (size_t at = text.find("\"ph\": \"X\""); at != std::string::npos;
       at = text.find("\"ph\": \"X\"", at + 1))
    ++events;
  EXPECT_EQ(events, 3u) << text;
  EXPECT_NE(text.find("\"name\": \"relu\""), std::string::npos) << text;
  EXPECT_COIL_ERROR(p.export_chrome_trace("/nonexistent/dir/trace.json"), "cannot write");
}

TEST(Profiler, SumsKernelsLibraryCallsAndEagerOps) { profile_on(kCPU); }

TEST(Profiler, TimelineInQueueOrderAndAsAChromeTrace) { timeline_on(kCPU); }

TEST(Profiler, TimelineInQueueOrderAndAsAChromeTraceOnCuda) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  timeline_on(kCUDA);
}

TEST(Profiler, SumsKernelsLibraryCallsAndEagerOpsOnCuda) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU";
  profile_on(kCUDA);
}

TEST(Profiler, OneRecordsAtATime) {
  Tensor x = ones({4});
  Profiler p;
  EXPECT_COIL_ERROR(Profiler(), "another profiler is recording");
  p.rows();
  Profiler q;  // the first stopped recording
  relu(x);
  EXPECT_EQ(q.rows().size(), 1u);
}
