/* coil's C interface: a graph in coil's text form (print_graph's, what `coil` reads from a
 * .graph file) compiled through the whole pipeline, then run on DLPack tensors. The Python
 * package (python/coil, docs/python.md) reaches coil through it with ctypes; any language that
 * can call C and make DLPack tensors can too.
 *
 * Every function that can fail returns NULL or a non-zero status and leaves the reason, a
 * coil::Error's message naming what was wrong, in coil_last_error() (per thread). */
#ifndef COIL_C_API_H
#define COIL_C_API_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct DLManagedTensor; /* <dlpack/dlpack.h> */

typedef struct coil_function coil_function;

/* Compiles `graph_text`. `options_json` (NULL or "" for the defaults) is a JSON object with
 * coil::CompileOptions' fields: {"mode": "reduce-overhead", "backend": "inductor",
 * "name": "fn", "options": {"trace.enabled": true}}. NULL on failure. */
coil_function* coil_compile_graph(const char* graph_text, const char* options_json);

/* The number of tensors each run returns. */
size_t coil_function_num_outputs(const coil_function* fn);

/* Runs `fn` on `num_inputs` tensors, one per placeholder in order, and writes its
 * coil_function_num_outputs results to `outputs`. The run takes ownership of every input (as a
 * DLPack consumer does: their deleters are called once coil no longer needs the memory, which
 * may be after results that are views of them are freed); each result is the caller's, to be
 * freed by its deleter. Returns 0, or -1 with coil_last_error() set (inputs still taken). */
int coil_function_run(coil_function* fn, struct DLManagedTensor* const* inputs, size_t num_inputs,
                      struct DLManagedTensor** outputs, size_t num_outputs);

void coil_function_free(coil_function* fn);

/* Waits for the work coil queued on every GPU (nothing without one). Returns 0, or -1. */
int coil_synchronize(void);

/* Why the last failing call on this thread failed ("" when none has). */
const char* coil_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* COIL_C_API_H */
