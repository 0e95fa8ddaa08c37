#include "graph/view_replay.h"

#include <coil/ops.h>

#include <numeric>

#include "graph/dims.h"

namespace coil {

namespace {

std::vector<Arg> with_input(const ViewStep& step, const Tensor& input) {
  std::vector<Arg> args = step.args;
  args[0] = input;
  return args;
}

// `input` with positions start, start + step, ... of dim `d` replaced by `value`'s slices.
// Written with pointwise-lowerable ops (cat, pad, where), so it fuses into one kernel.
Tensor slice_scatter(const Tensor& input, const Tensor& value, int64_t d, int64_t start,
                     int64_t step) {
  int64_t n = value.sizes()[d], size = input.sizes()[d];
  if (n == 0) return input;
  int64_t span = (n - 1) * step + 1;  // the view covers [start, start + span)
  Tensor middle = value;
  if (step > 1) {
    // Spread the values `step` apart: each followed by step - 1 zeros (pad on a new dim
    // after d, then merge it into d), and keep the input between them.
    Tensor spread = value.unsqueeze(d + 1);
    Shape pads(static_cast<size_t>(2 * (spread.dim() - d - 1)), 0);
    pads[pads.size() - 1] = step - 1;
    Shape merged = value.sizes();
    merged[static_cast<size_t>(d)] = n * step;
    spread = pad(spread, pads).reshape(merged).slice(d, 0, span);
    Shape mask_shape(static_cast<size_t>(input.dim()), 1);
    mask_shape[static_cast<size_t>(d)] = span;
    Tensor hit = eq(remainder(arange(0, span, 1, kInt64), step), 0).reshape(mask_shape);
    middle = where(hit, spread, input.slice(d, start, start + span));
  }
  std::vector<Tensor> pieces;
  if (start > 0) pieces.push_back(input.slice(d, 0, start));
  pieces.push_back(middle);
  if (start + span < size) pieces.push_back(input.slice(d, start + span, size));
  return pieces.size() == 1 ? middle : cat(pieces, d);
}

}  // namespace

bool aliases_input(OpId op, const Tensor& input, const Tensor& out) {
  if (op_info(op).kind != OpKind::View) return false;
  if (op != OpId::reshape && op != OpId::flatten) return true;
  return view_strides(input.sizes(), input.strides(), out.sizes()).has_value();
}

Tensor apply_view(const ViewStep& step, const Tensor& input) {
  return call_op(step.op, with_input(step, input)).at(static_cast<size_t>(step.item));
}

Tensor scatter_view(const ViewStep& step, const Tensor& input, const Tensor& value) {
  std::vector<Arg> args = with_input(step, input);
  const Args a(args);
  const char* name = op_name(step.op);
  auto dim = [&](size_t i) { return wrap_dim(a.i64(i), input.dim(), name); };
  if (is_reshape_like(step.op)) return value.reshape(input.sizes());
  switch (step.op) {
    case OpId::t:
      return value.t();
    case OpId::transpose:
      return value.transpose(a.i64(1), a.i64(2));
    case OpId::permute: {
      Shape inverse(a.ints(1).size());
      for (size_t i = 0; i < inverse.size(); ++i)
        inverse[static_cast<size_t>(wrap_dim(a.ints(1)[i], input.dim(), name))] =
            static_cast<int64_t>(i);
      return value.permute(inverse);
    }
    case OpId::slice: {
      int64_t d = dim(1), n = input.sizes()[d];
      int64_t start = a.opt_i64(2).value_or(0);
      start = std::clamp<int64_t>(start < 0 ? start + n : start, 0, n);
      return slice_scatter(input, value, d, start, a.i64(4));
    }
    case OpId::narrow: {
      int64_t d = dim(1), start = a.i64(2);
      return slice_scatter(input, value, d, start < 0 ? start + input.sizes()[d] : start, 1);
    }
    case OpId::select: {
      int64_t d = dim(1), i = a.i64(2);
      return slice_scatter(input, value.unsqueeze(d), d, i < 0 ? i + input.sizes()[d] : i, 1);
    }
    case OpId::split:
    case OpId::split_with_sizes:
    case OpId::chunk: {
      int64_t d = dim(2), start = 0;
      std::vector<TensorMeta> pieces = run_meta(step.op, args);
      for (int64_t i = 0; i < step.item; ++i) start += pieces[static_cast<size_t>(i)].sizes[d];
      return slice_scatter(input, value, d, start, 1);
    }
    default:
      throw Error(detail::str_cat(
          "in-place update of a view made by ", name, " (", shape_str(input.sizes()), " -> ",
          shape_str(value.sizes()),
          ") while capturing: its elements overlap or cannot be mapped back to the input; "
          "clone() the view first, or compute the new value out of place"));
  }
}

}  // namespace coil
