#include "debug/compile_trace.h"

#include <cstdlib>
#include <iostream>

#include "debug/chrome_trace.h"
#include "debug/debug_dir.h"
#include "debug/log.h"
#include "support/config.h"

namespace coil::debug {

CompileTrace::CompileTrace(std::string log_prefix, const std::string& folder,
                           const CompileOptions& options, Args args)
    : prefix_(std::move(log_prefix)), timeline_("compile " + prefix_, std::move(args)) {
  timeline_.root_arg("backend", options.backend);
  DebugSettings s = debug_settings(options);
  if (!s.folder) return;
  dir_ = make_graph_dir(folder);
  diagram_ = s.diagram;
  timeline_.root_arg("debug_dir", dir_.string());
}

CompileTrace::~CompileTrace() {
  if (timeline_.finished()) return;
  try {
    finish("failed");
  } catch (const std::exception& e) {  // never throw from here: an exception may be in flight
    std::cerr << "coil: warning: writing the timeline of a failed compile: " << e.what() << "\n";
  }
}

void CompileTrace::write_text(const char* file, const std::string& text) {
  write_file(dir_ / file, text);
}

void CompileTrace::write_diagram_text(const std::string& dot) {
  write_file(dir_ / "graph_diagram.dot", dot);
  // Graphviz takes tens of milliseconds: a term of its own in the summary, not "other".
  Timeline::Span span = timeline_.span("graph diagram (dot -Tsvg)", "diagram");
  span.arg("svg", render_svg(dir_ / "graph_diagram.dot"));
}

bool CompileTrace::timeline_watched() const {
  return debug::log_enabled("timeline") || !dir_.empty() ||
         config::text(config::Var::TraceFile).has_value();
}

void CompileTrace::finish(const std::string& result) {
  if (timeline_.finished()) return;
  timeline_.root_arg("result", result);
  timeline_.finish();
  debug::log("timeline", prefix_,
             "compile " + prefix_ + " (" + result + "): " + timeline_.summary());
  if (!dir_.empty()) write_file(dir_ / "timeline.json", chrome_trace(timeline_));
  add_to_trace_file(timeline_);
}

}  // namespace coil::debug
