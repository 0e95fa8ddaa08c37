#include "support/subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

#include <coil/error.h>

namespace coil::support {

namespace {

// Closes a file descriptor on every path out of run_process.
struct FdGuard {
  int fd;
  ~FdGuard() { ::close(fd); }
};

// The output goes to an anonymous in-memory file rather than a pipe: the child can write any
// amount without us reading concurrently, and there is no temporary file to clean up.
int make_output_file() {
  int fd = ::memfd_create("coil-process-output", MFD_CLOEXEC);
  COIL_CHECK(fd >= 0, "jit: cannot create a file for a compiler's output (memfd_create: ",
             std::strerror(errno), ")");
  return fd;
}

std::string read_from_start(int fd) {
  std::string text;
  if (::lseek(fd, 0, SEEK_SET) < 0) return text;
  char buffer[4096];
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof buffer)) > 0 || (n < 0 && errno == EINTR)) {
    if (n > 0) text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

pid_t spawn(const std::vector<std::string>& argv, int output_fd) {
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, output_fd, 1);
  ::posix_spawn_file_actions_adddup2(&actions, output_fd, 2);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  ::posix_spawn_file_actions_destroy(&actions);
  COIL_CHECK(rc == 0, "jit: cannot start '", argv[0], "': ", std::strerror(rc));
  return pid;
}

ExitStatus wait_for(pid_t pid, const std::string& program) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    COIL_CHECK(errno == EINTR, "jit: lost track of '", program,
               "' (waitpid: ", std::strerror(errno), "); is SIGCHLD ignored by the host program?");
  }
  ExitStatus result;
  if (WIFEXITED(status)) result.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace

std::string ExitStatus::describe() const {
  if (signal != 0)
    return "was killed by signal " + std::to_string(signal) + " (" + strsignal(signal) + ")";
  return "exited with status " + std::to_string(code);
}

ProcessOutput run_process(const std::vector<std::string>& argv) {
  COIL_ASSERT(!argv.empty());
  FdGuard output{make_output_file()};
  pid_t pid = spawn(argv, output.fd);
  ProcessOutput result;
  result.status = wait_for(pid, argv[0]);
  result.output = read_from_start(output.fd);
  return result;
}

}  // namespace coil::support
