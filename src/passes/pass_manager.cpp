#include <chrono>
#include <cstdio>

#include "debug/log.h"
#include "graph/printer.h"
#include "passes/pass.h"
#include "passes/passes.h"

namespace coil {

namespace {

// Each round of a well-behaved group shrinks the graph or moves it towards a canonical form;
// groups settle in two or three rounds. More means two passes undo each other.
constexpr int kMaxRounds = 10;

std::string outcome_line(const char* group, int round, const Pass& p, bool changed, double ms) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), " (%.3f ms)", ms);
  return std::string(group) + " round " + std::to_string(round) + ": " + p.name +
         (changed ? " changed the graph" : " no change") + buf;
}

}  // namespace

bool run_pass_group(Graph& g, const char* group, const std::vector<Pass>& passes,
                    const std::string& log_prefix, debug::Timeline* timeline) {
  bool any_change = false;
  std::string last_changed;
  for (int round = 1; round <= kMaxRounds; ++round) {
    last_changed.clear();
    for (const Pass& p : passes) {
      auto t0 = std::chrono::steady_clock::now();
      bool changed = p.run(g);
      auto t1 = std::chrono::steady_clock::now();
      std::chrono::duration<double, std::milli> ms = t1 - t0;
      if (timeline)
        timeline->add(p.name, "", t0, t1 - t0, {{"round", int64_t{round}}, {"changed", changed}});
      debug::log("passes", log_prefix, outcome_line(group, round, p, changed, ms.count()));
      if (!changed) continue;
      verify(g);
      if (debug::log_enabled("passes_graphs"))
        debug::log("passes_graphs", log_prefix,
                   std::string(group) + " after " + p.name + ":\n" + print_graph(g));
      last_changed += (last_changed.empty() ? "" : ", ") + std::string(p.name);
    }
    if (last_changed.empty()) {
      debug::log("passes", log_prefix,
                 std::string(group) + ": fixpoint after " + std::to_string(round) + " round(s)");
      return any_change;
    }
    any_change = true;
  }
  COIL_ASSERT(false, "pass group '", group, "' still changes the graph after ", kMaxRounds,
              " rounds (last round: ", last_changed, "); two of its passes undo each other");
  return any_change;
}

// Canonical views come first so that the rules after them meet one form; DCE comes last to
// sweep what the others left unused.
std::vector<Pass> pre_grad_passes() {
  return {{"canonicalize_views", run_canonicalize_views},
          {"remove_noops", run_remove_noops},
          {"algebraic_simplification", run_algebraic_simplification},
          {"constant_folding", run_constant_folding},
          {"cse", run_cse},
          {"fuse_attention", run_fuse_attention},
          {"dce", run_dce}};
}

std::vector<Pass> joint_graph_passes() {
  return {{"remove_noops", run_remove_noops},
          {"constant_folding", run_constant_folding},
          {"cse", run_cse},
          {"joint_graph_patterns", run_joint_graph_patterns},
          {"dce", run_dce}};
}

// The patterns run after CSE: a product the program computes twice is then computed once
// (and not fused, having two users) rather than fused twice.
std::vector<Pass> post_grad_passes() {
  return {{"canonicalize_views", run_canonicalize_views},
          {"remove_noops", run_remove_noops},
          {"algebraic_simplification", run_algebraic_simplification},
          {"constant_folding", run_constant_folding},
          {"cse", run_cse},
          {"post_grad_patterns", run_post_grad_patterns},
          {"pad_products", run_pad_products},
          {"dce", run_dce}};
}

// CompileOptions::options["freezing"]: before the pre-grad passes, on an inference graph.
std::vector<Pass> freezing_passes() {
  return {{"fold_conv_batch_norm", run_fold_conv_batch_norm}, {"dce", run_dce}};
}

}  // namespace coil
