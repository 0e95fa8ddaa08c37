#include "backends/cpu/cpp_compiler.h"

#include "support/subprocess.h"

namespace coil::cpu {

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
  std::vector<std::string> command = compile_command(toolchain_, source_path, output_path);
  support::ProcessOutput result = support::run_process(command);
  Outcome out;
  out.ok = result.status.ok();
  out.failure = result.status.describe();
  for (const std::string& word : command) out.log += word + " ";
  out.log += "\n" + result.output;
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
