// COIL_LOGS: named log artifacts, as TORCH_LOGS. `COIL_LOGS=recompiles,graph_breaks` turns
// those on; output goes to stderr or to the file named by COIL_LOG_FILE. With nothing set,
// coil prints nothing and a check costs one load.
#pragma once

#include <string>
#include <vector>

namespace coil::debug {

// Every artifact name with its one-line description (COIL_LOGS=help prints them).
struct Artifact {
  const char* name;
  const char* help;
};
const std::vector<Artifact>& artifacts();

bool log_enabled(const char* artifact);
// Writes `text` (one or more lines), each line prefixed with "[artifact] prefix ".
void log(const char* artifact, const std::string& prefix, const std::string& text);
// Prints "coil: warning: <text>" to stderr, whatever COIL_LOGS says: for what a user should
// know even when nothing is logged (a damaged cache entry, a compile that fell back to eager).
void warn(const std::string& text);
// Re-reads COIL_LOGS / COIL_LOG_FILE (tests change them; compiler_reset calls this).
void reload_log_settings();

}  // namespace coil::debug
