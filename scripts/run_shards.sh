#!/usr/bin/env bash
# Runs a GoogleTest binary as N shards in parallel (GTEST_TOTAL_SHARDS), each in one process
# under a time limit; prints each shard's summary, and a failing shard's whole log.
# Usage: scripts/run_shards.sh BINARY SHARDS
set -uo pipefail
binary=$(realpath "$1")
shards=${2:-2}
logs=$(mktemp -d)
pids=()
for ((i = 0; i < shards; ++i)); do
  (cd "$(dirname "$binary")" &&
    GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
      timeout 1500 "$binary" --gtest_brief=1 >"$logs/$i.log" 2>&1) &
  pids+=($!)
done
failed=0
for ((i = 0; i < shards; ++i)); do
  if wait "${pids[$i]}"; then
    echo "shard $i/$shards: $(grep -E '^\[  PASSED  \]' "$logs/$i.log")"
  else
    echo "shard $i/$shards failed:"
    cat "$logs/$i.log"
    failed=1
  fi
done
rm -rf "$logs"
exit $failed
