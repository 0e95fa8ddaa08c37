// What one compile leaves behind for the person watching it: its timeline (the `timeline` log
// line, timeline.json, COIL_TRACE_FILE) and, when tracing is on, its debug folder
// (debug_dir.h). Made where the compile starts (capture, in compiled_function.cpp) and handed
// to compile_fx, which adds a span per stage and a file per artifact. Only compiles make one:
// the call path of a compiled function never does.
#pragma once

#include <filesystem>
#include <string>

#include <coil/compile.h>

#include "debug/timeline.h"

namespace coil::debug {

class CompileTrace {
 public:
  // `log_prefix` names the graph in logs ("fn[0/1]"), `folder` its debug folder ("fn_0_1");
  // `args` describe the compile on the trace's top span: the function, the graph id, the call
  // that triggered it. Creates the folder when tracing is on (coil::Error if it cannot).
  CompileTrace(std::string log_prefix, const std::string& folder, const CompileOptions& options,
               Args args);
  // A compile that threw still logs and writes the timeline it had, marked as failed.
  ~CompileTrace();
  CompileTrace(const CompileTrace&) = delete;
  CompileTrace& operator=(const CompileTrace&) = delete;

  const std::string& log_prefix() const { return prefix_; }
  Timeline& timeline() { return timeline_; }
  // Whether finish() will show the timeline to anyone: the `timeline` log, the debug folder's
  // timeline.json, COIL_TRACE_FILE.
  bool timeline_watched() const;
  // The graph's debug folder, empty when tracing is off.
  const std::filesystem::path& dir() const { return dir_; }

  // Writes text() to `file` in the debug folder. text() only runs when the folder is on, so
  // the artifacts cost nothing otherwise.
  template <typename F>
  void write(const char* file, F&& text) {
    if (!dir_.empty()) write_text(file, text());
  }
  // Writes graph_diagram.dot, and graph_diagram.svg when Graphviz is installed, when the
  // diagram is on.
  template <typename F>
  void write_diagram(F&& dot) {
    if (diagram_) write_diagram_text(dot());
  }

  // Ends the compile (`result` says what came out: "1 kernel", "graph break"): logs the
  // `timeline` summary, writes timeline.json, adds the spans to COIL_TRACE_FILE. Idempotent.
  void finish(const std::string& result);

 private:
  void write_text(const char* file, const std::string& text);
  void write_diagram_text(const std::string& dot);

  std::string prefix_;
  Timeline timeline_;
  std::filesystem::path dir_;
  bool diagram_ = false;
};

}  // namespace coil::debug
