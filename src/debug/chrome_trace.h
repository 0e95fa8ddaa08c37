// The compile timeline as Chrome trace-event JSON, the format Perfetto (ui.perfetto.dev) and
// chrome://tracing open: {"traceEvents": [{"name", "ph": "X", "ts", "dur", "pid", "tid",
// "args"}, ...]}, times in microseconds. Spans of one thread nest by time, so the viewer
// shows the compile with its stages inside it and each pass inside its group.
#pragma once

#include <string>

#include "debug/timeline.h"

namespace coil::debug {

// One compile's timeline as a whole trace file (timeline.json in the debug folder).
std::string chrome_trace(const Timeline& t);

// COIL_TRACE_FILE=path collects every compile of the process into one trace. The file is
// rewritten whole after each compile (through a temporary file and a rename), so it is valid
// JSON whenever the process stops. Does nothing when the variable is unset.
void add_to_trace_file(const Timeline& t);

}  // namespace coil::debug
