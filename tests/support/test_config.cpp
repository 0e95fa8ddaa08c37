// The configuration table (src/support/config.h): in Var's order, every name a COIL_ variable
// once, each documented in docs/config.md; flags, texts and empty values read as it says.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <set>
#include <sstream>

#include "support/config.h"

using namespace coil;

TEST(Config, TheTableIsInOrderAndDocumented) {
  std::ifstream in(std::string(COIL_SOURCE_DIR) + "/docs/config.md");
  std::stringstream doc;
  doc << in.rdbuf();
  std::set<std::string> names;
  for (size_t k = 0; k < config::variables().size(); ++k) {
    const config::Variable& v = config::variables()[k];
    SCOPED_TRACE(v.name);
    EXPECT_EQ(&config::variable(v.var), &v);
    EXPECT_EQ(std::string(v.name).rfind("COIL_", 0), 0u);
    EXPECT_TRUE(names.insert(v.name).second);
    EXPECT_NE(doc.str().find(std::string("`") + v.name + "`"), std::string::npos)
        << "docs/config.md does not explain it";
    if (v.kind == config::Kind::Flag) {
      EXPECT_TRUE(std::string(v.fallback) == "on" || std::string(v.fallback) == "off");
    }
  }
}

TEST(Config, ValuesAreReadAsTheTableSays) {
  const config::Var sync = config::Var::CudaSync, cache = config::Var::GraphCache;
  unsetenv("COIL_CUDA_SYNC");
  unsetenv("COIL_GRAPH_CACHE");
  EXPECT_FALSE(config::flag(sync));  // their fallbacks
  EXPECT_TRUE(config::flag(cache));
  for (const char* off : {"0", "false", "off"}) {
    setenv("COIL_GRAPH_CACHE", off, 1);
    EXPECT_FALSE(config::flag(cache)) << off;
  }
  for (const char* on : {"1", "true", "yes"}) {
    setenv("COIL_CUDA_SYNC", on, 1);
    EXPECT_TRUE(config::flag(sync)) << on;
  }
  setenv("COIL_CUDA_SYNC", "", 1);  // empty: as unset
  EXPECT_FALSE(config::flag(sync));
  unsetenv("COIL_CUDA_SYNC");
  unsetenv("COIL_GRAPH_CACHE");

  const config::Var seed = config::Var::SeedDir;
  const char* before = getenv("COIL_SEED_DIR");
  const std::string saved = before ? before : "";
  setenv("COIL_SEED_DIR", "", 1);
  EXPECT_EQ(config::text(seed), std::nullopt);
  EXPECT_EQ(config::value(seed), std::string());  // set and empty: no seed cache
  setenv("COIL_SEED_DIR", "/tmp/seed", 1);
  EXPECT_EQ(config::text(seed), std::string("/tmp/seed"));
  if (before)
    setenv("COIL_SEED_DIR", saved.c_str(), 1);
  else
    unsetenv("COIL_SEED_DIR");
}
