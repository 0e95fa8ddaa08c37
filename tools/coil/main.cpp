// `coil`: the compiler one stage at a time on a graph file (the seed's "experiment quickly"
// scripts). This file only dispatches; each command lives in its cmd_*.cpp and calls the
// library's stage functions.
#include <coil/error.h>

#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli.h"
#include "commands.h"

namespace coil::tool {

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {print_command(),   passes_command(), lower_command(),
                                            codegen_command(), run_command(),    explain_command(),
                                            cache_command(),   config_command()};
  return list;
}

namespace {

std::string command_names() {
  std::string s;
  for (const Command& c : commands()) s += (s.empty() ? "" : ", ") + c.name;
  return s;
}

int dispatch(const std::vector<std::string>& argv) {
  if (argv.empty() || argv[0] == "help" || argv[0] == "--help" || argv[0] == "-h") {
    if (argv.size() > 1 && argv[0] == "help") {
      const Command* cmd = find_command(argv[1]);
      if (!cmd)
        throw Error("coil help: unknown command '" + argv[1] + "' (commands: " + command_names() +
                    ")");
      std::cout << command_help(*cmd);
      return 0;
    }
    std::cout << general_help();
    // No command at all is a mistake (say how to use it), asking for help is not.
    if (argv.empty()) return 1;
    return 0;
  }
  const Command* cmd = find_command(argv[0]);
  if (!cmd)
    throw Error("unknown command '" + argv[0] + "' (commands: " + command_names() +
                "; 'coil help' says more)");
  bool help = false;
  Args args = parse_args(*cmd, {argv.begin() + 1, argv.end()}, &help);
  if (help) {
    std::cout << command_help(*cmd);
    return 0;
  }
  return cmd->run(args);
}

}  // namespace

}  // namespace coil::tool

int main(int argc, char** argv) {
  // A mistake in the input never crashes the tool: it says what is wrong and exits with 1
  // (2 for a broken invariant inside coil, which is a bug to report).
  try {
    return coil::tool::dispatch({argv + 1, argv + argc});
  } catch (const coil::Error& e) {
    std::cout.flush();
    std::cerr << "coil: error: " << e.what() << "\n";
    return 1;
  } catch (const coil::InternalError& e) {
    std::cout.flush();
    std::cerr << "coil: internal error (a bug in coil, please report it): " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cout.flush();
    std::cerr << "coil: error: " << e.what() << "\n";
    return 1;
  }
}
