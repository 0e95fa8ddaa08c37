#include "codegen/kernel_rewrites.h"

#include <cmath>
#include <optional>
#include <set>

namespace coil::codegen {

using ir::ReduceKind;
using schedule::Kernel;
using schedule::KernelNode;
using V = ir::ValueNode;

std::vector<RowBlock> row_blocks(const Kernel& k) {
  std::vector<RowBlock> out;
  std::set<std::string> reduced_here;
  for (const KernelNode& n : k.nodes) {
    bool needs_result = false;
    ir::for_each_load(n.body, [&](const ir::ValueNode& l) {
      needs_result |= reduced_here.count(l.buffer()) > 0;
    });
    if (!n.inner || needs_result || out.empty() || out.back().outer) {
      out.push_back(RowBlock{});
      reduced_here.clear();
    }
    if (!n.inner) {
      out.back().outer = &n;
      continue;
    }
    out.back().section.push_back(&n);
    if (n.reduce) reduced_here.insert(n.buffer);
  }
  return out;
}

Kernel two_pass_variances(const Kernel& k,
                          const std::function<bool(const KernelNode&, const Kernel&)>& two_pass) {
  Kernel out = k;
  out.nodes.clear();
  const sym::Expr numel = sym_numel(k.inner);
  for (const RowBlock& b : row_blocks(k)) {
    if (b.outer) {
      out.nodes.push_back(*b.outer);
      continue;
    }
    std::vector<KernelNode> means, squares;
    for (const KernelNode* n : b.section) {
      if (!two_pass(*n, k)) {
        out.nodes.push_back(*n);
        continue;
      }
      // The row's sum: a Sum of the same values in this section (layer norm's mean) or a new one.
      std::string sum;
      for (const KernelNode* m : b.section)
        if (m->reduce == ReduceKind::Sum && ir::to_string(m->body) == ir::to_string(n->body))
          sum = m->buffer;
      if (sum.empty()) {
        KernelNode s = *n;
        s.buffer = sum = n->buffer + "_sum";
        s.reduce = ReduceKind::Sum;
        s.store = false;
        out.nodes.push_back(std::move(s));
      }
      const DType t = n->body->dtype();
      KernelNode mean = *n;
      mean.buffer = n->buffer + "_mean";
      mean.inner = false;
      mean.reduce.reset();
      mean.store = false;
      ir::Value count = numel->is_const() ? V::make_constant(static_cast<double>(numel->value()), t)
                                          : V::cast(V::index_value(numel), t);
      mean.body = V::binary(ir::Op::Div, V::load(sum, t, n->store_index), count);
      KernelNode square = *n;
      square.reduce = ReduceKind::Sum;
      ir::Value d = V::binary(ir::Op::Sub, n->body, V::load(mean.buffer, t, n->store_index));
      square.body = V::binary(ir::Op::Mul, d, d);
      means.push_back(std::move(mean));
      squares.push_back(std::move(square));
    }
    out.nodes.insert(out.nodes.end(), means.begin(), means.end());
    out.nodes.insert(out.nodes.end(), squares.begin(), squares.end());
  }
  return out;
}

namespace {
std::optional<ir::Op> fold_op(ReduceKind k) {
  switch (k) {
    case ReduceKind::Sum:
      return ir::Op::Add;
    case ReduceKind::Prod:
      return ir::Op::Mul;
    case ReduceKind::Max:
      return ir::Op::Maximum;
    case ReduceKind::Min:
      return ir::Op::Minimum;
    default:
      return std::nullopt;  // Welford and arg-reductions carry more than one value
  }
}
}  // namespace

bool column_foldable(ReduceKind k) { return fold_op(k) || k == ReduceKind::WelfordM2; }

ColumnFold column_fold(const Kernel& k, sym::Expr chunk_start) {
  ColumnFold out;
  const sym::Expr in_chunk = k.outer_vars.back() - chunk_start;
  for (const KernelNode& n : k.nodes) {
    if (*n.reduce == ReduceKind::WelfordM2) {
      // d = x - mean; mean += d / count; m2 += d * (x - mean), count = reduction step + 1.
      std::string mean = "wmean_" + n.buffer, delta = "wdelta_" + n.buffer;
      out.welford_means.push_back({mean, n.dtype});
      ir::Value count =
          V::binary(ir::Op::Add, V::cast(V::index_value(ir::ravel(k.inner_vars, k.inner)), n.dtype),
                    V::make_constant(1.0, n.dtype));
      KernelNode zero = n, zero_mean = n, d = n, step_mean = n, step_m2 = n;
      for (KernelNode* m : {&zero, &zero_mean, &d, &step_mean, &step_m2}) m->reduce.reset();
      zero.body = zero_mean.body = V::make_constant(0.0, n.dtype);
      zero_mean.buffer = step_mean.buffer = mean;
      zero_mean.store_index = step_mean.store_index = in_chunk;
      d.buffer = delta;
      d.store = false;
      d.body = V::binary(ir::Op::Sub, n.body, V::load(mean, n.dtype, in_chunk));
      step_mean.body = V::binary(ir::Op::Add, V::load(mean, n.dtype, in_chunk),
                                 V::binary(ir::Op::Div, V::load(delta, n.dtype, in_chunk), count));
      step_m2.body =
          V::binary(ir::Op::Add, V::load(n.buffer, n.dtype, n.store_index),
                    V::binary(ir::Op::Mul, V::load(delta, n.dtype, in_chunk),
                              V::binary(ir::Op::Sub, n.body, V::load(mean, n.dtype, in_chunk))));
      out.init.insert(out.init.end(), {zero, zero_mean});
      out.fold.insert(out.fold.end(), {d, step_mean, step_m2});
      continue;
    }
    const bool lowest = *n.reduce == ReduceKind::Max;
    const double start = *n.reduce == ReduceKind::Sum    ? 0.0
                         : *n.reduce == ReduceKind::Prod ? 1.0
                                                         : (lowest ? -INFINITY : INFINITY);
    KernelNode first = n, step = n;
    first.reduce = step.reduce = std::nullopt;
    first.body = V::make_constant(start, n.dtype);
    step.body = V::binary(*fold_op(*n.reduce), V::load(n.buffer, n.dtype, n.store_index), n.body);
    out.init.push_back(first);
    out.fold.push_back(step);
  }
  return out;
}

}  // namespace coil::codegen
