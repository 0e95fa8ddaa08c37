#include "jit/source_parts.h"
#include "support/config.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <thread>

namespace coil::jit {

namespace {

// The prelude, then each kernel's text.
std::vector<std::string_view> pieces_of(std::string_view source) {
  std::vector<std::string_view> pieces;
  size_t start = 0;
  for (size_t at; (at = source.find(kPartBoundary, start)) != std::string_view::npos;
       start = at + kPartBoundary.size())
    pieces.push_back(source.substr(start, at - start));
  pieces.push_back(source.substr(start));
  return pieces;
}

}  // namespace

size_t compile_jobs() {
  if (const std::optional<std::string> env = config::text(config::Var::CompileThreads);
      env && std::atoi(env->c_str()) > 0)
    return static_cast<size_t>(std::atoi(env->c_str()));
  return std::max(1u, std::thread::hardware_concurrency());
}

size_t parts_for(std::string_view source, size_t split_bytes, size_t min_part_bytes) {
  if (source.size() < split_bytes) return 1;
  const size_t kernels = pieces_of(source).size() - 1;
  return std::max<size_t>(1, std::min({compile_jobs(), kernels, source.size() / min_part_bytes}));
}

std::vector<std::string> split_source(std::string_view source, size_t parts) {
  const std::vector<std::string_view> pieces = pieces_of(source);
  size_t total = 0;
  for (size_t i = 1; i < pieces.size(); ++i) total += pieces[i].size();
  std::vector<std::string> out;
  size_t done = 0;
  for (size_t i = 1; i < pieces.size(); ++i) {
    // A new part once the parts so far hold their share of the kernels.
    if (out.empty() || (done * parts >= total * out.size() && out.size() < parts))
      out.emplace_back(pieces[0]);
    out.back().append(kPartBoundary).append(pieces[i]);
    done += pieces[i].size();
  }
  if (out.empty()) out.emplace_back(source);
  return out;
}

void run_parts(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::exception_ptr> errors(n);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      try {
        fn(i);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace coil::jit
