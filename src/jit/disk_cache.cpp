#include "jit/disk_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

#include <coil/error.h>

namespace coil::jit {

namespace {
constexpr const char* kFix = "set COIL_CACHE_DIR to a writable directory";
}

std::string cache_root() {
  if (const char* dir = std::getenv("COIL_CACHE_DIR"); dir && *dir) return dir;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/coil";
  const char* home = std::getenv("HOME");
  COIL_CHECK(home && *home, "jit: cannot place the code cache: HOME is not set; ", kFix);
  return std::string(home) + "/.cache/coil";
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

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
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

void TempFile::commit(const std::string& final_path) {
  int closed = ::close(fd_);
  fd_ = -1;
  COIL_CHECK(closed == 0, "jit: cannot write '", path_, "' (", std::strerror(errno), "); ", kFix);
  COIL_CHECK(std::rename(path_.c_str(), final_path.c_str()) == 0, "jit: cannot rename '", path_,
             "' to '", final_path, "' (", std::strerror(errno), "); ", kFix);
  committed_ = true;
}

void write_file_atomically(const std::string& path, const std::string& contents) {
  size_t slash = path.rfind('/');
  COIL_ASSERT(slash != std::string::npos, "'", path, "' has no directory");
  TempFile temp(path.substr(0, slash), path.substr(slash + 1), "");
  temp.write(contents);
  temp.commit(path);
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
