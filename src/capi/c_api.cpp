// The C interface (include/coil/c_api.h): parse, compile with compile_fx, run on DLPack tensors.
#include <coil/c_api.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <coil/cuda.h>
#include <coil/error.h>

#include "capi/dlpack.h"
#include "compile/compile_fx.h"
#include "graph/parser.h"
#include "graph/printer.h"
#include "runtime/tensor_impl.h"

struct coil_function {
  std::shared_ptr<const coil::Graph> graph;
  coil::capture::CompiledGraph compiled;
  std::vector<coil::TensorMeta> inputs;  // the placeholders', in order
  size_t num_outputs = 0;
};

namespace coil::capi {

namespace {

thread_local std::string g_last_error;

// Runs `body`, turning an exception into `failed` and the reason into coil_last_error().
template <typename F, typename R>
R guarded(F&& body, R failed) {
  try {
    g_last_error.clear();
    return body();
  } catch (const std::exception& e) {
    g_last_error = e.what();
  } catch (...) {
    g_last_error = "coil: an unknown exception";
  }
  return failed;
}

OptionValue option_value(const std::string& key, const nlohmann::json& v) {
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) return v.get<double>();
  if (v.is_string()) return v.get<std::string>();
  throw Error("coil_compile_graph: option '" + key + "' is " + v.dump() +
              " (options take booleans, numbers or strings)");
}

CompileOptions parse_options(const char* text) {
  CompileOptions o;
  o.name = "python";
  if (!text || !*text) return o;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("coil_compile_graph: the options are not JSON: ") + e.what());
  }
  COIL_CHECK(j.is_object(), "coil_compile_graph: the options must be a JSON object, not ",
             j.dump());
  for (const auto& [key, v] : j.items()) {
    auto text_field = [&](std::string& into) {
      COIL_CHECK(v.is_string(), "coil_compile_graph: '", key, "' must be a string, not ", v.dump());
      into = v.get<std::string>();
    };
    if (key == "mode") {
      text_field(o.mode);
    } else if (key == "backend") {
      text_field(o.backend);
    } else if (key == "name") {
      text_field(o.name);
    } else if (key == "options") {
      COIL_CHECK(v.is_object(), "coil_compile_graph: 'options' must be an object, not ", v.dump());
      for (const auto& [name, value] : v.items()) o.options[name] = option_value(name, value);
    } else {
      throw Error("coil_compile_graph: unknown field '" + key +
                  "' in the options (known: mode, backend, name, options)");
    }
  }
  return o;
}

// Every input taken (as a DLPack consumer, whatever goes wrong with another), as coil tensors;
// coil::Error naming the first that is not one.
std::vector<Tensor> take_inputs(const coil_function* fn, DLManagedTensor* const* inputs,
                                size_t num_inputs) {
  std::vector<Tensor> args;
  args.reserve(num_inputs);
  std::string problem;
  for (size_t i = 0; i < num_inputs; ++i) {
    const DType expected = fn && i < fn->inputs.size() ? fn->inputs[i].dtype : kFloat32;
    try {
      args.push_back(from_dlpack(inputs[i], expected));
    } catch (const Error& e) {
      if (problem.empty()) problem = "input " + std::to_string(i) + ": " + e.what();
    }
  }
  COIL_CHECK(problem.empty(), "coil_function_run: ", problem);
  return args;
}

// The compiled code holds for the placeholders' layouts alone (for a dynamic graph, their
// dtypes, devices and ranks; its sizes are read from the inputs).
void check_layouts(const coil_function& fn, std::vector<Tensor>& args) {
  COIL_CHECK(args.size() == fn.inputs.size(), "coil_function_run: the graph takes ",
             fn.inputs.size(), " inputs, not ", args.size());
  const bool dynamic = fn.graph->is_dynamic();
  for (size_t i = 0; i < args.size(); ++i) {
    const TensorMeta& want = fn.inputs[i];
    TensorMeta& given = args[i].impl()->meta;
    // A dim of size 1 has any stride (DLPack exporters rewrite them): the graph's then.
    if (given.sizes == want.sizes)
      for (size_t d = 0; d < given.sizes.size(); ++d)
        if (given.sizes[d] == 1) given.strides[d] = want.strides[d];
    TensorMeta m = given;
    m.offset = want.offset;  // where the memory starts is the caller's
    if (dynamic && m.dtype == want.dtype && m.device == want.device &&
        m.sizes.size() == want.sizes.size())
      continue;
    COIL_CHECK(m == want, "coil_function_run: input ", i, " is ", meta_str(m), ", the graph takes ",
               meta_str(want));
  }
}

}  // namespace

}  // namespace coil::capi

using namespace coil;

extern "C" {

coil_function* coil_compile_graph(const char* graph_text, const char* options_json) {
  return capi::guarded(
      [&]() -> coil_function* {
        COIL_CHECK(graph_text != nullptr, "coil_compile_graph: the graph text is null");
        const CompileOptions options = capi::parse_options(options_json);
        auto fn = std::make_unique<coil_function>();
        fn->graph = std::make_shared<const Graph>(parse_graph(graph_text));
        for (const Node* n : fn->graph->placeholders()) fn->inputs.push_back(n->tensor_meta());
        const Node* out = fn->graph->output_node();
        COIL_CHECK(out != nullptr, "coil_compile_graph: the graph has no return line");
        fn->num_outputs = out->results().size();
        fn->compiled = compile_fx(fn->graph, options, options.name);
        return fn.release();
      },
      static_cast<coil_function*>(nullptr));
}

size_t coil_function_num_outputs(const coil_function* fn) { return fn ? fn->num_outputs : 0; }

int coil_function_run(coil_function* fn, DLManagedTensor* const* inputs, size_t num_inputs,
                      DLManagedTensor** outputs, size_t num_outputs) {
  return capi::guarded(
      [&] {
        COIL_CHECK(inputs != nullptr || num_inputs == 0, "coil_function_run: no input array");
        std::vector<Tensor> args = capi::take_inputs(fn, inputs, num_inputs);
        COIL_CHECK(fn != nullptr, "coil_function_run: the function is null");
        COIL_CHECK(outputs != nullptr && num_outputs == fn->num_outputs,
                   "coil_function_run: the graph returns ", fn->num_outputs,
                   " results, room was made for ", outputs ? num_outputs : 0);
        capi::check_layouts(*fn, args);
        std::vector<Tensor> results = fn->compiled.run(args);
        COIL_CHECK(results.size() == num_outputs, "coil_function_run: the compiled graph gave ",
                   results.size(), " results, not ", num_outputs);
        for (size_t i = 0; i < num_outputs; ++i) outputs[i] = capi::to_dlpack(results[i]);
        return 0;
      },
      -1);
}

void coil_function_free(coil_function* fn) { delete fn; }

int coil_synchronize(void) {
  return capi::guarded(
      [] {
        if (cuda::is_available()) cuda::synchronize();
        return 0;
      },
      -1);
}

const char* coil_last_error(void) { return capi::g_last_error.c_str(); }

}  // extern "C"
