// In-place updates through views while capturing: functionalised into new values of the
// base (src/capture/view_replay.h), with every other view of the base seeing the write, as
// eager's shared memory does. Each case runs eagerly and compiled on copies of the same
// inputs and compares the results and the inputs' final values.
#include "graph/view_replay.h"
#include "testing.h"

using namespace coil;
using namespace coil::testing;

namespace {

using Fn = std::function<Tensor(const Tensor&, const Tensor&)>;

// Runs `fn` eagerly and compiled with `backend` (twice: the capture, then the cached graph)
// on copies of x and y; results and the updated inputs must agree.
void expect_like_eager(const Fn& fn, const Tensor& x, const Tensor& y,
                       const std::string& backend = "eager") {
  Tensor ex = x.clone(), ey = y.clone();
  Tensor expected = fn(ex, ey);
  auto cf = compile(fn, {.backend = backend});
  for (int call = 0; call < 2; ++call) {
    SCOPED_TRACE("call " + std::to_string(call));
    Tensor cx = x.clone(), cy = y.clone();
    Tensor got = cf(cx, cy);
    expect_close(got, values(expected), expected.sizes());
    expect_close(cx, values(ex), ex.sizes());
    expect_close(cy, values(ey), ey.sizes());
  }
}

class ViewMutationTest : public ::testing::Test {
 protected:
  void SetUp() override { compiler_reset(); }
  Tensor x = random({4, 6}), y = random({4, 6});
};

}  // namespace

TEST_F(ViewMutationTest, SliceOfAnInput) {
  expect_like_eager(
      [](const Tensor& a, const Tensor&) {
        a.slice(1, 1, 3).add_(1);
        return a * 2;
      },
      x, y);
}

TEST_F(ViewMutationTest, SliceWithAStepAndNegativeBounds) {
  expect_like_eager(
      [](const Tensor& a, const Tensor& b) {
        a.slice(1, -5, std::nullopt, 2).mul_(b.slice(1, 0, 3));
        return sum(a, {1});
      },
      x, y);
}

TEST_F(ViewMutationTest, SelectNarrowAndChunks) {
  expect_like_eager(
      [](const Tensor& a, const Tensor& b) {
        a.select(0, -1).fill_(7);
        b.narrow(1, 2, 3).zero_();
        chunk(a, 3, 1)[1].sub_(b.slice(1, 0, 2));
        return a + b;
      },
      x, y);
}

TEST_F(ViewMutationTest, ViewsOfViewsThroughTransposeAndReshape) {
  expect_like_eager(
      [](const Tensor& a, const Tensor& b) {
        a.t().select(0, 2).add_(b.select(1, 0));  // column 2 of a
        a.reshape({2, 12}).slice(1, 0, 12, 5).mul_(-1);
        a.permute({1, 0}).unsqueeze(0).squeeze(0).slice(0, 4, 6).add_(100);
        return a;
      },
      x, y);
}

// Views read after a write into their base, or into another view of it, see the write.
TEST_F(ViewMutationTest, EveryViewSeesEveryWrite) {
  expect_like_eager(
      [](const Tensor& a, const Tensor& b) {
        Tensor top = a.slice(0, 0, 2), row1 = a.select(0, 1), col = a.select(1, 0);
        a.add_(1);      // the base: top and row1 change
        row1.mul_(10);  // a view: a, top and col change
        col.copy_(b.select(1, 5));
        return top + row1.unsqueeze(0) + col.sum();
      },
      x, y);
}

TEST_F(ViewMutationTest, IntermediatesAndCapturedTensors) {
  Tensor state = zeros({3, 4});
  auto fn = [&state](const Tensor& a, const Tensor& b) {
    Tensor t = a * 2;  // not an input: only the result shows the write
    t.slice(0, 1, 3).copy_(b.slice(0, 0, 2));
    state.select(1, 2).add_(1);  // a captured tensor, written through a view
    return t + state.sum();
  };
  Tensor expected = fn(x, y);
  state.zero_();
  auto cf = compile(fn, {.backend = "eager"});
  expect_close(cf(x, y), values(expected), expected.sizes());
  expect_close(cf(x, y), values(expected + 3), expected.sizes());  // the state counts on
  expect_close(state.select(1, 2), {2, 2, 2}, {3});
  expect_close(state.select(1, 1), {0, 0, 0}, {3});
}

