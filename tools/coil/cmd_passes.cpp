// coil passes: graph passes one at a time, each pass's result or its diff (the seed's
// run_fx_pass_trace.py).
#include <iostream>
#include <map>

#include <coil/error.h>

#include "commands.h"
#include "decomp/decompose.h"
#include "diff.h"
#include "graph/printer.h"
#include "graph_file.h"
#include "passes/pass.h"
#include "text.h"

namespace coil::tool {

namespace {

// The pass groups of the pipeline (passes/pass.h), by the names compile_fx gives them.
std::vector<std::pair<std::string, std::vector<Pass>>> groups() {
  return {{"pre_grad", pre_grad_passes()},
          {"joint_graph", joint_graph_passes()},
          {"post_grad", post_grad_passes()}};
}

// Every named pass: those of the groups, each once.
std::map<std::string, Pass> all_passes() {
  std::map<std::string, Pass> out;
  for (const auto& [group, passes] : groups())
    for (const Pass& p : passes) out.emplace(p.name, p);
  return out;
}

std::vector<std::string> pass_names() {
  std::vector<std::string> out;
  for (const auto& [name, pass] : all_passes()) out.push_back(name);
  return out;
}

std::vector<std::string> group_names() {
  std::vector<std::string> out;
  for (const auto& [name, passes] : groups()) out.push_back(name);
  out.push_back("all");
  return out;
}

// One step of the command line: a pass, a group run to its fixpoint, or the decompositions.
struct Step {
  enum Kind { kPass, kGroup, kDecompose } kind;
  std::string name;
  std::vector<Pass> passes;  // one for kPass, the group's for kGroup
};

std::vector<Step> steps_of(const Args& args) {
  std::map<std::string, Pass> passes = all_passes();
  auto known_groups = groups();
  std::vector<Step> steps;
  for (const auto& [opt, value] : args.options) {
    if (opt == "--pass") {
      auto it = passes.find(value);
      if (it == passes.end())
        throw Error("coil passes: unknown pass '" + value + "'; the passes are " +
                    join(pass_names()) + " (and --decompose runs the decompositions)");
      steps.push_back({Step::kPass, value, {it->second}});
    } else if (opt == "--group") {
      if (value == "all") {  // the graph stages of compile_fx
        steps.push_back({Step::kGroup, "pre_grad", pre_grad_passes()});
        steps.push_back({Step::kDecompose, "decompositions", {}});
        steps.push_back({Step::kGroup, "post_grad", post_grad_passes()});
        continue;
      }
      const std::vector<Pass>* group = nullptr;
      for (const auto& [name, members] : known_groups)
        if (name == value) group = &members;
      if (!group)
        throw Error("coil passes: unknown pass group '" + value + "'; the groups are " +
                    join(group_names()));
      steps.push_back({Step::kGroup, value, *group});
    } else if (opt == "--decompose") {
      steps.push_back({Step::kDecompose, "decompositions", {}});
    }
  }
  return steps;
}

// Prints what one pass (or the decompositions) did to the graph.
class Reporter {
 public:
  explicit Reporter(bool diff) : diff_(diff) {}

  // `before` is the graph's text before `what` ran on it.
  void report(const std::string& what, const std::string& before, bool changed, const Graph& g) {
    std::cout << "== " << what << ": " << (changed ? "changed the graph" : "no change") << "\n";
    if (!changed) return;
    std::string after = print_graph(g);
    if (diff_)
      std::cout << unified_diff(before, after, "before " + what, "after " + what);
    else
      std::cout << after;
  }

 private:
  bool diff_;
};

// Passes rewrite in place and report whether they changed anything (passes/pass.h); the
// graph is verified after each change, as the pass manager does. Prints the change; returns
// whether there was one.
bool run_one(Graph& g, const Pass& p, const std::string& label, Reporter& out) {
  std::string before = print_graph(g);
  bool changed = p.run(g);
  if (changed) {
    verify(g);
    out.report(label, before, true, g);
  }
  return changed;
}

// A group repeats its passes until a whole round changes nothing, as run_pass_group does;
// the tool runs the rounds itself to show each pass's effect (the pass manager only logs).
void run_group(Graph& g, const Step& step, Reporter& out) {
  constexpr int kMaxRounds = 10;  // as the pass manager: more means two passes undo each other
  for (int round = 1; round <= kMaxRounds; ++round) {
    std::string label = step.name + " round " + std::to_string(round);
    std::vector<std::string> unchanged;
    for (const Pass& p : step.passes)
      if (!run_one(g, p, label + ": " + p.name, out)) unchanged.push_back(p.name);
    if (!unchanged.empty())
      std::cout << "== " << label << ": no change from " << join(unchanged) << "\n";
    if (unchanged.size() == step.passes.size()) {
      std::cout << "== " << step.name << ": fixpoint after " << round << " round"
                << (round == 1 ? "" : "s") << "\n";
      return;
    }
  }
  throw InternalError("pass group '" + step.name + "' still changes the graph after " +
                      std::to_string(kMaxRounds) + " rounds; two of its passes undo each other");
}

int run_passes(const Args& args) {
  std::vector<Step> steps = steps_of(args);
  if (steps.empty())
    throw Error(
        "coil passes: nothing to run: give --pass NAME, --group NAME or --decompose "
        "(the passes are " +
        join(pass_names()) + "; the groups " + join(group_names()) + ")");
  Graph g = load_graph(args.file);
  size_t nodes_before = g.size();
  Reporter out(args.has("--diff"));
  for (const Step& step : steps) {
    if (step.kind == Step::kPass) {
      if (!run_one(g, step.passes[0], step.name, out))
        std::cout << "== " << step.name << ": no change\n";
    } else if (step.kind == Step::kGroup) {
      run_group(g, step, out);
    } else {
      std::string before = print_graph(g);
      bool changed = decompose(g);
      if (changed) verify(g);
      out.report(step.name, before, changed, g);
    }
  }
  std::cout << "== result: " << nodes_before << " nodes before, " << g.size() << " after\n";
  return 0;
}

}  // namespace

Command passes_command() {
  return {"passes",
          "run graph passes one at a time and show what each changed",
          "coil passes FILE [--pass NAME]... [--group NAME]... [--decompose] [--diff]",
          "Runs the steps in the order given: a pass once (--pass), a pass group repeated until a\n"
          "round changes nothing, as the pipeline runs it (--group), or the decompositions\n"
          "(--decompose). After each pass it prints whether the graph changed and, if it did, the\n"
          "new graph, or with --diff a unified diff of the graph before and after. The graph is\n"
          "verified after every change.\n\n"
          "passes: " +
              join(pass_names()) + "\n" +
              "groups: pre_grad, joint_graph, post_grad, and all (the graph stages of compile_fx:\n"
              "        pre_grad, decompositions, post_grad)",
          {{"--pass", "NAME", "run one pass once (repeatable)"},
           {"--group", "NAME",
            "run a pass group to its fixpoint: pre_grad, joint_graph, post_grad, all"},
           {"--decompose", nullptr, "rewrite composite ops into primitives (src/decomp/)"},
           {"--diff", nullptr, "print each change as a unified diff instead of the whole graph"}},
          run_passes};
}

}  // namespace coil::tool
