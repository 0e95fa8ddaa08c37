// Tensor printing in the style of PyTorch's repr: tensor([[0.1000, 2.0000], ...]).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>
#include <sstream>

#include "runtime/tensor_impl.h"

namespace coil {

namespace {
constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

struct Formatter {
  DType dtype;
  bool int_mode = false;  // floats that are all whole numbers print as "1."
  bool sci_mode = false;
  int width = 1;

  explicit Formatter(DType t, const std::vector<double>& values) : dtype(t) {
    if (is_floating(t)) {
      double max_abs = 0, min_abs = INFINITY;
      bool all_whole = true;
      for (double v : values) {
        if (!std::isfinite(v)) continue;
        max_abs = std::max(max_abs, std::fabs(v));
        if (v != 0) min_abs = std::min(min_abs, std::fabs(v));
        if (v != std::nearbyint(v)) all_whole = false;
      }
      int_mode = all_whole;
      if (int_mode) {
        sci_mode = max_abs > 1e8;
      } else if (std::isfinite(min_abs)) {
        sci_mode = max_abs / min_abs > 1000.0 || max_abs > 1e8 || min_abs < 1e-4;
      }
    }
    for (double v : values) width = std::max(width, static_cast<int>(format(v).size()));
  }

  std::string format(double v) const {
    char buf[64];
    if (dtype == kBool) return v != 0 ? "True" : "False";
    if (!is_floating(dtype)) {
      std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(v));
    } else if (std::isnan(v)) {
      return "nan";
    } else if (std::isinf(v)) {
      return v > 0 ? "inf" : "-inf";
    } else if (sci_mode) {
      std::snprintf(buf, sizeof buf, "%.4e", v);
    } else if (int_mode) {
      std::snprintf(buf, sizeof buf, "%.0f.", v);
    } else {
      std::snprintf(buf, sizeof buf, "%.4f", v);
    }
    return buf;
  }
  std::string padded(double v) const {
    std::string s = format(v);
    return std::string(static_cast<size_t>(std::max(0, width - static_cast<int>(s.size()))), ' ') +
           s;
  }
};

// Element offsets (in logical order) of the rows/blocks kept when summarizing.
std::vector<int64_t> kept_indices(int64_t size, bool summarize) {
  std::vector<int64_t> idx;
  if (!summarize || size <= 2 * kEdgeItems) {
    for (int64_t i = 0; i < size; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);  // the "..." marker
    for (int64_t i = size - kEdgeItems; i < size; ++i) idx.push_back(i);
  }
  return idx;
}

void print_dim(std::ostream& os, const std::vector<double>& vals, const Shape& sizes,
               const Shape& cstrides, size_t d, int64_t base, const Formatter& f, bool summarize,
               int indent) {
  os << '[';
  auto idx = kept_indices(sizes[d], summarize);
  bool last = d + 1 == sizes.size();
  for (size_t k = 0; k < idx.size(); ++k) {
    if (k) {
      os << ',';
      if (last) {
        os << ' ';
      } else {
        os << std::string(sizes.size() - d - 1, '\n') << std::string(indent + 1, ' ');
      }
    }
    if (idx[k] < 0) {
      os << "...";
      continue;
    }
    int64_t off = base + idx[k] * cstrides[d];
    if (last) {
      os << f.padded(vals[off]);
    } else {
      print_dim(os, vals, sizes, cstrides, d + 1, off, f, summarize, indent + 1);
    }
  }
  os << ']';
}
}  // namespace

std::string Tensor::str(Where where) const {
  if (!defined()) return "tensor(undefined)";
  std::ostringstream os;
  ensure_storage(*this, "printing a tensor", where);
  std::vector<double> vals = device().is_cpu() ? to_vector_double(where) : std::vector<double>{};
  bool summarize = numel() > kSummarizeAbove;
  // Format width from the values that will be shown (all of them, for simplicity).
  Formatter f(dtype(), vals);
  os << "tensor(";
  if (dim() == 0) {
    os << f.format(vals[0]);
  } else if (numel() == 0) {
    os << "[]";
  } else {
    print_dim(os, vals, sizes(), contiguous_strides(sizes()), 0, 0, f, summarize, 7);
  }
  if (numel() == 0 && dim() != 1) {
    os << ", size=(";
    for (int64_t i = 0; i < dim(); ++i) os << (i ? ", " : "") << sizes()[i];
    os << (dim() == 1 ? ",)" : ")");
  }
  if (device() != kCPU) os << ", device='" << device().str() << "'";
  if (dtype() != kFloat32 && dtype() != kInt64 && dtype() != kBool)
    os << ", dtype=coil." << dtype_name(dtype());
  if (requires_grad()) os << ", requires_grad=True";
  os << ')';
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace coil
