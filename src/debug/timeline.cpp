#include "debug/timeline.h"

#include <algorithm>
#include <cstdio>
#include <map>

namespace coil::debug {

namespace {

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Whole milliseconds where they are many, two decimals below 10 ms (most stages take less
// than one, and "0" would say nothing).
std::string format_ms(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 10 ? "%.0f" : "%.2f", v);
  return buf;
}

}  // namespace

Timeline::Timeline(std::string name, Args args, Clock::time_point start) {
  spans_.push_back(SpanRecord{std::move(name), "", start, start, -1, std::move(args)});
  open_.push_back(0);
}

void Timeline::Span::arg(std::string key, ArgValue value) {
  if (t_) t_->spans_[index_].args.emplace_back(std::move(key), std::move(value));
}

void Timeline::Span::end() {
  if (!t_) return;
  Timeline* t = std::exchange(t_, nullptr);
  if (t->finished_) return;  // the root ended first (an exception unwound past it)
  t->spans_[index_].end = Clock::now();
  t->open_.erase(std::remove(t->open_.begin(), t->open_.end(), index_), t->open_.end());
}

Timeline::Span Timeline::span(std::string name, std::string label, Args args) {
  Clock::time_point now = Clock::now();
  int parent = open_.empty() ? -1 : open_.back();
  spans_.push_back(
      SpanRecord{std::move(name), std::move(label), now, now, parent, std::move(args)});
  int index = static_cast<int>(spans_.size()) - 1;
  open_.push_back(index);
  return Span(this, index);
}

void Timeline::add(std::string name, std::string label, Clock::time_point start,
                   Clock::duration dur, Args args) {
  int parent = open_.empty() ? -1 : open_.back();
  spans_.push_back(
      SpanRecord{std::move(name), std::move(label), start, start + dur, parent, std::move(args)});
}

void Timeline::root_arg(std::string key, ArgValue value) {
  spans_[0].args.emplace_back(std::move(key), std::move(value));
}

void Timeline::finish() {
  if (finished_) return;
  Clock::time_point now = Clock::now();
  for (int i : open_) spans_[i].end = now;
  open_.clear();
  finished_ = true;
}

std::string Timeline::summary() const {
  std::vector<std::string> order;  // labels in the order they first appear
  std::map<std::string, double> term;
  auto labelled_ancestor = [&](int i) {
    for (int p = spans_[i].parent; p >= 0; p = spans_[p].parent)
      if (!spans_[p].label.empty()) return p;
    return -1;
  };
  double total = ms(spans_[0].end - spans_[0].start), covered = 0;
  for (size_t i = 1; i < spans_.size(); ++i) {
    const SpanRecord& s = spans_[i];
    if (s.label.empty()) continue;
    double d = ms(s.end - s.start);
    if (!term.count(s.label)) order.push_back(s.label);
    term[s.label] += d;
    if (int a = labelled_ancestor(static_cast<int>(i)); a >= 0) {
      term[spans_[a].label] -= d;
    } else {
      covered += d;
    }
  }
  std::string out = format_ms(total) + " ms";
  for (size_t i = 0; i < order.size(); ++i)
    out += (i ? " + " : " = ") + order[i] + " " + format_ms(std::max(0.0, term[order[i]]));
  // Glue between the stages: verifying graphs, writing logs and debug files.
  if (!order.empty()) out += " + other " + format_ms(std::max(0.0, total - covered));
  return out;
}

}  // namespace coil::debug
