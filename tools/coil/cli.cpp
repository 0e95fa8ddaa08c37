#include "cli.h"

#include <coil/error.h>

namespace coil::tool {

bool Args::has(const std::string& name) const { return value(name).has_value(); }

std::optional<std::string> Args::value(const std::string& name) const {
  std::optional<std::string> out;
  for (const auto& [n, v] : options)
    if (n == name) out = v;
  return out;
}

int64_t Args::count(const std::string& name, int64_t fallback) const {
  std::optional<std::string> v = value(name);
  if (!v) return fallback;
  size_t used = 0;
  int64_t n = -1;
  try {
    n = std::stoll(*v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v->size() || v->empty() || n < 0)
    throw Error("coil " + command + ": " + name + " takes a non-negative integer, not '" + *v +
                "'");
  return n;
}

const Command* find_command(const std::string& name) {
  for (const Command& c : commands())
    if (name == c.name) return &c;
  return nullptr;
}

Args parse_args(const Command& cmd, const std::vector<std::string>& argv, bool* help) {
  Args args;
  args.command = cmd.name;
  *help = false;
  bool have_file = false;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a == "--help" || a == "-h") {
      *help = true;
      return args;
    }
    if (a.size() > 1 && a[0] == '-') {
      // --name=value is accepted as well as --name value.
      std::string name = a.substr(0, a.find('='));
      const OptionSpec* spec = nullptr;
      for (const OptionSpec& o : cmd.options)
        if (name == o.name) spec = &o;
      if (!spec)
        throw Error("coil " + args.command + ": unknown option '" + name + "' (coil " +
                    args.command + " --help lists the options)");
      std::string value;
      if (name.size() < a.size()) {
        if (!spec->value) throw Error("coil " + args.command + ": " + name + " takes no value");
        value = a.substr(name.size() + 1);
      } else if (spec->value) {
        if (i + 1 >= argv.size())
          throw Error("coil " + args.command + ": " + name + " needs a value (" + name + " " +
                      spec->value + ")");
        value = argv[++i];
      }
      args.options.emplace_back(name, value);
      continue;
    }
    if (cmd.operand.empty())
      throw Error("coil " + args.command + " takes no operand (got '" + a +
                  "'; usage: " + cmd.usage + ")");
    if (have_file)
      throw Error("coil " + args.command + ": one " + cmd.operand + " at a time (got '" +
                  args.file + "' and '" + a + "')");
    args.file = a;
    have_file = true;
  }
  if (!have_file && !cmd.operand.empty())
    throw Error("coil " + args.command + ": no " + cmd.operand + " given (usage: " + cmd.usage +
                ")");
  return args;
}

std::string command_help(const Command& cmd) {
  std::string s = "usage: " + cmd.usage + "\n\n" + cmd.summary + ".\n\n" + cmd.details + "\n";
  if (!cmd.options.empty()) s += "\noptions:\n";
  for (const OptionSpec& o : cmd.options) {
    std::string left = std::string(o.name) + (o.value ? std::string(" ") + o.value : "");
    s += "  " + left + std::string(left.size() < 18 ? 18 - left.size() : 1, ' ') + o.help + "\n";
  }
  s += "  --help            this text\n";
  return s;
}

std::string general_help() {
  std::string s =
      "usage: coil COMMAND FILE [OPTIONS]\n\n"
      "Runs coil's compiler one stage at a time on a graph file, written in the text that\n"
      "COIL_LOGS=graph_code prints (examples/graphs/ holds some). FILE '-' reads standard "
      "input.\n\ncommands:\n";
  for (const Command& c : commands())
    s += "  " + c.name + std::string(10 - c.name.size(), ' ') + c.summary + "\n";
  s += "  help      this text; 'coil help COMMAND' (or 'coil COMMAND --help') for one command\n\n"
       "COIL_LOGS=... (COIL_LOGS=help lists them) shows the library's logs: 'coil run'\n"
       "compiles with compile_fx, which logs every stage; the other commands call the\n"
       "stages themselves, of which the pass groups log ('passes', 'passes_graphs').\n"
       "Exit status: 0 on success, 1 on an error in the input or the command line (or, for\n"
       "'coil run', results that differ), 2 on an internal error of coil.\n"
       "docs/walkthrough.md follows the seed programs through these commands.\n";
  return s;
}

}  // namespace coil::tool
