#include "backends/cpu/cpp_accumulator.h"

#include "ir/program.h"

namespace coil::cpu {

using ir::ReduceKind;

namespace {

// The identity of max (lowest) or min (highest) for dtype t, as a C++ literal.
std::string extreme(DType t, bool lowest) {
  static const codegen::CDialect cpp = cpp_dialect();
  return codegen::c_extreme(t, lowest, cpp);
}

}  // namespace

bool Accumulator::splittable(ReduceKind k) {
  return k == ReduceKind::Sum || k == ReduceKind::Prod || k == ReduceKind::Max ||
         k == ReduceKind::Min;
}

std::string Accumulator::name(bool vector, int part) const {
  return vector ? "vacc_" + n_.buffer + (part ? "_" + std::to_string(part) : "")
                : "acc_" + n_.buffer;
}

void Accumulator::declare(codegen::CodeWriter& w, int parts) const {
  DType t = n_.body->dtype();
  std::string ct = compute_type(t), a = name(false), va = name(true);
  switch (*n_.reduce) {
    case ReduceKind::Sum:
      w.line(ct + " " + a + " = 0;");
      if (vector_) w.line("vf32 " + va + " = {};");
      break;
    case ReduceKind::Prod:
      w.line(ct + " " + a + " = 1;");
      if (vector_) w.line("vf32 " + va + " = vsplat(1.0f);");
      break;
    case ReduceKind::Max:
    case ReduceKind::Min: {
      std::string init = extreme(t, *n_.reduce == ReduceKind::Max);
      w.line(ct + " " + a + " = " + init + ";");
      if (vector_) w.line("vf32 " + va + " = vsplat(" + init + ");");
      break;
    }
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin:
      w.line(ct + " " + a + " = " + extreme(t, *n_.reduce == ReduceKind::ArgMax) + ";");
      w.line("i64 " + a + "_index = 0;");
      break;
    case ReduceKind::WelfordM2:
      w.line("welford<" + ct + "> " + a + ";");
      if (vector_) w.line("vwelford " + va + ";");
      break;
    case ReduceKind::Any:
    case ReduceKind::All: {
      bool any = *n_.reduce == ReduceKind::Any;
      w.line("bool " + a + " = " + (any ? "false" : "true") + ";");
      if (vector_) w.line("vi32 " + va + " = vmask(" + (any ? "false" : "true") + ");");
      break;
    }
  }
  for (int p = 1; p < parts; ++p) w.line("vf32 " + name(true, p) + " = " + va + ";");
}

void Accumulator::update(BodyEmitter& em, const Emitted& v, bool vector, int part) const {
  std::string a = vector ? name(true, part) : name(false);
  std::string x = vector ? em.varying(v, n_.body->dtype()) : v.text;
  switch (*n_.reduce) {
    case ReduceKind::Sum:
      em.line(a + " += " + x + ";");
      break;
    case ReduceKind::Prod:
      em.line(a + " *= " + x + ";");
      break;
    case ReduceKind::Max:
      em.line(a + " = " + (vector ? "vmax(" : "smax(") + a + ", " + x + ");");
      break;
    case ReduceKind::Min:
      em.line(a + " = " + (vector ? "vmin(" : "smin(") + a + ", " + x + ");");
      break;
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin: {
      const char* cmp = *n_.reduce == ReduceKind::ArgMax ? " > " : " < ";
      const std::string flat_index = sym::to_c(ir::ravel(k_.inner_vars, k_.inner));
      em.line("if (!(" + a + " != " + a + ") && (" + x + cmp + a + " || " + x + " != " + x +
              ")) { " + a + " = " + x + "; " + a + "_index = " + flat_index + "; }");
      break;
    }
    case ReduceKind::WelfordM2:
      em.line(std::string(vector ? "vwelford_update(" : "welford_update(") + a + ", " + x + ");");
      break;
    case ReduceKind::Any:
      em.line(a + (vector ? " |= " : " = " + a + " || ") + x + ";");
      break;
    case ReduceKind::All:
      em.line(a + (vector ? " &= " : " = " + a + " && ") + x + ";");
      break;
  }
}

void Accumulator::merge_parts(codegen::CodeWriter& w, int parts) const {
  std::string a = name(true);
  for (int p = 1; p < parts; ++p) {
    std::string b = name(true, p);
    switch (*n_.reduce) {
      case ReduceKind::Sum:
        w.line(a + " += " + b + ";");
        break;
      case ReduceKind::Prod:
        w.line(a + " *= " + b + ";");
        break;
      default:
        w.line(a + " = " + (*n_.reduce == ReduceKind::Max ? "vmax(" : "vmin(") + a + ", " + b +
               ");");
    }
  }
}

std::string Accumulator::final_value() const {
  std::string a = name(false), va = name(true);
  switch (*n_.reduce) {
    case ReduceKind::Sum:
      return vector_ ? a + " + hsum(" + va + ")" : a;
    case ReduceKind::Prod:
      return vector_ ? a + " * hprod(" + va + ")" : a;
    case ReduceKind::Max:
      return vector_ ? "smax(" + a + ", hmax(" + va + "))" : a;
    case ReduceKind::Min:
      return vector_ ? "smin(" + a + ", hmin(" + va + "))" : a;
    case ReduceKind::ArgMax:
    case ReduceKind::ArgMin:
      return a + "_index";
    case ReduceKind::WelfordM2:
      return vector_ ? "welford_combine(vwelford_reduce(" + va + "), " + a + ").m2" : a + ".m2";
    case ReduceKind::Any:
      return vector_ ? "(" + a + " || hany(" + va + "))" : a;
    case ReduceKind::All:
      return vector_ ? "(" + a + " && hall(" + va + "))" : a;
  }
  return a;
}

}  // namespace coil::cpu
