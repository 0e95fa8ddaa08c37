#!/usr/bin/env bash
# Stress tests of what must never fail a program (docs/reliability.md): many processes on one
# empty code cache, processes killed with SIGKILL mid-compile and damaged entries followed by a
# clean run, a function recompiling in a loop with flat memory, and fuzzed graph files read by
# coil and its tool. Each prints what it measured; the exit status is 1 when any failed.
#
#   scripts/stress.sh          the long version (minutes), not part of CI
#   scripts/stress.sh quick    the short version, run by CI (tests/stress/test_stress.cpp)
#
# Uses coil_stress and coil from PATH when there, else builds them in $COIL_BUILD_DIR (build).
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v coil_stress >/dev/null; then
  build=${COIL_BUILD_DIR:-build}
  if [ ! -x "$build/tools/coil_stress" ]; then
    cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    cmake --build "$build" --target coil_stress coil-tool
  fi
  export PATH="$PWD/$build/tools:$PATH"
fi
if [ "${1:-}" = quick ]; then
  procs=3 graphs=4 kills=2 calls=600 fuzz_seconds=4 seed=1
else
  procs=8 graphs=20 kills=10 calls=10000 fuzz_seconds=60 seed=${COIL_STRESS_SEED:-$RANDOM}
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() {
  echo "FAILED: $*"
  failed=1
}
temp_files() { find "$1" -name '*.tmp.*' 2>/dev/null | wc -l; }

echo "== $procs processes x $graphs distinct graphs on one empty cache"
export COIL_CACHE_DIR=$work/shared
start=$(date +%s%N)
pids=()
for i in $(seq "$procs"); do
  coil_stress graphs "$graphs" >"$work/graphs$i.out" 2>&1 &
  pids+=($!)
done
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || fail "process $i: $(cat "$work/graphs$((i + 1)).out")"
done
echo "all processes: $(cat "$work"/graphs*.out | sort | uniq -c | sed 's/^ *//')" \
  "in $((($(date +%s%N) - start) / 1000000)) ms"
echo "temporary files left: $(temp_files "$COIL_CACHE_DIR")"
[ "$(temp_files "$COIL_CACHE_DIR")" = 0 ] || fail "temporary files left in the cache"

echo "== $kills processes killed with SIGKILL during compiles, a library damaged each time; then a clean run"
export COIL_CACHE_DIR=$work/killed
for round in $(seq "$kills"); do
  coil_stress graphs "$graphs" >/dev/null 2>>"$work/killed.err" &
  pid=$!
  sleep "0.$((RANDOM % 9 + 1))"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  # As a full disk or a killed copy leaves it: a library cut short.
  library=$(find "$COIL_CACHE_DIR" -name '*.so' ! -name '*.tmp.*' 2>/dev/null | sort | head -n "$round" | tail -n 1)
  [ -n "$library" ] && truncate -s 100 "$library"
done
sleep 1  # compilers of killed processes finish writing their temporary files
echo "after the kills: $(temp_files "$COIL_CACHE_DIR") temporary files (never loaded)," \
  "$(find "$COIL_CACHE_DIR" -name '*.so' ! -name '*.tmp.*' | wc -l) libraries"
coil_stress graphs "$graphs" >"$work/clean.out" 2>"$work/clean.err" || fail "the clean run: $(cat "$work/clean.out" "$work/clean.err")"
echo "damaged files set aside and compiled again: $(grep -c 'is damaged' "$work/killed.err")" \
  "by the killed processes, $(grep -c 'is damaged' "$work/clean.err") by the clean run"
echo "clean run: $(cat "$work/clean.out")"
coil cache clear | grep -E '^(removed|entries)'

echo "== a function recompiling in a loop ($calls calls)"
export COIL_CACHE_DIR=$work/loop
coil_stress recompile "$calls" 2>/dev/null || fail "the recompile loop"

echo "== fuzzed graph files ($fuzz_seconds s)"
coil_stress fuzz "$fuzz_seconds" "$seed" examples/graphs/*.graph || fail "fuzzing (seed $seed)"

[ "$failed" = 0 ] && echo "stress: all passed"
exit "$failed"
