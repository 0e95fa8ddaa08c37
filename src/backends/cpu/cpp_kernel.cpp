#include "backends/cpu/cpp_kernel.h"

#include "backends/cpu/cpp_kernel_common.h"

namespace coil::cpu {

namespace {

// The strategy that prints `k`: column order for reductions along an outer dim of memory, rows
// for other reductions, else pointwise loops.
Strategy strategy_for(const Kernel& k, const ir::Program& p, bool in_region,
                      std::vector<codegen::IndexCheck>* checks) {
  if (!k.is_reduction()) return pointwise_kernel(k, p, in_region, checks);
  if (Strategy column = column_kernel(k, p, checks)) return column;
  return row_kernel(k, p, checks);
}

// A combo kernel: one parallel region, each part's loops shared out in turn without a barrier
// between them (the parts are independent pointwise loops).
KernelSource combo_kernel(const Kernel& k, const ir::Program& program) {
  KernelSource src;
  src.name = k.name;
  src.parallel = true;
  src.vectorized = true;
  std::set<std::string> all_written, seen;
  CodeWriter w(1);
  {
    w.line("#pragma omp parallel");
    auto region = w.block();
    for (const Kernel& part : k.parts) {
      w.line("// " + part.name);
      auto scope = w.block();
      Strategy s = pointwise_kernel(part, program, /*in_region=*/true, &src.index_checks);
      s->body(w);
      src.vectorized = src.vectorized && s->vectorized();
      for (const std::string& a : arguments(part))
        if (seen.insert(a).second) src.args.push_back(a);
      for (const std::string& b : written(part)) all_written.insert(b);
    }
  }
  src.symbols = codegen::kernel_symbols(k);
  src.inplace = codegen::combo_inplace_pairs(k, program);
  src.code = function_head(k.name, src.args, all_written, program, src.index_checks, src.symbols,
                           src.inplace) +
             w.text() + "}\n";
  return src;
}

}  // namespace

KernelSource generate_kernel(const Kernel& k, const ir::Program& program) {
  if (!k.parts.empty()) return combo_kernel(k, program);
  KernelSource src;
  src.name = k.name;
  Strategy s = strategy_for(k, program, /*in_region=*/false, &src.index_checks);
  CodeWriter w(1);
  s->body(w);
  // Threads chosen per call: a serial copy of the loops runs when the condition fails.
  std::string serial;
  if (!s->parallel_condition().empty()) {
    Strategy copy = strategy_for(k, program, /*in_region=*/false, &src.index_checks);
    copy->run_serially();
    CodeWriter sw(2);
    copy->body(sw);
    serial = "  if (!(" + s->parallel_condition() + ")) {\n" + sw.text() + "    return;\n  }\n";
  }
  src.vectorized = s->vectorized();
  src.parallel = s->parallel();
  src.args = arguments(s->kernel());
  src.inplace = s->inplace_pairs();
  src.symbols = codegen::kernel_symbols(s->kernel());
  src.code = function_head(k.name, src.args, written(s->kernel()), program, src.index_checks,
                           src.symbols, src.inplace) +
             serial + w.text() + "}\n";
  return src;
}

}  // namespace coil::cpu
