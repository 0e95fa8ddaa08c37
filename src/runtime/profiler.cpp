// coil::Profiler (include/coil/profiler.h) and the scopes that feed it (runtime/profiler.h).
#include "runtime/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>

#include <coil/cuda.h>
#include <coil/error.h>
#include <coil/profiler.h>

namespace coil {

namespace {

using Clock = std::chrono::steady_clock;

struct Record {
  const char* kind = "";
  std::string name;
  Device device;
  Clock::time_point begin;
  double host_ms = -1;                     // the CPU's time, once the work ended
  std::optional<cuda::Event> start, stop;  // a GPU's marks around the work
};

}  // namespace

struct Profiler::Recording {
  Clock::time_point begin = Clock::now();
  std::mutex mutex;
  std::deque<Record> records;  // addresses stay put as it grows
};

namespace {

std::atomic<Profiler::Recording*> active{nullptr};
// How many scopes this thread is inside: only the outermost records.
thread_local int depth = 0;

}  // namespace

bool ProfileScope::recording() { return active.load(std::memory_order_relaxed) != nullptr; }

void ProfileScope::begin(const char* kind, std::string_view name, const Device& device) {
  counted_ = true;
  if (depth++ > 0) return;
  Profiler::Recording* r = active.load(std::memory_order_acquire);
  if (!r) return;
  Record* rec;
  {
    std::lock_guard<std::mutex> lock(r->mutex);
    rec = &r->records.emplace_back();
  }
  rec->kind = kind;
  rec->name.assign(name);
  rec->device = device;
  if (device.is_cuda()) {
    rec->start.emplace(true, device.index);
    rec->stop.emplace(true, device.index);
    rec->start->record();
  } else {
    rec->begin = Clock::now();
  }
  state_ = rec;
}

void ProfileScope::end() {
  --depth;
  if (!state_) return;
  Record& rec = *static_cast<Record*>(state_);
  if (rec.stop)
    rec.stop->record();
  else
    rec.host_ms = std::chrono::duration<double, std::milli>(Clock::now() - rec.begin).count();
}

Profiler::Profiler() : recording_(std::make_unique<Recording>()) {
  Recording* none = nullptr;
  COIL_CHECK(active.compare_exchange_strong(none, recording_.get()),
             "Profiler: another profiler is recording; one records at a time (let the other "
             "one go first, or ask it for its rows)");
}

Profiler::~Profiler() {
  Recording* mine = recording_.get();
  active.compare_exchange_strong(mine, nullptr);
}

std::vector<Profiler::Row> Profiler::rows() {
  std::map<std::tuple<std::string, std::string, std::string>, Row> sums;
  for (Span& s : timeline()) {
    Row& row = sums[{s.name, s.kind, s.device}];
    row.name = std::move(s.name);
    row.kind = std::move(s.kind);
    row.device = std::move(s.device);
    row.calls += 1;
    row.total_ms += s.end_ms - s.start_ms;
  }
  std::vector<Row> out;
  for (auto& [key, row] : sums) out.push_back(std::move(row));
  std::stable_sort(out.begin(), out.end(),
                   [](const Row& a, const Row& b) { return a.total_ms > b.total_ms; });
  return out;
}

std::vector<Profiler::Span> Profiler::timeline() {
  Recording* mine = recording_.get();
  active.compare_exchange_strong(mine, nullptr);
  auto ms_since = [](Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  std::map<int, const cuda::Event*> first;  // each device's first mark: its clock's zero
  std::vector<Span> out;
  for (Record& rec : recording_->records) {
    Span s{rec.name, rec.kind, rec.device.str()};
    if (rec.stop) {
      rec.stop->synchronize();
      const cuda::Event*& zero = first[rec.device.index];
      if (!zero) zero = &*rec.start;
      s.start_ms = zero->elapsed_time(*rec.start);
      s.end_ms = zero->elapsed_time(*rec.stop);
    } else {
      if (rec.host_ms < 0) continue;  // still running when recording stopped
      s.start_ms = ms_since(recording_->begin, rec.begin);
      s.end_ms = s.start_ms + rec.host_ms;
    }
    out.push_back(std::move(s));
  }
  return out;
}

void Profiler::export_chrome_trace(const std::string& path) {
  auto quoted = [](const std::string& text) {
    std::string q = "\"";
    for (char c : text) {
      if (c == '"' || c == '\\') q += '\\';
      if (static_cast<unsigned char>(c) >= 0x20) q += c;
    }
    return q + "\"";
  };
  std::string json = "{\"traceEvents\": [";
  char times[96];
  bool first = true;
  for (const Span& s : timeline()) {
    std::snprintf(times, sizeof times, "\"ts\": %.3f, \"dur\": %.3f", 1e3 * s.start_ms,
                  1e3 * (s.end_ms - s.start_ms));
    json += std::string(first ? "\n" : ",\n") + "{\"name\": " + quoted(s.name) +
            ", \"cat\": " + quoted(s.kind) + ", \"ph\": \"X\", " + times +
            ", \"pid\": " + quoted(s.device) + ", \"tid\": 0}";
    first = false;
  }
  json += "\n]}\n";
  std::ofstream out(path);
  out << json;
  COIL_CHECK(out.good(), "Profiler::export_chrome_trace: cannot write '", path, "'");
}

std::string Profiler::table(size_t max_rows) {
  const std::vector<Row> all = rows();
  double total = 0;
  for (const Row& r : all) total += r.total_ms;
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line, "%-48s %-8s %-7s %7s %11s %7s %10s\n", "name", "kind", "device",
                "calls", "total ms", "share", "ms/call");
  out += line;
  double rest = 0;
  size_t rest_rows = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const Row& r = all[i];
    if (i >= max_rows) {
      rest += r.total_ms;
      ++rest_rows;
      continue;
    }
    std::snprintf(line, sizeof line, "%-48s %-8s %-7s %7lld %11.3f %6.1f%% %10.4f\n",
                  r.name.substr(0, 48).c_str(), r.kind.c_str(), r.device.c_str(),
                  static_cast<long long>(r.calls), r.total_ms,
                  total > 0 ? 100 * r.total_ms / total : 0.0, r.total_ms / r.calls);
    out += line;
  }
  if (rest_rows) {
    std::snprintf(line, sizeof line, "%-48s %-8s %-7s %7s %11.3f %6.1f%%\n",
                  ("(" + std::to_string(rest_rows) + " more)").c_str(), "", "", "", rest,
                  total > 0 ? 100 * rest / total : 0.0);
    out += line;
  }
  std::snprintf(line, sizeof line, "%-48s %-8s %-7s %7s %11.3f\n", "total", "", "", "", total);
  out += line;
  return out;
}

}  // namespace coil
