#include "debug/debug_dir.h"

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>

#include <coil/error.h>

#include "support/subprocess.h"
#include "support/config.h"

namespace coil::debug {

namespace fs = std::filesystem;

namespace {

bool option_on(const CompileOptions& o, const char* key) {
  auto it = o.options.find(key);
  if (it == o.options.end()) return false;
  const bool* b = std::get_if<bool>(&it->second);  // validated as a bool by coil::compile
  return b && *b;
}

// One name per process, taken at the first compile that writes a folder, so every graph of
// a run lands side by side (even when a test points COIL_DEBUG_DIR elsewhere).
const std::string& run_name() {
  static const std::string name = [] {
    std::time_t now = std::time(nullptr);
    std::tm local{};
    localtime_r(&now, &local);
    char date[32];
    std::strftime(date, sizeof date, "%Y_%m_%d_%H_%M_%S", &local);
    return "run_" + std::string(date) + "-pid_" + std::to_string(::getpid());
  }();
  return name;
}

fs::path root() {
  const std::optional<std::string> dir = config::text(config::Var::DebugDir);
  return dir ? fs::path(*dir) : fs::path("coil_compile_debug");
}

// Letters, digits, '_', '-' and '.' only: a function's name may hold anything.
std::string safe(const std::string& name) {
  std::string out;
  for (char c : name)
    out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ? c : '_';
  return out.empty() ? "_" : out;
}

// Says once per run folder where the files go: the user asked for them and must find them.
void announce(const fs::path& run) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(run.string()).second)
    std::cerr << "coil: writing the compile debug folder to " << run.string() << "\n";
}

std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    fs::path candidate = fs::path(dir.empty() ? "." : dir) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  return "";
}

}  // namespace

DebugSettings debug_settings(const CompileOptions& options) {
  DebugSettings s;
  bool env = config::flag(config::Var::CompileDebug);
  s.diagram = env || option_on(options, "trace.graph_diagram");
  s.folder = s.diagram || option_on(options, "trace.enabled");
  return s;
}

fs::path make_graph_dir(const std::string& name) {
  fs::path run = root() / run_name();
  std::error_code ec;
  fs::create_directories(run, ec);
  COIL_CHECK(!ec, "compile debug folder: cannot create '", run.string(), "': ", ec.message(),
             " (set COIL_DEBUG_DIR to a writable folder)");
  announce(run);
  std::string base = safe(name);
  for (int k = 0;; ++k) {
    fs::path dir = run / (k == 0 ? base : base + "-" + std::to_string(k));
    if (fs::create_directory(dir, ec)) return dir;
    COIL_CHECK(!ec, "compile debug folder: cannot create '", dir.string(), "': ", ec.message());
  }
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  COIL_CHECK(out.good(), "compile debug folder: cannot write '", path.string(), "'");
}

bool render_svg(const fs::path& dot_file) {
  std::string dot = find_on_path("dot");
  if (dot.empty()) {
    static std::once_flag warned;
    std::call_once(warned, [] {
      std::cerr << "coil: Graphviz's 'dot' is not on PATH: the debug folder holds "
                   "graph_diagram.dot only (install graphviz for the SVG)\n";
    });
    return false;
  }
  fs::path svg = fs::path(dot_file).replace_extension(".svg");
  try {
    support::ProcessOutput r =
        support::run_process({dot, "-Tsvg", dot_file.string(), "-o", svg.string()});
    if (r.status.ok()) return true;
    std::cerr << "coil: warning: '" << dot << " -Tsvg " << dot_file.string() << "' "
              << r.status.describe() << ":\n"
              << r.output;
  } catch (const Error& e) {
    std::cerr << "coil: warning: cannot run Graphviz for the graph diagram: " << e.what() << "\n";
  }
  return false;
}

}  // namespace coil::debug
