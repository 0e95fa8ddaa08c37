#include "backends/cuda/streamed_reads.h"

#include <map>

#include "backends/cuda/vector_access.h"

namespace coil::cuda {

bool StreamedReads::streams(const std::string& buffer, size_t pass, sym::Expr index) const {
  return pass < per_pass.size() && per_pass[pass].count(buffer) &&
         unit_offset(index, r).has_value() && sym::depends_on(index, row);
}

StreamedReads streamed_reads(const std::vector<codegen::RowBlock>& passes,
                             const std::set<std::string>& readable, sym::Expr row, sym::Expr r) {
  std::map<std::string, size_t> last_pass;
  for (size_t i = 0; i < passes.size(); ++i)
    for (const schedule::KernelNode* n :
         passes[i].outer ? std::vector<const schedule::KernelNode*>{passes[i].outer}
                         : passes[i].section)
      ir::for_each_load(n->body, [&](const ir::ValueNode& l) { last_pass[l.buffer()] = i; });
  StreamedReads s{std::vector<std::set<std::string>>(passes.size()), row, r};
  for (const auto& [buffer, pass] : last_pass)
    if (readable.count(buffer)) s.per_pass[pass].insert(buffer);
  return s;
}

}  // namespace coil::cuda
