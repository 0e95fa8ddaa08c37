// Every environment variable coil reads, in one table that says what each does (as Inductor's
// config.py): `coil config` prints them with their values, docs/config.md explains them, and no
// other file of src/ reads a COIL_ variable (scripts/check_layers.sh checks).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace coil::config {

enum class Var : uint8_t {
  // watching a compile
  Logs,
  LogFile,
  TraceFile,
  DebugDir,
  CompileDebug,
  // caches
  CacheDir,
  CacheMaxBytes,
  SeedDir,
  GraphCache,
  CompileThreads,
  // compiling
  Disable,
  SuppressErrors,
  Cxx,
  CxxFlags,
  MatmulLibrary,
  // the GPU
  CudaArch,
  CudaSync,
  CudaNoCache,
  CudaPdl,
  KernelLaunch,
};

// How a variable's text is read: a flag is on unless it is "0", "false" or "off".
enum class Kind : uint8_t { Flag, Text, Number };

struct Variable {
  Var var;
  const char* name;  // "COIL_LOGS"
  Kind kind;
  const char* fallback;  // what holds where it is unset ("on" / "off" for a flag)
  const char* what;      // one line
};

// The table, in Var's order.
const std::vector<Variable>& variables();
const Variable& variable(Var v);

// The variable's text now, nullopt where it is unset or empty. Read at every call: tests and
// tools set variables while the process runs (callers that read one per launch keep it).
std::optional<std::string> text(Var v);
// The same with an empty value kept: COIL_SEED_DIR= (set, empty) turns the seed cache off.
std::optional<std::string> value(Var v);
// A flag's value now: its fallback where unset or empty.
bool flag(Var v);

}  // namespace coil::config
