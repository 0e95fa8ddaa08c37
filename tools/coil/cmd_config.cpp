// coil config: every environment variable coil reads (src/support/config.h), with its value in
// this process or what holds where it is unset, and what it does (docs/config.md says more).
#include <cstdio>
#include <iostream>

#include "commands.h"
#include "support/config.h"

namespace coil::tool {

namespace {

int run_config(const Args&) {
  for (const config::Variable& v : config::variables()) {
    const std::optional<std::string> value = config::value(v.var);
    const std::string shown = value              ? "=" + *value
                              : *v.fallback == 0 ? std::string(" unset")
                                                 : std::string(" unset: ") + v.fallback;
    std::cout << v.name << shown << "\n    " << v.what << "\n";
  }
  return 0;
}

}  // namespace

Command config_command() {
  return {"config",
          "list the environment variables coil reads",
          "coil config",
          "Every COIL_ variable: its value here (or, unset, what holds instead) and what it\n"
          "does. docs/config.md explains each.",
          {},
          run_config,
          ""};
}

}  // namespace coil::tool
