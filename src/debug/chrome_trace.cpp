#include "debug/chrome_trace.h"
#include "support/config.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>

#include <nlohmann/json.hpp>

#include <coil/error.h>

namespace coil::debug {

namespace {

using nlohmann::json;

// Timestamps count from the library's load, so the compiles of one process share a time axis.
const Clock::time_point g_epoch = Clock::now();

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

int64_t thread_id() { return static_cast<int64_t>(::syscall(SYS_gettid)); }

json args_json(const Args& args) {
  json out = json::object();
  for (const auto& [key, value] : args) std::visit([&](const auto& v) { out[key] = v; }, value);
  return out;
}

// The process and thread names the viewer shows on its tracks.
json metadata(int64_t pid, int64_t tid) {
  return json::array({{{"name", "process_name"},
                       {"ph", "M"},
                       {"pid", pid},
                       {"tid", tid},
                       {"args", {{"name", "coil (pid " + std::to_string(pid) + ")"}}}},
                      {{"name", "thread_name"},
                       {"ph", "M"},
                       {"pid", pid},
                       {"tid", tid},
                       {"args", {{"name", "compile thread " + std::to_string(tid)}}}}});
}

void append_events(const Timeline& t, int64_t pid, int64_t tid, json& events) {
  for (const SpanRecord& s : t.spans()) {
    json args = args_json(s.args);
    if (!s.label.empty()) args["stage"] = s.label;
    events.push_back({{"name", s.name},
                      {"cat", "coil"},
                      {"ph", "X"},
                      {"ts", micros(s.start - g_epoch)},
                      {"dur", micros(s.end - s.start)},
                      {"pid", pid},
                      {"tid", tid},
                      {"args", std::move(args)}});
  }
}

std::string document(const json& events) {
  return json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump(1) + "\n";
}

struct TraceFile {
  std::mutex mutex;
  std::string path;  // the file the events below belong to
  json events = json::array();
};
TraceFile& trace_file() {
  static TraceFile f;
  return f;
}

}  // namespace

std::string chrome_trace(const Timeline& t) {
  int64_t pid = ::getpid(), tid = thread_id();
  json events = metadata(pid, tid);
  append_events(t, pid, tid, events);
  return document(events);
}

void add_to_trace_file(const Timeline& t) {
  const std::optional<std::string> file = config::text(config::Var::TraceFile);
  if (!file) return;
  const std::string& env = *file;
  TraceFile& f = trace_file();
  std::lock_guard<std::mutex> lock(f.mutex);
  int64_t pid = ::getpid(), tid = thread_id();
  if (f.path != env) {  // a new file (tests change the variable): start it afresh
    f.path = env;
    f.events = metadata(pid, tid);
  } else {
    json names = metadata(pid, tid);  // a thread not seen before gets its name
    if (std::find(f.events.begin(), f.events.end(), names[1]) == f.events.end())
      f.events.push_back(names[1]);
  }
  append_events(t, pid, tid, f.events);
  std::string tmp = f.path + ".tmp" + std::to_string(pid);
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << document(f.events);
    COIL_CHECK(out.good(), "COIL_TRACE_FILE: cannot write '", tmp, "'");
  }
  COIL_CHECK(std::rename(tmp.c_str(), f.path.c_str()) == 0, "COIL_TRACE_FILE: cannot write '",
             f.path, "'");
}

}  // namespace coil::debug
