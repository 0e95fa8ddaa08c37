// The JIT's failures: each is a coil::Error that says what went wrong and what to do.
#include <fstream>

#include "jit_testing.h"
#include "testing.h"

using namespace coil;
using coil::testing::JitTest;

TEST_F(JitTest, BrokenSourceNamesTheFileAndShowsTheCompilerMessage) {
  const std::string source = "extern \"C\" int broken() { return undeclared_name; }\n";
  try {
    cpu::load_cpp(source, "broken_kernel");
    FAIL() << "expected coil::Error";
  } catch (const Error& e) {
    std::string message = e.what();
    EXPECT_NE(message.find("broken_kernel"), std::string::npos) << message;
    EXPECT_NE(message.find("undeclared_name"), std::string::npos) << message;
    // The source is kept where the message says.
    size_t at = message.find(cache_dir_);
    ASSERT_NE(at, std::string::npos) << message;
    std::string path = message.substr(at, message.find(".cpp", at) + 4 - at);
    std::ifstream kept(path);
    EXPECT_TRUE(kept.good()) << path;
  }
  // A failure is not remembered as a result: the next load tries (and fails) again.
  EXPECT_COIL_ERROR(cpu::load_cpp(source, "broken_kernel"), "undeclared_name");
  EXPECT_EQ(jit::stats().compiles, 2);
}

TEST_F(JitTest, MissingSymbolNamesItAndTheLibrary) {
  auto lib = cpu::load_cpp("extern \"C\" int present() { return 1; }", "present");
  EXPECT_COIL_ERROR(lib->symbol("absent"), "absent");
  EXPECT_COIL_ERROR(lib->symbol("absent"), lib->path());
}

TEST_F(JitTest, MissingCompilerSaysToSetCoilCxx) {
  setenv("COIL_CXX", "/nonexistent/dir with space/c++", 1);
  EXPECT_COIL_ERROR(cpu::load_cpp("extern \"C\" int f() { return 1; }", "f"), "COIL_CXX");
}
