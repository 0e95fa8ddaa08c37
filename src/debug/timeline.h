// The compile timeline: the spans of one compile (capture, each pass group and pass,
// decompositions, lowering, scheduling, each kernel's codegen, the compiler run, the load).
// The same spans feed the one-line `timeline` log summary and the Chrome trace-event JSON
// (chrome_trace.h) that Perfetto opens. Spans are taken on the compile path only; a call of a
// compiled function never touches a Timeline.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace coil::debug {

using Clock = std::chrono::steady_clock;
using ArgValue = std::variant<std::string, int64_t, double, bool>;
using Args = std::vector<std::pair<std::string, ArgValue>>;

struct SpanRecord {
  std::string name;
  // The term of the summary line this span's time counts towards ("passes", "cc"), or empty.
  // A span's term gets its duration less that of its labelled descendants, so the terms add
  // up to the total without counting anything twice.
  std::string label;
  Clock::time_point start, end;
  int parent = -1;  // index of the enclosing span, -1 for the root
  Args args;
};

class Timeline {
 public:
  // Starts the root span (the whole compile) now, or at `start` when the compile began
  // earlier (capture runs before the backend is called).
  explicit Timeline(std::string name, Args args = {}, Clock::time_point start = Clock::now());

  // Ends its span when it goes out of scope (an exception included), so a failed stage still
  // shows up with the time it took.
  class Span {
   public:
    Span(Timeline* t, int index) : t_(t), index_(index) {}
    Span(Span&& o) noexcept : t_(std::exchange(o.t_, nullptr)), index_(o.index_) {}
    Span& operator=(Span&&) = delete;
    ~Span() { end(); }
    void arg(std::string key, ArgValue value);
    void end();

   private:
    Timeline* t_;
    int index_;
  };

  // A span nested in the innermost open one, starting now.
  [[nodiscard]] Span span(std::string name, std::string label = "", Args args = {});
  // Runs f() inside a span and returns what it returns.
  template <typename F>
  decltype(auto) stage(std::string name, std::string label, F&& f) {
    Span s = span(std::move(name), std::move(label));
    return f();
  }
  // A span measured elsewhere (the compiler run inside the JIT), nested in the open one.
  void add(std::string name, std::string label, Clock::time_point start, Clock::duration dur,
           Args args = {});

  void root_arg(std::string key, ArgValue value);
  // Ends the root span (and any left open). Idempotent.
  void finish();
  bool finished() const { return finished_; }

  const std::vector<SpanRecord>& spans() const { return spans_; }
  // "143 ms = capture 2.1 + passes 5.0 + ... + cc 127 + load 3.0 + other 0.4"
  std::string summary() const;

 private:
  std::vector<SpanRecord> spans_;
  std::vector<int> open_;  // indices of the open spans, innermost last
  bool finished_ = false;
};

}  // namespace coil::debug
