// The command line of the `coil` tool: each sub-command declares its options; parse_args
// checks argv against them and keeps the options in the order given (`coil passes` runs its
// --pass and --group steps in that order).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace coil::tool {

struct OptionSpec {
  const char* name;   // "--pass"
  const char* value;  // what its value is called ("NAME"), nullptr for a flag
  const char* help;
};

struct Args {
  std::string command;
  std::string file;  // the graph file; "-" reads standard input
  std::vector<std::pair<std::string, std::string>> options;  // in command-line order

  bool has(const std::string& name) const;
  // The last value given for `name`, if any.
  std::optional<std::string> value(const std::string& name) const;
  // The last value of `name` as a non-negative integer, else `fallback`; coil::Error if it is
  // not one.
  int64_t count(const std::string& name, int64_t fallback) const;
};

struct Command {
  std::string name;
  std::string summary;  // one line, for `coil help`
  std::string usage;    // "coil print FILE [--dot]"
  std::string details;  // what it prints, for `coil help CMD` and `coil CMD --help`
  std::vector<OptionSpec> options;
  int (*run)(const Args& args);
  std::string operand = "graph file";  // what Args::file holds, for error messages ("": none)
};

// Every sub-command, in the order `coil help` lists them.
const std::vector<Command>& commands();
const Command* find_command(const std::string& name);

// Parses the arguments after the command name; coil::Error on an unknown option, a missing
// value or file, or a second file. Sets `help` instead when --help or -h is among them.
Args parse_args(const Command& cmd, const std::vector<std::string>& argv, bool* help);

std::string command_help(const Command& cmd);
std::string general_help();

}  // namespace coil::tool
