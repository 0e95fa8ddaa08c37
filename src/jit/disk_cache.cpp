#include "jit/disk_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <mutex>
#include <set>
#include <vector>

#include <coil/error.h>

#include "debug/log.h"
#include "support/config.h"

namespace coil::jit {

namespace {
constexpr const char* kFix = "set COIL_CACHE_DIR to a writable directory";

// "\ncoil-seal <size: 16 hex> <xxh64: 16 hex>\n": a line of its own, so that a sealed text file
// still reads as text.
constexpr std::string_view kSealTag = "\ncoil-seal ";
constexpr size_t kSealSize = kSealTag.size() + 16 + 1 + 16 + 1;

std::string seal_of(std::string_view contents) {
  char line[kSealSize + 1];
  std::snprintf(line, sizeof line, "%s%016" PRIx64 " %016" PRIx64 "\n", kSealTag.data(),
                static_cast<uint64_t>(contents.size()),
                static_cast<uint64_t>(XXH3_64bits(contents.data(), contents.size())));
  return std::string(line, kSealSize);
}

// Why `bytes` is not a sealed file's bytes, or "" when it is.
std::string seal_problem(std::string_view bytes) {
  if (bytes.size() < kSealSize ||
      bytes.substr(bytes.size() - kSealSize, kSealTag.size()) != kSealTag)
    return "it has no seal (" + std::to_string(bytes.size()) +
           " bytes: truncated, or written by another program)";
  std::string_view contents = bytes.substr(0, bytes.size() - kSealSize);
  if (seal_of(contents) == bytes.substr(contents.size())) return "";
  uint64_t size = 0;
  std::sscanf(bytes.data() + contents.size() + kSealTag.size(), "%16" SCNx64, &size);
  if (size != contents.size())
    return "its seal is for " + std::to_string(size) + " bytes, it holds " +
           std::to_string(contents.size());
  return "its checksum does not match its contents";
}

// Creates `dir` and proves it writable with a temporary file: "" when usable, else why not.
std::string unusable_because(const std::string& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return error.message();
  std::string probe = dir + "/.probe.XXXXXX";
  std::vector<char> buffer(probe.begin(), probe.end());
  buffer.push_back('\0');
  int fd = ::mkstemp(buffer.data());
  if (fd < 0) return std::strerror(errno);
  ::close(fd);
  ::unlink(buffer.data());
  return "";
}

std::string configured_root() {
  if (std::optional<std::string> dir = config::text(config::Var::CacheDir)) return *dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/coil";
  if (const char* home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/coil";
  return "";
}

// A folder of this process's own, removed at exit. (Never destroyed: the exit handler that
// removes it runs after static destructors would have.)
std::string private_root() {
  static const std::string& root = *new std::string([] {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/coil-cache-XXXXXX";
    std::vector<char> buffer(pattern.begin(), pattern.end());
    buffer.push_back('\0');
    COIL_CHECK(::mkdtemp(buffer.data()), "jit: no usable code cache folder, and no temporary one (",
               std::strerror(errno), " creating '", pattern, "'); ", kFix);
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(private_root(), ignored);
    });
    return std::string(buffer.data());
  }());
  return root;
}
}  // namespace

std::string cache_root() {
  static std::mutex mutex;
  static std::string last_configured = "\n", last_root;  // tests change the environment
  std::string configured = configured_root();
  std::lock_guard<std::mutex> lock(mutex);
  if (configured == last_configured) return last_root;
  std::string why =
      configured.empty() ? "neither COIL_CACHE_DIR nor HOME is set" : unusable_because(configured);
  std::string root = configured;
  if (!why.empty()) {
    root = private_root();
    debug::warn("cannot use the code cache folder '" + configured + "' (" + why +
                "); this process caches its code in '" + root + "' instead, removed at exit; " +
                kFix);
  }
  last_configured = configured;
  last_root = root;
  return root;
}

CacheEntry cache_entry(const std::string& key, const std::string& area) {
  COIL_ASSERT(key.size() > 2, "cache key '", key, "'");
  return {cache_root() + (area.empty() ? "" : "/" + area) + "/" + key.substr(0, 2), key};
}

CacheEntry open_cache_entry(const std::string& key, const std::string& area) {
  CacheEntry entry = cache_entry(key, area);
  std::error_code error;
  std::filesystem::create_directories(entry.dir, error);
  COIL_CHECK(!error, "jit: cannot create the code cache directory '", entry.dir, "' (",
             error.message(), "); ", kFix);
  return entry;
}

TempFile::TempFile(const std::string& dir, const std::string& stem, const std::string& suffix) {
  std::string name = dir + "/" + stem + ".tmp.XXXXXX" + suffix;
  std::vector<char> buffer(name.begin(), name.end());
  buffer.push_back('\0');
  fd_ = ::mkstemps(buffer.data(), static_cast<int>(suffix.size()));
  COIL_CHECK(fd_ >= 0, "jit: cannot write to the code cache directory '", dir, "' (",
             std::strerror(errno), "); ", kFix);
  path_ = buffer.data();
}

