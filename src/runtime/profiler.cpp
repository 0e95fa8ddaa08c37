// coil::Profiler (include/coil/profiler.h) and the scopes that feed it (runtime/profiler.h).
#include "runtime/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <deque>
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
  Recording* mine = recording_.get();
  active.compare_exchange_strong(mine, nullptr);
  std::map<std::tuple<std::string, std::string, std::string>, Row> sums;
  for (Record& rec : recording_->records) {
    double ms = rec.host_ms;
    if (rec.stop) {
      rec.stop->synchronize();
      ms = rec.start->elapsed_time(*rec.stop);
    }
    if (ms < 0) continue;  // still running when recording stopped
    Row& row = sums[{rec.name, rec.kind, rec.device.str()}];
    row.name = rec.name;
    row.kind = rec.kind;
    row.device = rec.device.str();
    row.calls += 1;
    row.total_ms += ms;
  }
  std::vector<Row> out;
  for (auto& [key, row] : sums) out.push_back(std::move(row));
  std::stable_sort(out.begin(), out.end(),
                   [](const Row& a, const Row& b) { return a.total_ms > b.total_ms; });
  return out;
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
