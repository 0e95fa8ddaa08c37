#include "backends/cuda/cuda_kernel.h"

#include <map>
#include <set>

#include "backends/cuda/row_printer.h"
#include "codegen/kernel_args.h"
#include "codegen/kernel_rewrites.h"

namespace coil::cuda {

namespace {

using namespace kernel_printing;

constexpr int64_t kPointwiseBlock = 256;

std::string head(const std::string& name, const std::vector<std::string>& args,
                 const std::set<std::string>& written, const ir::Program& p,
                 const std::set<std::string>& aliased, bool checks,
                 const std::vector<sym::Expr>& symbols, const std::vector<sym::Expr>& divisors,
                 int64_t block) {
  std::string h =
      "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(block) + ") " + name + "(";
  for (size_t i = 0; i < args.size(); ++i) {
    const bool w = written.count(args[i]) > 0;
    h += std::string(i ? ", " : "") + (w ? "" : "const ") +
         memory_type(p.buffer(args[i]).layout.dtype) +
         (aliased.count(args[i]) ? "* " : "* __restrict__ ") + args[i];
  }
  if (checks) h += std::string(args.empty() ? "" : ", ") + "i64* index_error";
  // A dynamic graph's sizes, by value.
  for (sym::Expr s : symbols)
    h += std::string(args.empty() && !checks && s == symbols[0] ? "" : ", ") + "i64 " + s->name();
  // Their dividers, each named after its divisor (kernels that divide differently differ).
  for (size_t k = 0; k < divisors.size(); ++k)
    h += ", coil_divider " + divider_name(k) + " /* " + sym::to_c(divisors[k]) + " */";
  return h + ")";
}

}  // namespace

Kernel with_two_pass_variances(const Kernel& k) {
  return codegen::two_pass_variances(
      k, [](const KernelNode& n, const Kernel&) { return n.reduce == ReduceKind::WelfordM2; });
}

KernelSource generate_kernel(const Kernel& k, const ir::Program& program,
                             const LaunchChoice& choice) {
  KernelSource src;
  src.name = k.name;
  src.parallel = true;
  std::vector<Kernel> parts = k.parts.empty() ? std::vector<Kernel>{k} : k.parts;
  const bool rows = k.parts.empty() && k.is_reduction();
  Kernel rewritten = rows ? with_two_pass_variances(k) : k;
  int64_t block = choice.pointwise_block ? choice.pointwise_block : kPointwiseBlock;
  // A read that a write may alias keeps to plain loads: the hinted one is an asm statement,
  // which the compiler may move past the write.
  std::set<std::string> streamable;
  if (rows) {
    std::map<const KernelNode*, size_t> pass_of;
    std::vector<codegen::RowBlock> bs = codegen::row_blocks(rewritten);
    for (size_t b = 0; b < bs.size(); ++b)
      for (const KernelNode* n : bs[b].section) pass_of[n] = b;
    src.inplace = codegen::inplace_pairs(rewritten, program, pass_of);
    streamable = k.final_reads;
    for (const auto& [w, r] : src.inplace) streamable.erase(r);
  } else if (k.parts.empty()) {
    src.inplace = codegen::inplace_pairs(k, program, {});
  } else {
    src.inplace = codegen::combo_inplace_pairs(k, program);
  }
  RowPrinter pr(rewritten, program, src, block, std::move(streamable));  // rows or pointwise
  if (rows) {
    const RowLaunch launch = choice.rows ? *choice.rows : row_launch(rewritten, program);
    block = launch.block;
    pr.row_body(rewritten, launch);
    src.launch = {launch.grid, block, 0};
  } else {
    sym::Expr blocks = sym::constant(0);
    for (const Kernel& part : parts) {
      const Printer::Pointwise pw = pr.pointwise(part);
      auto scope = pr.writer().block(parts.size() == 1 ? std::string()
                                                       : "if (blockIdx.x >= " + sym::to_c(blocks) +
                                                             " && blockIdx.x < " +
                                                             sym::to_c(blocks + pw.blocks) + ")");
      pr.pointwise_body(pw, blocks);
      blocks = blocks + pw.blocks;
    }
    src.launch = {blocks, block, 0};
  }
  std::set<std::string> written;
  std::set<std::string> seen;
  for (const Kernel& part : rows ? std::vector<Kernel>{rewritten} : parts) {
    for (const std::string& a : codegen::arguments(part))
      if (seen.insert(a).second) src.args.push_back(a);
    for (const std::string& w : codegen::written(part)) written.insert(w);
  }
  std::set<std::string> aliased;
  for (const auto& [w, r] : src.inplace) aliased.insert({w, r});
  src.symbols = codegen::kernel_symbols(k);
  src.divisors = pr.divisors();
  src.code = head(k.name, src.args, written, program, aliased, !src.index_checks.empty(),
                  src.symbols, src.divisors, block) +
             " {\n  coil_wait_previous_kernel();\n" + pr.writer().text() + "}\n";
  return src;
}

}  // namespace coil::cuda
