// coil_stress: the programs scripts/stress.sh (and, in short, tests/stress/test_stress.cpp)
// run to prove that the code cache and the graph-file reader never fail a program
// (docs/reliability.md). Each mode prints one summary line and exits 0 when all was well, 1
// otherwise.
//
//   coil_stress graphs N          compiles N distinct functions, each checked against eager
//   coil_stress recompile CALLS   a function called with ever new sizes past cache_size_limit,
//                                 compiler_reset() every 100 calls; RSS at start and end
//   coil_stress fuzz SECONDS SEED FILE...
//                                 mutated graph files read in-process, and by the `coil` tool
//                                 (found on PATH) now and then: errors must be coil::Error
//                                 and exit status 1, never a crash or an internal error
#include <coil/coil.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "graph_file.h"

using namespace coil;

namespace {

// Function k of a family whose members compile to different kernels (their constants and
// their mix of ops differ).
Tensor member(int k, const Tensor& x) {
  const double c = 0.25 + k;
  switch (k % 4) {
    case 0:
      return (x * c).sin() + x.cos();
    case 1:
      return softmax(x * c, 1);
    case 2:
      return (x + c).tanh().sum({1});
    default:
      return layer_norm(x * c, {x.size(1)}, {}, {}, 1e-5).relu();
  }
}

int graphs(int count) {
  int bad = 0;
  Tensor x = randn({16, 32});
  for (int k = 0; k < count; ++k) {
    auto f = [k](const Tensor& x) { return member(k, x); };
    if (!allclose(compile(f)(x), f(x), 1e-4, 1e-5)) {
      std::cerr << "coil_stress: function " << k << " differs from eager\n";
      ++bad;
    }
  }
  std::cout << "graphs: " << count - bad << " of " << count << " match eager\n";
  return bad ? 1 : 0;
}

int64_t rss_kib() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int recompile(int64_t calls) {
  CompileOptions options;
  options.dynamic = false;  // a new size is a new graph, until cache_size_limit
  auto f = [](const Tensor& x) { return (x.exp() + 1.0).log().sum({1}); };
  auto cf = compile(f, options);
  std::vector<Tensor> inputs;
  for (int n = 4; n < 16; ++n) inputs.push_back(randn({n, 24}));  // 12 sizes > the limit of 8
  int64_t start = 0, bad = 0;
  const int64_t warm = std::min<int64_t>(calls / 10, 1000);
  for (int64_t i = 0; i < calls; ++i) {
    if (i % 100 == 0) compiler_reset();
    if (i == warm) start = rss_kib();
    const Tensor& x = inputs[static_cast<size_t>(i) % inputs.size()];
    Tensor y = cf(x);
    if (i % 97 == 0 && !allclose(y, f(x), 1e-5, 1e-6)) ++bad;
  }
  const int64_t end = rss_kib();
  std::cout << "recompile: " << calls << " calls, RSS " << start << " KiB after " << warm
            << " calls, " << end << " KiB at the end (" << (end - start) << " KiB more); " << bad
            << " results differ\n";
  // Flat: what a leak of one library per reset would exceed many times over. (AddressSanitizer
  // holds freed memory back in its quarantine, so there only the results count.)
#ifdef __SANITIZE_ADDRESS__
  const bool flat = true;
#else
  const bool flat = end - start < 16 * 1024;
#endif
  return bad == 0 && flat ? 0 : 1;
}

std::string mutate(std::string text, std::mt19937_64& rng) {
  static const std::vector<std::string> tokens = {
      "f32",      "f64", "i64",    "b8",     "[",
      "]",        "(",   ")",      ",",      "-1",
      "0",        "1",   "s0",     "s1",     "%",
      "=",        ":",   "#",      "\n",     "nan",
      "inf",      " ",   "graph(", "return", "99999999999999999999",
      "aten.add", "{",   "}",      "->",     "*",
      "'",        "\"",  "\\"};
  auto pick = [&](size_t n) { return n ? static_cast<size_t>(rng() % n) : 0; };
  const int edits = 1 + static_cast<int>(rng() % 4);
  for (int e = 0; e < edits && !text.empty(); ++e) {
    const size_t at = pick(text.size());
    switch (rng() % 6) {
      case 0:  // a byte changed
        text[at] = static_cast<char>(32 + rng() % 95);
        break;
      case 1:  // a span deleted
        text.erase(at, 1 + pick(40));
        break;
      case 2:  // a token inserted
        text.insert(at, tokens[pick(tokens.size())]);
        break;
      case 3:  // cut short
        text.resize(at);
        break;
      case 4: {  // a span repeated
        const size_t len = 1 + pick(80);
        text.insert(pick(text.size()), text.substr(at, len));
        break;
      }
      default: {  // a number changed
        size_t digit = text.find_first_of("0123456789", at);
        if (digit != std::string::npos) text.replace(digit, 1, tokens[pick(tokens.size())]);
      }
    }
  }
  return text;
}

// Runs `coil COMMAND FILE`; its exit status, 128 + N for signal N.
int run_tool(const std::string& command, const std::string& file, std::string* err) {
  std::string err_file = file + ".err";
  std::string line = "coil " + command + " '" + file + "' >/dev/null 2>'" + err_file + "'";
  int status = std::system(line.c_str());
  std::ifstream in(err_file);
  std::stringstream ss;
  ss << in.rdbuf();
  *err = ss.str();
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

int fuzz(double seconds, uint64_t seed, const std::vector<std::string>& files) {
  std::vector<std::string> corpus;
  for (const std::string& f : files) corpus.push_back(tool::read_text(f));
  std::mt19937_64 rng(seed);
  char dir_template[] = "/tmp/coil_fuzz_XXXXXX";
  const std::string dir = mkdtemp(dir_template) ? dir_template : "/tmp";
  const std::string path = dir + "/mutant.graph";
  int64_t mutants = 0, parsed = 0, tool_runs = 0, failures = 0;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
  while (std::chrono::steady_clock::now() < deadline) {
    std::string text = mutate(corpus[rng() % corpus.size()], rng);
    std::ofstream(path, std::ios::trunc) << text;
    ++mutants;
    bool ok = false;
    try {
      tool::load_graph(path);
      ok = true;
      ++parsed;
    } catch (const Error&) {
      // a clear error: what bad input must give
    } catch (const std::exception& e) {
      std::cerr << "coil_stress: not a coil::Error (" << e.what() << ") for:\n" << text << "\n";
      ++failures;
    }
    // The tool on every file that parsed (it goes on to lower it), and now and then on others.
    if (ok || mutants % 25 == 0) {
      std::string err;
      const char* command = ok ? "lower" : "print";
      int code = run_tool(command, path, &err);
      ++tool_runs;
      if (!(code == 0 || (code == 1 && err.rfind("coil: error: ", 0) == 0))) {
        std::cerr << "coil_stress: 'coil " << command << "' exited with " << code << ": " << err
                  << "for:\n"
                  << text << "\n";
        ++failures;
      }
    }
  }
  std::cout << "fuzz: " << mutants << " mutated files in " << seconds << " s (seed " << seed
            << "), " << parsed << " parsed, " << tool_runs << " runs of the coil tool, " << failures
            << " failures\n";
  std::remove(path.c_str());
  std::remove((path + ".err").c_str());
  rmdir(dir.c_str());
  return failures ? 1 : 0;
}

int usage() {
  std::cerr << "usage: coil_stress graphs N | recompile CALLS | fuzz SECONDS SEED FILE...\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 2 && args[0] == "graphs") return graphs(std::stoi(args[1]));
    if (args.size() == 2 && args[0] == "recompile") return recompile(std::stoll(args[1]));
    if (args.size() >= 4 && args[0] == "fuzz")
      return fuzz(std::stod(args[1]), std::stoull(args[2]), {args.begin() + 3, args.end()});
  } catch (const std::exception& e) {
    std::cerr << "coil_stress: " << e.what() << "\n";
    return 1;
  }
  return usage();
}
