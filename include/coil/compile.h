// coil::compile: torch.compile for C++ callables.
//
//   auto cf = coil::compile(f);      // wraps only: nothing is traced or compiled here
//   Tensor y = cf(x);                // first call: capture a graph, compile it, run it
//   Tensor z = cf(x2);               // later calls: check guards, run the compiled graph
//
// The callable's parameters may be Tensor, std::vector<Tensor>, integers, floating-point
// numbers and bool (by value or const reference); it may return a Tensor, a std::tuple or
// std::vector of Tensors, or a number.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include <coil/tensor.h>

namespace coil {

using OptionValue = std::variant<bool, int64_t, double, std::string>;

struct CompileOptions {
  // "eager": run the captured graph with the interpreter; "aot_eager": through autograd and
  // decompositions on eager kernels; "inductor": the full compiler (the default).
  std::string backend = "inductor";
  // "default"; "reduce-overhead": on a GPU, each compiled graph is recorded as a CUDA graph
  // (per input geometry, after one warm-up call) and replayed, one launch per call
  // (docs/cuda.md; the cudagraphs log says where one is not used); "max-autotune": as
  // reduce-overhead, and each matrix product on the GPU times cuBLASLt's candidate algorithms
  // on its first call and keeps the fastest, as each generated kernel does its launches
  // (remembered on disk; COIL_LOGS=autotune shows the times); "max-autotune-no-cudagraphs": the
  // tuning without CUDA graphs. On the CPU the modes
  // change nothing (oneDNN's convolutions time their two forms in every mode).
  std::string mode = "default";
  bool fullgraph = false;  // a graph break is an error instead of a split into segments
  // Dynamic shapes (docs/dynamic.md). Unset (the default): automatic, as torch.compile: the
  // first graph is static; when a call misses because sizes changed, the dims that changed
  // become symbolic and the recompiled graph serves every later size. true: every input dim
  // symbolic from the first call. false: always static, a recompile per new size.
  // coil::mark_dynamic / mark_static choose single dims. Sizes 0 and 1 are always specialised.
  std::optional<bool> dynamic;
  // Free-form options as in torch.compile(options={...}), each true or false:
  // "trace.enabled", "trace.graph_diagram" (docs/debugging.md), "async_compile" (default
  // true: the C++ compiler runs beside the first call's library calls; docs/pipeline.md) and
  // "freezing" (default false; as torch._inductor.config.freezing: the program promises that
  // the tensors the function captures will not change, and inference graphs fold batch norm
  // into the convolution before it; docs/pipeline.md).
  std::map<std::string, OptionValue> options;
  // As torch._dynamo.config.suppress_errors: a compile that fails (no C++ compiler, a compiler
  // crash, an internal error) runs the graph eagerly instead, with one warning naming why.
  // Unset: COIL_SUPPRESS_ERRORS=1 turns it on; otherwise such a failure is a coil::Error.
  std::optional<bool> suppress_errors;
  int64_t cache_size_limit = 8;        // graph variants per function before it runs eagerly
  std::string name = "fn";             // how logs and errors name the function
  std::vector<std::string> arg_names;  // how guards name the arguments (default arg0, arg1...)
};

// Process-wide counts, as torch._dynamo.utils.counters: captures, compiles, recompiles,
// guard_hits, graph_breaks, cache_hits, cache_misses, eager_fallbacks; what the inductor
// backend produced: generated_kernels, extern_calls; and, for compiled training, the bytes the
// partitioner saves for backward (saved_bytes) against saving everything (save_all_bytes); and
// the compiled-graph cache's graph_cache_hits and graph_cache_misses; suppressed_errors; and for
// mode="reduce-overhead" cudagraph_recordings, cudagraph_replays, cudagraph_rerecordings
// (graphs recorded again for large inputs at other addresses) and cudagraph_copies (held
// outputs of an earlier replay moved to memory of their own before the next).
std::map<std::string, int64_t> counters();
// Forgets every compiled graph and zeroes the counters.
void compiler_reset();

// As torch._dynamo.mark_dynamic / mark_static: when a compiled function is next captured with
// `t` as an input, dim `dim` of it is symbolic (its graph serves every size of that dim) or
// static (a new size recompiles), whatever CompileOptions::dynamic says, unless that is false.
// mark_dynamic of a dim of size 0 or 1 is a coil::Error: those sizes are always specialised.
void mark_dynamic(const Tensor& t, int64_t dim);
void mark_static(const Tensor& t, int64_t dim);
// As torch._dynamo.mark_static_address: where `t` (its memory, and every view of it) is an input
// of a mode="reduce-overhead" function, the CUDA graph reads it where it is instead of a copy made
// at each call (for tensors that live across calls: weights, caches, optimizer state). A call
// with another tensor in its place records a graph of its own.
void mark_static_address(const Tensor& t);

namespace detail {

// One flattened argument or result.
using Value = std::variant<Tensor, std::vector<Tensor>, int64_t, double, bool>;
using ValueList = std::vector<Value>;

class CompiledFunctionImpl;
// The untyped core: guards, capture, compile cache, graph breaks. `run` calls the user's
// callable on (possibly proxy) values and returns its flattened results.
std::shared_ptr<CompiledFunctionImpl> make_compiled_function(CompileOptions options);
ValueList call_compiled(CompiledFunctionImpl& impl, const ValueList& inputs,
                        const std::function<ValueList(const ValueList&)>& run);

template <typename T>
inline constexpr bool is_tensor_list_v = std::is_same_v<T, std::vector<Tensor>>;

// What may cross the boundary of a compiled function: as a parameter, and as a result or an
// element of a tuple result.
template <typename T>
inline constexpr bool is_value_v =
    std::is_same_v<T, Tensor> || is_tensor_list_v<T> || std::is_arithmetic_v<T>;
template <typename R>
inline constexpr bool is_result_v = is_value_v<R>;
template <typename... Ts>
inline constexpr bool is_result_v<std::tuple<Ts...>> = (is_value_v<Ts> && ...);

template <typename T>
Value to_value(const T& v) {
  using D = std::decay_t<T>;
  if constexpr (std::is_same_v<D, Tensor> || is_tensor_list_v<D>) {
    return v;
  } else if constexpr (std::is_same_v<D, bool>) {
    return v;
  } else if constexpr (std::is_integral_v<D>) {
    return static_cast<int64_t>(v);
  } else if constexpr (std::is_floating_point_v<D>) {
    return static_cast<double>(v);
  } else {
    static_assert(sizeof(D) == 0,
                  "coil::compile: parameters must be Tensor, std::vector<Tensor>, integers, "
                  "floating-point numbers or bool");
  }
}

template <typename D>
D from_value(const Value& v) {
  if constexpr (std::is_same_v<D, Tensor> || is_tensor_list_v<D> || std::is_same_v<D, bool>) {
    return std::get<D>(v);
  } else if constexpr (std::is_integral_v<D>) {
    return static_cast<D>(std::get<int64_t>(v));
  } else {
    return static_cast<D>(std::get<double>(v));
  }
}

// Results: a Tensor, a tuple of Tensors (or numbers), a vector of Tensors, or a number.
template <typename R>
struct Result {
  // vector<Tensor> results flatten to one Value holding the list.
  static ValueList flatten(const R& r) { return {to_value(r)}; }
  static R unflatten(const ValueList& v) { return from_value<R>(v.at(0)); }
};
template <typename... Ts>
struct Result<std::tuple<Ts...>> {
  static ValueList flatten(const std::tuple<Ts...>& r) {
    return std::apply([](const auto&... e) { return ValueList{to_value(e)...}; }, r);
  }
  static std::tuple<Ts...> unflatten(const ValueList& v) {
    return unflatten_impl(v, std::index_sequence_for<Ts...>{});
  }
  template <size_t... I>
  static std::tuple<Ts...> unflatten_impl(const ValueList& v, std::index_sequence<I...>) {
    return {from_value<Ts>(v.at(I))...};
  }
};

}  // namespace detail

// What coil::compile returns: a callable with the wrapped callable's signature.
template <typename F>
class CompiledFunction {
 public:
  CompiledFunction(F fn, CompileOptions options)
      : fn_(std::make_shared<F>(std::move(fn))),
        impl_(detail::make_compiled_function(std::move(options))) {}

