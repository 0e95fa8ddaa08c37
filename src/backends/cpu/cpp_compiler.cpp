#include "backends/cpu/cpp_compiler.h"

#include <cstdio>
#include <fstream>

#include "jit/source_parts.h"
#include "support/subprocess.h"

namespace coil::cpu {

namespace {

// A source this large is compiled in parts; each part holds at least kMinPartBytes of kernels
// (the prelude each part repeats is small, and a compiler process costs its start-up).
constexpr size_t kSplitBytes = 192 << 10;
constexpr size_t kMinPartBytes = 64 << 10;

}  // namespace

std::vector<std::string> CppCompiler::key_fields() const {
  std::vector<std::string> fields = {toolchain_.compiler, toolchain_.version};
  fields.insert(fields.end(), toolchain_.flags.begin(), toolchain_.flags.end());
  fields.push_back("--");
  fields.insert(fields.end(), toolchain_.libs.begin(), toolchain_.libs.end());
  fields.push_back(toolchain_.machine);
  return fields;
}

jit::Compiler::Outcome CppCompiler::compile(const std::string& source,
                                            const std::string& source_path,
                                            const std::string& output_path) const {
  Outcome out;
  auto record = [&](const std::vector<std::string>& command, const support::ProcessOutput& result) {
    for (const std::string& word : command) out.log += word + " ";
    out.log += "\n" + result.output;
    if (out.ok && !result.status.ok()) {
      out.ok = false;
      out.failure = result.status.describe();
    }
  };
  out.ok = true;
  const size_t parts = jit::parts_for(source, kSplitBytes, kMinPartBytes);
  if (parts < 2) {
    std::vector<std::string> command = compile_command(toolchain_, source_path, output_path);
    record(command, support::run_process(command));
    return out;
  }
  // In parts: the sources beside the output, compiled side by side, then linked.
  const std::vector<std::string> sources = jit::split_source(source, parts);
  std::vector<std::string> part_sources, objects;
  std::vector<std::vector<std::string>> commands;
  for (size_t i = 0; i < sources.size(); ++i) {
    part_sources.push_back(output_path + ".part" + std::to_string(i) + ".cpp");
    objects.push_back(output_path + ".part" + std::to_string(i) + ".o");
    std::ofstream(part_sources.back()) << sources[i];
    commands.push_back(object_command(toolchain_, part_sources.back(), objects.back()));
  }
  std::vector<support::ProcessOutput> results(sources.size());
  jit::run_parts(sources.size(), [&](size_t i) { results[i] = support::run_process(commands[i]); });
  for (size_t i = 0; i < sources.size(); ++i) record(commands[i], results[i]);
  if (out.ok) {
    std::vector<std::string> link = link_command(toolchain_, objects, output_path);
    record(link, support::run_process(link));
  }
  for (size_t i = 0; i < sources.size(); ++i) {
    if (out.ok) std::remove(part_sources[i].c_str());  // a failure's log names them: kept
    std::remove(objects[i].c_str());
  }
  return out;
}

std::shared_ptr<const jit::Module> CppCompiler::load(const std::string& binary_path) const {
  return std::make_shared<const Library>(binary_path);
}

std::shared_ptr<const Library> load_cpp(const std::string& source, const std::string& name_hint,
                                        jit::LoadInfo* info) {
  CppCompiler compiler(current_toolchain());
  return std::static_pointer_cast<const Library>(jit::load(source, compiler, name_hint, info));
}

}  // namespace coil::cpu
