// docs/walkthrough.md never goes stale: every command it shows runs, exits with 0 and prints
// the lines the page says it prints. In its ```sh blocks a line "$ COMMAND" is a command, the
// lines after it (up to the next command or the end of the block) its output, "..." standing
// for lines left out.
#include <cctype>
#include <fstream>
#include <ostream>
#include <sstream>
#include <vector>

#include "tool_testing.h"

using namespace coil::testing;

namespace {

struct DocCommand {
  int line = 0;  // of the command in the page, 1-based
  std::string command;
  std::vector<std::string> expected;  // output lines, "..." left out
};

std::vector<DocCommand> doc_commands() {
  std::vector<DocCommand> out;
  std::ifstream in(std::string(COIL_SOURCE_DIR) + "/docs/walkthrough.md");
  bool in_sh = false, in_command = false;  // in a ```sh block; after a command in it
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.rfind("```", 0) == 0) {
      in_sh = !in_sh && line == "```sh";
      in_command = false;
      continue;
    }
    if (!in_sh) continue;
    if (line.rfind("$ ", 0) == 0) {
      out.push_back({n, line.substr(2), {}});
      in_command = true;
    } else if (in_command && line != "...") {
      out.back().expected.push_back(line);
    }
  }
  return out;
}

// How gtest names a failing command (instead of dumping its bytes).
void PrintTo(const DocCommand& c, std::ostream* os) {
  *os << "docs/walkthrough.md:" << c.line << ": $ " << c.command;
}

// A command that runs one of the example programs, which a build without examples lacks.
bool needs_examples(const std::string& command) {
  return command.find("coil_example_") != std::string::npos;
}

class Walkthrough : public ::testing::TestWithParam<DocCommand> {};

std::string test_name(const ::testing::TestParamInfo<DocCommand>& info) {
  std::string name = "line" + std::to_string(info.param.line) + "_";
  for (char c : info.param.command) {
    if (name.size() > 60) break;
    name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  }
  return name;
}

}  // namespace

TEST_P(Walkthrough, CommandPrintsWhatThePageShows) {
  const DocCommand& c = GetParam();
  SCOPED_TRACE("docs/walkthrough.md:" + std::to_string(c.line) + ": $ " + c.command);
  if (needs_examples(c.command) && std::string(COIL_EXAMPLES_DIR).empty())
    GTEST_SKIP() << "the examples are not built (COIL_BUILD_EXAMPLES=OFF)";
  ShellResult r = run_shell(c.command);
  ASSERT_EQ(r.exit_code, 0) << "stdout:\n" << r.out << "\nstderr:\n" << r.err;
  std::string printed = r.out + "\n" + r.err;
  for (const std::string& line : c.expected)
    EXPECT_TRUE(has_line(printed, line)) << "the page shows a line the command did not print:\n"
                                         << line << "\nit printed:\n"
                                         << printed;
}

INSTANTIATE_TEST_SUITE_P(Docs, Walkthrough, ::testing::ValuesIn(doc_commands()), test_name);

// The page has commands to check: a change to its conventions must not silently check nothing.
TEST(WalkthroughPage, HasCommandsForEveryTool) {
  std::vector<DocCommand> commands = doc_commands();
  std::string all;
  size_t with_output = 0;
  for (const DocCommand& c : commands) {
    all += c.command + "\n";
    with_output += !c.expected.empty();
  }
  for (const char* cmd :
       {"coil print ", "coil passes ", "coil lower ", "coil codegen ", "coil run ", "coil explain ",
        "coil_example_sin_cos", "coil_example_matmul_softmax", "coil_example_toy_model"})
    EXPECT_NE(all.find(cmd), std::string::npos) << "the walkthrough runs no '" << cmd << "'";
  EXPECT_EQ(with_output, commands.size()) << "every command shows some of its output";
}
