// The debug folder (as torch's torch_compile_debug/): with COIL_COMPILE_DEBUG=1, or per
// function with CompileOptions.options "trace.enabled" / "trace.graph_diagram", every
// compiled graph gets a folder of its own,
//   $COIL_DEBUG_DIR/run_<YYYY_MM_DD_HH_MM_SS>-pid_<pid>/<function>_<graph id>/
// ($COIL_DEBUG_DIR defaults to ./coil_compile_debug), holding what each stage produced.
// docs/debugging.md lists the files.
#pragma once

#include <filesystem>
#include <string>

#include <coil/compile.h>

namespace coil::debug {

struct DebugSettings {
  bool folder = false;   // write the debug folder
  bool diagram = false;  // and the graph diagram in it
};
// COIL_COMPILE_DEBUG=1 turns on the folder and the diagram for every function;
// "trace.enabled" the folder for one, "trace.graph_diagram" the diagram (and so the folder).
// Read at each compile, never on the call path.
DebugSettings debug_settings(const CompileOptions& options);

// A new, empty folder for one compiled graph: `name` under this process's run folder, with
// "-1", "-2"... appended when a graph of that name was already written (after
// compiler_reset). Throws coil::Error naming the folder when it cannot be created.
std::filesystem::path make_graph_dir(const std::string& name);

// Writes a whole file; throws coil::Error naming it on failure.
void write_file(const std::filesystem::path& path, const std::string& text);

// Renders `dot_file` to SVG beside it (same name, .svg) with Graphviz's `dot`, when that is on
// PATH. The diagram is an extra: a missing or failing `dot` is a warning on stderr, never an
// error, and returns false.
bool render_svg(const std::filesystem::path& dot_file);

}  // namespace coil::debug
