// Running the `coil` tool (and the example programs) as a user does, from a shell in the
// source tree, and reading what it printed.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace coil::testing {

struct ShellResult {
  int exit_code = -1;  // the command's exit status; 128 + N when signal N ended it
  std::string out, err;
};

// A single-quoted shell word.
inline std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

inline std::string read_whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The folder of the test binary's scratch files (debug folders the examples write).
inline const std::string& scratch_dir() {
  static const std::string dir = [] {
    std::string tmpl = ::testing::TempDir() + "coil_tool_XXXXXX";
    const char* made = mkdtemp(tmpl.data());
    return std::string(made ? made : ::testing::TempDir().c_str());
  }();
  return dir;
}

// Runs `command` with /bin/sh in the source tree, with the tool's folder (and the examples',
// when they are built) first on PATH, so `coil ...` and `coil_example_...` run what this build
// made. Debug folders go to a scratch folder, never into the source tree.
inline ShellResult run_shell(const std::string& command, const std::string& stdin_text = "") {
  std::string err_file = scratch_dir() + "/stderr.txt", in_file = scratch_dir() + "/stdin.txt";
  {
    std::ofstream in(in_file, std::ios::binary);
    in << stdin_text;
  }
  std::string path = COIL_TOOL_DIR;
  if (std::string(COIL_EXAMPLES_DIR).size()) path += std::string(":") + COIL_EXAMPLES_DIR;
  std::string script =
      "cd " + shell_quote(COIL_SOURCE_DIR) + " && export PATH=" + shell_quote(path) +
      ":\"$PATH\" COIL_DEBUG_DIR=" + shell_quote(scratch_dir() + "/debug") + " && { " + command +
      "\n} <" + shell_quote(in_file) + " 2>" + shell_quote(err_file);
  ShellResult r;
  FILE* p = popen(script.c_str(), "r");
  if (!p) {
    ADD_FAILURE() << "popen failed for: " << command;
    return r;
  }
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) r.out.append(buf, n);
  int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.err = read_whole_file(err_file);
  return r;
}

// Whether `text` has `line` as one of its lines, ignoring spaces at the ends.
inline bool has_line(const std::string& text, const std::string& line) {
  auto trim = [](std::string s) {
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  std::istringstream in(text);
  std::string want = trim(line);
  for (std::string l; std::getline(in, l);)
    if (trim(l) == want) return true;
  return false;
}

}  // namespace coil::testing

#define EXPECT_CONTAINS(text, part)                                                           \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "no '" << (part) << "' in:\n" \
                                                             << (text)
