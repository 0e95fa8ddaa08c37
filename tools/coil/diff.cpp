#include "diff.h"

#include <algorithm>
#include <sstream>
#include <vector>

namespace coil::tool {

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// One line of the edit script: ' ' kept, '-' removed from before, '+' added in after; with
// its 0-based line numbers in both texts (of the next line, for the side that lacks it).
struct Edit {
  char op;
  size_t a, b;
};

// The shortest edit script by the longest common subsequence. Graph texts are a few hundred
// lines at most, so the quadratic table is small.
std::vector<Edit> edit_script(const std::vector<std::string>& a,
                              const std::vector<std::string>& b) {
  size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> lcs(n + 1, std::vector<int>(m + 1, 0));
  for (size_t i = n; i-- > 0;)
    for (size_t j = m; j-- > 0;)
      lcs[i][j] = a[i] == b[j] ? lcs[i + 1][j + 1] + 1 : std::max(lcs[i + 1][j], lcs[i][j + 1]);
  std::vector<Edit> out;
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      out.push_back({' ', i++, j++});
    } else if (i < n && (j == m || lcs[i + 1][j] >= lcs[i][j + 1])) {
      out.push_back({'-', i++, j});  // removals first, as diff -u writes a replaced block
    } else {
      out.push_back({'+', i, j++});
    }
  }
  return out;
}

// "@@ -3,4 +3,3 @@": 1-based first line and count on each side (a count of 0 names the line
// before, as diff -u does).
std::string hunk_header(size_t a0, size_t na, size_t b0, size_t nb) {
  auto side = [](size_t first, size_t count) {
    return std::to_string(count ? first + 1 : first) + "," + std::to_string(count);
  };
  return "@@ -" + side(a0, na) + " +" + side(b0, nb) + " @@\n";
}

}  // namespace

std::string unified_diff(const std::string& before, const std::string& after,
                         const std::string& before_label, const std::string& after_label,
                         int context) {
  std::vector<std::string> a = lines_of(before), b = lines_of(after);
  std::vector<Edit> edits = edit_script(a, b);
  std::string out;
  size_t k = 0, ctx = static_cast<size_t>(std::max(context, 0));
  while (k < edits.size()) {
    // The next change, and the hunk around it: it takes in later changes while their contexts
    // would touch.
    while (k < edits.size() && edits[k].op == ' ') ++k;
    if (k == edits.size()) break;
    size_t start = k >= ctx ? k - ctx : 0, end = k;
    for (;;) {
      while (end < edits.size() && edits[end].op != ' ') ++end;  // the run of changes
      size_t kept = end;                                         // the unchanged run after it
      while (kept < edits.size() && edits[kept].op == ' ') ++kept;
      if (kept == edits.size() || kept - end > 2 * ctx) break;
      end = kept;  // the next change is close: the same hunk
    }
    end = std::min(edits.size(), end + ctx);
    size_t na = 0, nb = 0;
    std::string body;
    for (size_t e = start; e < end; ++e) {
      const Edit& d = edits[e];
      const std::string& line = d.op == '+' ? b[d.b] : a[d.a];
      body += d.op + line + "\n";
      na += d.op != '+';
      nb += d.op != '-';
    }
    if (out.empty()) out = "--- " + before_label + "\n+++ " + after_label + "\n";
    out += hunk_header(edits[start].a, na, edits[start].b, nb) + body;
    k = end;
  }
  return out;
}

}  // namespace coil::tool
