# Writes row_kernels_generated.cuh (included by row_kernels.cu): coil's CUDA kernels for the
# graphs GRAPHS (a list of .graph files), as `coil codegen --source` prints them now, after the
# prelude every source starts with (once: the sources after the first from their part boundary
# on). Run by the build (bench/probes/CMakeLists.txt) as
#   cmake -DCOIL=<coil tool> -DGRAPHS=<a;b> -DOUT=<header> -P row_kernels_generated.cmake
# Each kernel's launch is read from its text, for the probe to launch it as coil does:
# NAME_THREADS (its __launch_bounds__) and NAME_ROWS (rows a block: row = blockIdx.x * ROWS + ...),
# NAME the graph file's name after "row_kernels_", in capitals.
set(names)
foreach(graph ${GRAPHS})
  get_filename_component(name ${graph} NAME)
  list(APPEND names ${name})
endforeach()
list(JOIN names " and " names)
set(text "// coil's CUDA kernels as `coil codegen --source` prints them (the prelude once) for
// ${names}: written by the build (bench/probes/row_kernels_generated.cmake) for row_kernels.cu.
")
set(first ON)
foreach(graph ${GRAPHS})
  execute_process(COMMAND ${COIL} codegen ${graph} --source
    OUTPUT_VARIABLE source ERROR_VARIABLE log RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "coil codegen ${graph} --source failed (${rc}):\n${log}")
  endif()
  string(FIND "${source}" "// coil: part boundary\n" boundary)
  if(boundary EQUAL -1)
    message(FATAL_ERROR "coil codegen ${graph} --source: no part boundary after the prelude")
  endif()
  string(SUBSTRING "${source}" ${boundary} -1 kernels)
  if(first)
    string(APPEND text "${source}")
  else()
    string(APPEND text "${kernels}")
  endif()
  set(first OFF)
  get_filename_component(name ${graph} NAME_WE)
  string(REGEX REPLACE "^row_kernels_" "" name ${name})
  string(TOUPPER ${name} name)
  if(NOT kernels MATCHES "__launch_bounds__\\(([0-9]+)\\)")
    message(FATAL_ERROR "coil codegen ${graph}: no __launch_bounds__ in its kernel")
  endif()
  set(threads ${CMAKE_MATCH_1})
  if(NOT kernels MATCHES "row = \\(i64\\)blockIdx\\.x \\* ([0-9]+) \\+")
    message(FATAL_ERROR "coil codegen ${graph}: its kernel's rows a block not found")
  endif()
  set(rows ${CMAKE_MATCH_1})
  string(APPEND text "#define ${name}_THREADS ${threads}\n#define ${name}_ROWS ${rows}\n")
endforeach()
# Written only when it changed, so that row_kernels.cu is recompiled only then.
file(WRITE ${OUT}.new "${text}")
file(COPY_FILE ${OUT}.new ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.new)
