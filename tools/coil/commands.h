// The sub-commands of `coil`, one file each (cmd_*.cpp): each returns its description, options
// and the function that runs it.
#pragma once

#include "cli.h"

namespace coil::tool {

Command print_command();    // cmd_print.cpp
Command passes_command();   // cmd_passes.cpp
Command lower_command();    // cmd_lower.cpp
Command codegen_command();  // cmd_codegen.cpp
Command run_command();      // cmd_run.cpp
Command explain_command();  // cmd_explain.cpp
Command cache_command();    // cmd_cache.cpp
Command config_command();   // cmd_config.cpp

}  // namespace coil::tool