// reshape of a transposed tensor copies: writing into the copy leaves the input alone.
TEST_F(ViewMutationTest, ReshapeThatCopiesIsNotAView) {
  expect_like_eager(
      [](const Tensor& a, const Tensor&) {
        Tensor flat = a.t().reshape({-1});
        flat.add_(1);
        return flat;
      },
      x, y);
}

TEST_F(ViewMutationTest, CompiledByInductorInOneKernel) {
  expect_like_eager(
      [](const Tensor& a, const Tensor& b) {
        a.slice(1, 0, std::nullopt, 2).add_(b.slice(1, 1, std::nullopt, 2));
        return a.select(0, 0).sum();
      },
      x, y, "inductor");
}

// A graph break between taking a view and writing into it: the view is a real view of the
// caller's tensor afterwards, and the write reaches it.
TEST_F(ViewMutationTest, WritesAcrossAGraphBreak) {
  expect_like_eager(
      [](const Tensor& a, const Tensor& b) {
        Tensor row = a.select(0, 2);
        Tensor scale =
            (b.sum() > 0).is_nonzero() ? full({}, 2.0) : full({}, -2.0);  // a value request
        row.mul_(scale);
        a.slice(0, 0, 1).add_(row.unsqueeze(0));
        return row * 1;
      },
      x, y);
}

TEST_F(ViewMutationTest, ExpandedViewsCannotBeWritten) {
  auto cf = compile(
      [](const Tensor& a) {
        a.select(0, 0).unsqueeze(0).expand({3, 6}).add_(1);
        return a;
      },
      {.backend = "eager"});
  EXPECT_COIL_ERROR(cf(random({4, 6})), "in-place update of a view made by expand");
}

// scatter_view is the inverse of apply_view: eagerly, it equals writing into the view.
TEST(ViewReplay, ScatterMatchesWritingIntoTheView) {
  Tensor base = random({5, 6});
  struct Case {
    OpId op;
    std::vector<Arg> args;
    int64_t item = 0;
  };
  std::vector<Case> cases = {
      {OpId::slice, {Tensor(), int64_t{1}, int64_t{1}, int64_t{-1}, int64_t{2}}},
      {OpId::slice, {Tensor(), int64_t{0}, std::monostate{}, int64_t{3}, int64_t{1}}},
      {OpId::select, {Tensor(), int64_t{1}, int64_t{-2}}},
      {OpId::narrow, {Tensor(), int64_t{0}, int64_t{-3}, int64_t{2}}},
      {OpId::split, {Tensor(), int64_t{4}, int64_t{1}}, 1},
      {OpId::chunk, {Tensor(), int64_t{2}, int64_t{0}}, 1},
      {OpId::transpose, {Tensor(), int64_t{0}, int64_t{1}}},
      {OpId::permute, {Tensor(), Shape{1, 0}}},
      {OpId::view, {Tensor(), Shape{3, 10}}},
      {OpId::unsqueeze, {Tensor(), int64_t{-1}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(op_name(c.op));
    ViewStep step{c.op, c.args, c.item};
    Tensor view = apply_view(step, base);
    Tensor value = random(view.sizes());
    Tensor written = base.clone();
    apply_view(step, written).copy_(value);
    Tensor scattered = scatter_view(step, base, value);
    expect_close(scattered, values(written), base.sizes());
  }
}

// A compiled function's in-place write into an input is an in-place write for autograd too, as
// the eager op's: a value saved for a backward that the call then changes is an error at
// backward, not a silently wrong gradient. Inductor's kernels and the eager backend alike.
TEST_F(ViewMutationTest, CompiledWritesTellAutogradOfTheChange) {
  for (const char* backend : {"eager", "inductor"}) {
    SCOPED_TRACE(backend);
    compiler_reset();
    Tensor w = random({4, 6}).requires_grad_(), saved = x.clone();
    Tensor loss = (w * saved).sum();  // mul saves `saved` for w's gradient
    auto cf = compile([](const Tensor& a) { return a.mul_(2.0).sum(); }, {.backend = backend});
    cf(saved);
    EXPECT_COIL_ERROR(loss.backward(), "modified by an in-place operation");
    Tensor fresh = x.clone();
    Tensor ok = (w * fresh).sum();
    ok.backward();  // nothing written: the gradient is fresh's
    expect_close(w.grad(), values(x), x.sizes());
  }
}
