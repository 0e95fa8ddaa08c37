#include "ir/program.h"

#include <algorithm>

#include <coil/error.h>

#include "runtime/tensor_impl.h"

namespace coil::ir {

sym::Expr Layout::numel() const { return sym_numel(sizes); }

sym::Expr Layout::address(const std::vector<sym::Expr>& index) const {
  COIL_ASSERT(index.size() == sizes.size(), "Layout::address: ", index.size(), " indices for a ",
              sizes.size(), "-d layout");
  sym::Expr e = offset;
  for (size_t k = 0; k < index.size(); ++k)
    if (!sizes[k]->is_const(1)) e = e + index[k] * strides[k];
  return e;
}

bool Layout::is_static() const {
  return coil::is_static(sizes) && coil::is_static(strides) && offset->is_const();
}

std::string Layout::str() const {
  std::string off = offset->is_const(0) ? ""
                    : offset->is_const() || offset->kind() == sym::Kind::Var
                        ? "+" + sym::to_string(offset)
                        : "+(" + sym::to_string(offset) + ")";
  return std::string(dtype_short_name(dtype)) + sym_shape_str(sizes) + sym_shape_str(strides) + off;
}

Layout Layout::contiguous(DType dtype, SymShape sizes) {
  SymShape strides = sym_contiguous_strides(sizes);
  return Layout{dtype, std::move(sizes), std::move(strides), sym::constant(0)};
}

Layout Layout::of(DType dtype, const Shape& sizes, const Shape& strides, int64_t offset) {
  return Layout{dtype, sym_constants(sizes), sym_constants(strides), sym::constant(offset)};
}

int64_t Program::hint(sym::Expr e) const {
  return e->is_const() ? e->value() : sym::evaluate(e, hints);
}

bool mostly_steps_by_one(const Program& p, sym::Expr index, sym::Expr var,
                         const std::vector<sym::Expr>& others) {
  if (!sym::depends_on(index, var)) return false;
  if (sym::steps_by_one(index, var)) return true;
  const int64_t samples = std::min<int64_t>(32, var->range().hi);
  if (samples <= 0) return false;
  sym::Bindings at;
  for (const sym::Expr& o : others) at[o] = sym::constant(0);
  auto address = [&](int64_t k) {
    at[var] = sym::constant(k);
    return p.hint(sym::substitute(index, at));
  };
  int64_t ones = 0;
  for (int64_t k = 0; k < samples; ++k) ones += address(k + 1) - address(k) == 1;
  return ones * 4 >= samples * 3;
}

const char* reduce_kind_name(ReduceKind k) {
  switch (k) {
    case ReduceKind::Sum:
      return "sum";
    case ReduceKind::Prod:
      return "prod";
    case ReduceKind::Max:
      return "max";
    case ReduceKind::Min:
      return "min";
    case ReduceKind::ArgMax:
      return "argmax";
    case ReduceKind::ArgMin:
      return "argmin";
    case ReduceKind::WelfordM2:
      return "welford_m2";
    case ReduceKind::Any:
      return "any";
    case ReduceKind::All:
      return "all";
  }
  return "?";
}

void add_once(std::vector<std::string>& list, const std::string& s) {
  if (std::find(list.begin(), list.end(), s) == list.end()) list.push_back(s);
}

const Buffer& Program::buffer(const std::string& name) const {
  for (const Buffer& b : buffers)
    if (b.name == name) return b;
  throw InternalError("ir: no buffer named " + name);
}

std::string to_string(const Computation& c) {
  std::string vars;
  for (size_t i = 0; i < c.vars.size(); ++i) vars += (i ? ", " : "") + sym::to_string(c.vars[i]);
  if (!c.is_reduction())
    return "pointwise" + sym_shape_str(c.ranges) + "(" + vars + ": " + to_string(c.body) + ")";
  std::string rvars;
  for (size_t i = 0; i < c.rvars.size(); ++i) rvars += (i ? ", " : "") + sym::to_string(c.rvars[i]);
  return std::string("reduce_") + reduce_kind_name(*c.reduce) + sym_shape_str(c.ranges) +
         sym_shape_str(c.reduction_ranges) + "(" + vars + "; " + rvars + ": " + to_string(c.body) +
         ")";
}

std::string to_string(const Program& p) {
  std::string out;
  for (const Buffer& b : p.buffers) {
    out += b.name + ": " + b.layout.str() + " = ";
    switch (b.kind) {
      case BufferKind::Input:
        out += "input " + std::to_string(b.input_index);
        break;
      case BufferKind::Constant:
        out += "constant";
        break;
      case BufferKind::Computed:
        out += to_string(*b.compute);
        break;
      case BufferKind::Extern: {
        if (b.call->result > 0) {
          out += "result " + std::to_string(b.call->result) + " of " + b.call->first + "'s call";
          break;
        }
        out += std::string("extern ") + op_name(b.call->op) + "(";
        bool first = true;
        for (const ExternArg& a : b.call->args) {
          if (!first) out += ", ";
          first = false;
          if (auto* r = std::get_if<TensorRef>(&a))
            out += r->buffer + " " + r->view.str();
          else if (auto* rs = std::get_if<std::vector<TensorRef>>(&a)) {
            out += "[";
            for (size_t i = 0; i < rs->size(); ++i) out += (i ? ", " : "") + (*rs)[i].buffer;
            out += "]";
          } else {
            out += "_";
          }
        }
        out += ")  # " + b.call->reason;
        break;
      }
    }
    out += "\n";
  }
  out += "return (";
  for (size_t i = 0; i < p.outputs.size(); ++i)
    out += (i ? ", " : "") + p.outputs[i].buffer + " " + p.outputs[i].view.str();
  return out + ")\n";
}

}  // namespace coil::ir

namespace coil::ir {

sym::Expr ravel(const std::vector<sym::Expr>& index, const SymShape& sizes) {
  sym::Expr flat = sym::constant(0);
  sym::Expr stride = sym::constant(1);
  for (size_t k = sizes.size(); k-- > 0;) {
    if (!sizes[k]->is_const(1)) flat = flat + index[k] * stride;
    stride = stride * sizes[k];
  }
  return flat;
}

// Divisors that may be 0 (an empty dim, or a symbolic size whose range reaches 0: no element,
// so no index either) count as 1. The outermost dim takes no mod: the flat index is below the
// whole product, so its quotient is below the first size.
std::vector<sym::Expr> unravel(sym::Expr flat, const SymShape& sizes) {
  std::vector<sym::Expr> out(sizes.size());
  sym::Expr stride = sym::constant(1);
  auto positive = [](sym::Expr e) {
    if (e->is_const(0)) return sym::constant(1);
    return e->range().lo >= 1 ? e : sym::max(e, sym::constant(1));
  };
  for (size_t k = sizes.size(); k-- > 0;) {
    const sym::Expr quotient = sym::floordiv(flat, positive(stride));
    out[k] = sizes[k]->is_const(1) ? sym::constant(0)
             : k == 0              ? quotient
                                   : sym::mod(quotient, positive(sizes[k]));
    stride = stride * sizes[k];
  }
  return out;
}

std::vector<std::string> extern_inputs(const ExternCall& call) {
  std::vector<std::string> out;
  for (const ExternArg& a : call.args) {
    if (auto* r = std::get_if<TensorRef>(&a)) out.push_back(r->buffer);
    if (auto* rs = std::get_if<std::vector<TensorRef>>(&a))
      for (const TensorRef& r : *rs) out.push_back(r.buffer);
  }
  return out;
}

}  // namespace coil::ir