  template <typename... A>
  auto operator()(const A&... args) const {
    // Misuse is a compile-time error that says what is allowed (tests/compile_errors/).
    static_assert((detail::is_value_v<std::decay_t<A>> && ...),
                  "coil::compile: arguments must be Tensor, std::vector<Tensor>, integers, "
                  "floating-point numbers or bool");
    static_assert(std::is_invocable_v<F&, const A&...>,
                  "coil::compile: the callable cannot be called with these arguments (check "
                  "their number and types; parameters must be taken by value or by const "
                  "reference)");
    if constexpr ((detail::is_value_v<std::decay_t<A>> && ...) &&
                  std::is_invocable_v<F&, const A&...>) {
      using R = std::decay_t<std::invoke_result_t<F&, const A&...>>;
      static_assert(!std::is_void_v<R>, "coil::compile: the callable must return a value");
      static_assert(std::is_void_v<R> || detail::is_result_v<R>,
                    "coil::compile: the callable must return a Tensor, a std::vector<Tensor>, a "
                    "number, or a std::tuple of Tensors and numbers");
      if constexpr (detail::is_result_v<R>) {
        detail::ValueList inputs{detail::to_value(args)...};
        auto run = [fn = fn_](const detail::ValueList& in) {
          return invoke_with<R, A...>(*fn, in, std::index_sequence_for<A...>{});
        };
        return detail::Result<R>::unflatten(detail::call_compiled(*impl_, inputs, run));
      }
    }
  }

 private:
  template <typename R, typename... A, size_t... I>
  static detail::ValueList invoke_with(F& fn, const detail::ValueList& in,
                                       std::index_sequence<I...>) {
    return detail::Result<R>::flatten(fn(detail::from_value<std::decay_t<A>>(in[I])...));
  }

  std::shared_ptr<F> fn_;
  std::shared_ptr<detail::CompiledFunctionImpl> impl_;
};

template <typename F>
CompiledFunction<std::decay_t<F>> compile(F&& fn, CompileOptions options = {}) {
  return CompiledFunction<std::decay_t<F>>(std::forward<F>(fn), std::move(options));
}

}  // namespace coil
