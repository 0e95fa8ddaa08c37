// Runs a program directly (posix_spawn, no shell), so arguments are passed as they are: paths
// with spaces or quotes need no escaping and nothing is interpreted by /bin/sh.
#pragma once

#include <string>
#include <vector>

namespace coil::support {

struct ExitStatus {
  int code = 0;    // the exit code, when the program exited
  int signal = 0;  // the signal that killed it, or 0
  bool ok() const { return code == 0 && signal == 0; }
  std::string describe() const;  // "exited with status 1", "was killed by signal 9 (Killed)"
};

struct ProcessOutput {
  ExitStatus status;
  std::string output;  // stdout and stderr, interleaved as the program wrote them
};

// Runs argv[0] (a path, not searched on PATH) with stdin from /dev/null and waits for it.
// Throws coil::Error when the program cannot be started.
ProcessOutput run_process(const std::vector<std::string>& argv);

}  // namespace coil::support