TempFile::~TempFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(path_.c_str());
}

void TempFile::write(const std::string& contents) {
  COIL_ASSERT(fd_ >= 0, "write to ", path_, " after commit");
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = ::write(fd_, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    COIL_CHECK(n > 0, "jit: cannot write '", path_, "' (", std::strerror(errno),
               "); free some disk space or ", kFix);
    done += static_cast<size_t>(n);
  }
}

void TempFile::seal() {
  // Whoever wrote the file may have replaced it (a linker writes a new file): reopened by name.
  std::optional<std::string> contents = read_file(path_);
  COIL_CHECK(contents, "jit: cannot read back '", path_, "' (", std::strerror(errno), "); ", kFix);
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  COIL_CHECK(fd_ >= 0, "jit: cannot write '", path_, "' (", std::strerror(errno), "); ", kFix);
  write(seal_of(*contents));
}

void TempFile::commit(const std::string& final_path) {
  int closed = ::close(fd_);
  fd_ = -1;
  COIL_CHECK(closed == 0, "jit: cannot write '", path_, "' (", std::strerror(errno), "); ", kFix);
  COIL_CHECK(std::rename(path_.c_str(), final_path.c_str()) == 0, "jit: cannot rename '", path_,
             "' to '", final_path, "' (", std::strerror(errno), "); ", kFix);
  committed_ = true;
}

void write_file_atomically(const std::string& path, const std::string& contents, bool sealed) {
  size_t slash = path.rfind('/');
  COIL_ASSERT(slash != std::string::npos, "'", path, "' has no directory");
  TempFile temp(path.substr(0, slash), path.substr(slash + 1), "");
  temp.write(contents);
  if (sealed) temp.write(seal_of(contents));
  temp.commit(path);
}

SealedFile read_sealed(const std::string& path) {
  SealedFile out;
  // Missing only when the open finds no file: asking afterwards whether it exists would call a
  // file another process renamed in just then damaged, and set a good entry aside.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return out;
  std::optional<std::string> bytes;
  if (fd >= 0) {
    bytes.emplace();
    char buffer[1 << 16];
    for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) != 0;) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        bytes.reset();
        break;
      }
      bytes->append(buffer, static_cast<size_t>(n));
    }
    ::close(fd);
  }
  if (!bytes) {
    out.state = SealedFile::State::damaged;
    out.why = "it cannot be read";
    return out;
  }
  out.why = seal_problem(*bytes);
  out.state = out.why.empty() ? SealedFile::State::ok : SealedFile::State::damaged;
  if (out.state == SealedFile::State::ok) {
    bytes->resize(bytes->size() - kSealSize);
    out.contents = std::move(*bytes);
  }
  return out;
}

size_t sealed_size(const std::string& bytes) {
  return seal_problem(bytes).empty() ? bytes.size() - kSealSize : bytes.size();
}

void set_aside(const std::string& path, const std::string& why) {
  std::string aside = path + ".damaged";
  const bool moved = std::rename(path.c_str(), aside.c_str()) == 0;
  std::string what =
      "the cache file '" + path + "' is damaged: " + why + "; " +
      (moved ? "moved to '" + aside + "' and built again"
             : std::string("cannot move it aside (") + std::strerror(errno) + "); built again");
  debug::log("cache", "jit", what);
  static std::mutex mutex;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mutex);
  if (warned.insert(path).second) debug::warn(what);
}

void touch(const std::string& path) { ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

namespace {
// Leases held by this process. Each holds a file descriptor; past this many a lease holds
// nothing, so that a program with many modules keeps its descriptors (pruning a loaded library
// without a lease costs a recompile in a later process, never a crash: the mapping stays).
std::atomic<int> g_leases{0};
constexpr int kMaxLeases = 256;
}  // namespace

Lease::Lease(const std::string& path) {
  if (g_leases.fetch_add(1) >= kMaxLeases) {
    g_leases.fetch_sub(1);
    return;
  }
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ >= 0 && ::flock(fd_, LOCK_SH | LOCK_NB) != 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (fd_ < 0) g_leases.fetch_sub(1);
}

Lease::~Lease() {
  if (fd_ < 0) return;
  ::close(fd_);
  g_leases.fetch_sub(1);
}

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

std::string file_identity(const std::string& path) {
  std::error_code error;
  std::filesystem::path real = std::filesystem::canonical(path, error);
  struct stat st;
  if (error || ::stat(real.c_str(), &st) != 0) return "";
  return real.string() + " " + std::to_string(st.st_size) + " " +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace coil::jit
