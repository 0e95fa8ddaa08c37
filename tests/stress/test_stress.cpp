// The short version of scripts/stress.sh (docs/reliability.md): processes sharing one empty
// cache, processes killed mid-compile and damaged libraries followed by a clean run, a function
// recompiling in a loop with flat memory, and fuzzed graph files.
#include <gtest/gtest.h>

#include "testing.h"
#include "tools/tool_testing.h"

namespace coil::testing {
namespace {

TEST(Stress, QuickVersionOfTheStressScript) {
  ShellResult r = run_shell("bash scripts/stress.sh quick");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_CONTAINS(r.out, "all processes: 3 graphs: 4 of 4 match eager");
  EXPECT_CONTAINS(r.out, "temporary files left: 0");
  EXPECT_CONTAINS(r.out, "clean run: graphs: 4 of 4 match eager");
  EXPECT_CONTAINS(r.out, "stress: all passed");
}

}  // namespace
}  // namespace coil::testing
