// Compiled code on disk: <root>/<first 2 hex of key>/<key>.so, with <key>.cpp beside it for
// people who want to read what ran (and <key>.log when the compiler failed on it); compiled
// graphs (graph_cache.h) in <root>/graphs/<first 2 hex of key>/<key>.json and <key>.cpp.
//
// Every file is written under a unique temporary name in its final directory and renamed into
// place: readers never see half a file, and processes that build the same key at once all
// succeed (the last rename replaces an identical file).
#pragma once

#include <optional>
#include <string>

namespace coil::jit {

// $COIL_CACHE_DIR, else $XDG_CACHE_HOME/coil, else $HOME/.cache/coil.
std::string cache_root();

// Where one key's files live: <root>[/<area>]/<first 2 hex of key>.
struct CacheEntry {
  std::string dir;
  std::string key;
  std::string path(const std::string& extension) const { return dir + "/" + key + extension; }
};
CacheEntry cache_entry(const std::string& key, const std::string& area = "");
// The same, with its directory created when missing (coil::Error naming it otherwise).
CacheEntry open_cache_entry(const std::string& key, const std::string& area = "");

bool file_exists(const std::string& path);

// A uniquely named empty file `<dir>/<stem>.tmp.XXXXXX<suffix>`, removed when the TempFile
// goes unless commit() renamed it to its final name first.
class TempFile {
 public:
  TempFile(const std::string& dir, const std::string& stem, const std::string& suffix);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  const std::string& path() const { return path_; }
  void write(const std::string& contents);
  void commit(const std::string& final_path);

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `contents` to `path` through a TempFile in the same directory.
void write_file_atomically(const std::string& path, const std::string& contents);

// A file's identity without reading it: the path it resolves to, its size and its modification
// time; "" when it cannot be read. Rebuilding or reinstalling the file changes it.
std::string file_identity(const std::string& path);

// A file's whole contents, or nullopt when it cannot be opened.
std::optional<std::string> read_file(const std::string& path);

}  // namespace coil::jit
