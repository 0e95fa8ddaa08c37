// nn::Module printing, as PyTorch's repr:
//   Sequential(
//     (0): Linear(in_features=4, out_features=8, bias=True)
//     (1): ReLU()
//   )
#include <coil/nn/module.h>

#include <ostream>

namespace coil::nn {

namespace {
// Indents every line after the first by two spaces (a child's repr inside its parent's).
std::string indent_tail(const std::string& s) {
  std::string out;
  for (char c : s) {
    out += c;
    if (c == '\n') out += "  ";
  }
  return out;
}
}  // namespace

std::string Module::str() const {
  std::vector<std::string> lines;
  std::string extra = extra_repr();
  if (!extra.empty()) lines.push_back(indent_tail(extra));
  for (const auto& [n, c] : children_) lines.push_back("(" + n + "): " + indent_tail(c->str()));
  std::string s = name() + "(";
  if (lines.size() == 1 && children_.empty()) return s + lines[0] + ")";
  if (lines.empty()) return s + ")";
  for (const std::string& l : lines) s += "\n  " + l;
  return s + "\n)";
}

std::ostream& operator<<(std::ostream& os, const Module& m) { return os << m.str(); }

}  // namespace coil::nn
