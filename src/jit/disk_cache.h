// Compiled code on disk: <root>/<first 2 hex of key>/<key>.so, with <key>.cpp beside it for
// people who want to read what ran (and <key>.log when the compiler failed on it); compiled
// graphs (graph_cache.h) in <root>/graphs/<first 2 hex of key>/<key>.json and <key>.src.
//
// The cache never makes a program fail:
// - Every file is written under a unique temporary name in its final directory and renamed into
//   place: readers never see half a file, and processes that build the same key at once all
//   succeed (the last rename replaces an equivalent file).
// - Every file coil reads back carries a seal, a last line with the size and checksum of what
//   precedes it, written before the rename. A file whose seal does not match (truncated, filled
//   with other bytes, left by an older coil) is damaged: it is set aside as <file>.damaged with
//   one warning, and the caller compiles again.
// - A root that cannot be used (not a folder, not writable) is replaced, with a warning, by a
//   private temporary folder removed at exit.
// - Hits touch their file, so the least recently used entries go first when cache_prune.h
//   keeps the cache under its size limit; a loaded binary holds a shared lock (a Lease) that
//   pruning respects.
#pragma once

#include <optional>
#include <string>

namespace coil::jit {

// $COIL_CACHE_DIR, else $XDG_CACHE_HOME/coil, else $HOME/.cache/coil; when that cannot be
// created or written, a private temporary folder (with a warning, once per configured root).
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
  // Appends the seal of what the file holds now (written through path(), by anyone).
  void seal();
  void commit(const std::string& final_path);

 private:
  std::string path_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `contents` to `path` through a TempFile in the same directory; `sealed` appends the
// seal, for files coil reads back.
void write_file_atomically(const std::string& path, const std::string& contents,
                           bool sealed = false);

// A sealed file read back: its contents without the seal, or why it cannot be trusted.
struct SealedFile {
  enum class State { missing, ok, damaged };
  State state = State::missing;
  std::string contents;
  std::string why;  // for damaged: "truncated: 812 of 16400 bytes", ...
};
SealedFile read_sealed(const std::string& path);
// The bytes a sealed file's contents end at (its size less the seal), for loaders that read
// the file themselves; the whole size when it carries no seal.
size_t sealed_size(const std::string& bytes);

// Moves a damaged entry's file aside (<path>.damaged), warns once per file and logs it to
// COIL_LOGS=cache, so that the caller can build it again.
void set_aside(const std::string& path, const std::string& why);

// Marks `path` as used now (its modification time), for least-recently-used pruning.
void touch(const std::string& path);

// A shared lock on a cache file, held while its contents are in use (a loaded library), so
// that pruning in any process leaves the file alone. Holds nothing when the file cannot be
// opened.
class Lease {
 public:
  explicit Lease(const std::string& path);
  ~Lease();
  Lease(const Lease&) = delete;
  Lease& operator=(const Lease&) = delete;

 private:
  int fd_ = -1;
};

// A file's identity without reading it: the path it resolves to, its size and its modification
// time; "" when it cannot be read. Rebuilding or reinstalling the file changes it.
std::string file_identity(const std::string& path);

// A file's whole contents, or nullopt when it cannot be opened.
std::optional<std::string> read_file(const std::string& path);

}  // namespace coil::jit
