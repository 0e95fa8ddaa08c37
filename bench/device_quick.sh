#!/usr/bin/env bash
# On the device machine, one call that checks a change and measures what it was for: builds
# coil's tests and coil-bench once (build-gpu/; with PREBUILT=1 the binaries carried in build/),
# then runs, each under its own time limit so
# that one slow step leaves the others' results, and in this order: bench/probes/long_rows.cu;
# PyTorch's own product and softmax kernels for mm_softmax (torch.profiler); coil-bench on the
# GPU for WORKLOADS (default the row, reduction and training workloads; BENCH_ARGS, such as
# "--trace $OUT/trace", added to its command line; with AB_ENV, in rounds
# without and with that setting) and attention without
# the seed cache (its first call compiling the kernel, unless SEED_AB=0); the CUDA tests
# (scripts/test_gpu.sh's first step); compare_torch.py for COMPARE (each in a process of its own).
# Everything is printed as it comes (call it without `| tail`: a call cut short by the device's
# time limit returns only what was printed), and $OUT holds few files: the logs, the tests'
# output and one results.json that gathers every JSON report after each step.
set -uo pipefail
cd "$(dirname "$0")/.."
[ "${PREBUILT:-0}" = 1 ] && export COIL_DEPS=${COIL_DEPS:-.deps-run}
COIL_SKIP_BUILD=1 source bench/device_setup.sh  # the Debian packages from .deps/
set +e
SECONDS=0
mkdir -p /tmp/reports
gather() {  # every JSON report so far, in one file
  python3 -c 'import glob, json, sys; json.dump({f.split("/")[-1]: json.load(open(f)) for f in sorted(glob.glob("/tmp/reports/*.json"))}, open(sys.argv[1], "w"), indent=1)' "$OUT/results.json"
}
# PREBUILT=1: the binaries built on the development machine and carried in build/ (as
# bench/device_prebuilt.sh says), instead of a build here.
if [ "${PREBUILT:-0}" = 1 ]; then
  B=build
  ln -sf libcoil.so.0.1.0 build/libcoil.so.0
  export LD_LIBRARY_PATH=$PWD/build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
else
  B=build-gpu
  cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_BUILD_EXAMPLES=ON \
    -DCOIL_BUILD_BENCH=ON > "$OUT/cmake.log" 2>&1 || { tail -30 "$OUT/cmake.log"; exit 1; }
  ninja -C build-gpu coil_tests coil-bench > "$OUT/build.log" 2>&1 ||
    { grep -E "error|FAILED" -A5 "$OUT/build.log" | head -40; exit 1; }
  echo "== built in $SECONDS s"
fi
if [ "${PROBE:-1}" = 1 ]; then
  nvcc -O3 -arch=sm_90 bench/probes/long_rows.cu -o /tmp/long_rows && timeout 60 /tmp/long_rows
  timeout 60 python3 - <<'PY' 2>&1 | grep -v Warning
import torch
torch.backends.cuda.matmul.allow_tf32 = False
a, b = (torch.randn(2048, 2048, device="cuda") for _ in range(2))
for _ in range(3): torch.softmax(a @ b, 1)
torch.cuda.synchronize()
with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
    for _ in range(10): torch.softmax(a @ b, 1)
    torch.cuda.synchronize()
per = {}
for e in prof.events():
    if e.device_type == torch.autograd.DeviceType.CUDA:
        per.setdefault(e.name[:100], []).append(e.device_time)
for name, t in per.items(): print(f"torch mm_softmax: {sum(t) / len(t):8.1f} us x{len(t)}  {name}")
PY
fi
echo "== coil-bench (at $SECONDS s)"
for w in ${WORKLOADS:-softmax layernorm_gelu long_rows_sum instance_norm train_mlp}; do
  timeout 60 $B/bench/coil-bench --device cuda --filter "=$w" ${BENCH_ARGS:-} \
    --json "/tmp/reports/coil_bench_$w.json" 2>&1 | grep -E "^$w |^timeline|^  call|^    "
done
gather
# AB_ENV="NAME=value": coil-bench for WORKLOADS in ROUNDS rounds of turns, without the setting
# and with it, so that its effect can be told from run-to-run noise.
if [ -n "${AB_ENV:-}" ]; then
  for round in ${ROUNDS:-1 2 3}; do
    for side in without with; do
      echo "== round $round, $side $AB_ENV"
      setting=(); [ $side = with ] && setting=("$AB_ENV")
      for w in ${WORKLOADS:-softmax layernorm_gelu long_rows_sum instance_norm train_mlp}; do
        env "${setting[@]}" timeout 60 $B/bench/coil-bench --device cuda --filter "=$w" \
          --json "/tmp/reports/ab_${round}_${side}_$w.json" 2>&1 | grep -E "^$w "
      done
    done
  done
  gather
fi
if [ "${SEED_AB:-1}" = 1 ]; then  # attention's first call without the seed cache, for comparison
  echo "== attention without the seed cache (COIL_SEED_DIR=)"
  COIL_SEED_DIR= timeout 60 $B/bench/coil-bench --device cuda --filter "=attention" 2>&1 |
    grep -E "^attention "
fi
echo "== CUDA tests (at $SECONDS s)"
timeout ${TEST_LIMIT:-200} $B/tests/coil_tests --gtest_filter="${COIL_GPU_FILTER:-Cuda*:*OnCuda*:ShippedKernels.*:MaxAutotune.*}" \
  > "$OUT/cuda_tests.txt" 2>&1
grep -E "^\[  (PASSED|FAILED|SKIPPED) +\]|^\[==========\]" "$OUT/cuda_tests.txt"
echo "== compare_torch (at $SECONDS s)"
for w in ${COMPARE:-train_mlp layernorm_gelu}; do
  timeout 120 python3 bench/compare_torch.py --coil-bench $B/bench/coil-bench \
    --device cuda --filter "=$w" --json "/tmp/reports/compare_$w.json" 2>&1 |
    grep -A2 "^workload  *inductor"
  gather
done
echo "== done at $SECONDS s"
