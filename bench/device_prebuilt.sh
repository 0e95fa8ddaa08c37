#!/usr/bin/env bash
# On the device machine, coil's binaries as built on the development machine (which has the
# CUDA toolkit but no GPU) instead of a build there, which takes most of a cold call's device
# time. The Release build's code targets plain x86-64 and compiles its CUDA kernels with NVRTC
# at run time for the GPU it finds, so the binaries run there as they are. Carry them with the
# run-time Debian packages alone, and sleef's header and link for the generated CPU code (the headers and static libraries in .deps/ would take the carry
# past its 64 MiB):
#   mkdir -p .deps-run && for p in libdnnl2 libopenblas0-openmp libgfortran5 libsleef3 \
#     libbenchmark1debian libfmt9 libxxhash0 libsleef-dev; do cp .deps/${p}_*.deb .deps-run/; done
#   carry: [".deps-run", "build/libcoil.so.0.1.0", "build/bench/coil-bench",
#           "build/tests/coil_tests", "build/coil-kernels"]
# and give the command lines to run, each printed before it runs, e.g.
#   bash bench/device_prebuilt.sh "build/bench/coil-bench --device cuda --filter =train_mlp"
# Fails when one of them did.
set -uo pipefail
cd "$(dirname "$0")/.."
COIL_DEPS=${COIL_DEPS:-.deps-run} COIL_SKIP_BUILD=1 source bench/device_setup.sh
set +e
ln -sf libcoil.so.0.1.0 build/libcoil.so.0
export LD_LIBRARY_PATH=$PWD/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
status=0
for command in "$@"; do
  echo "== $command"
  bash -c "$command" || status=1
done
exit $status
