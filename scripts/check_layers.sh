#!/usr/bin/env bash
# Checks the include rules of docs/architecture.md's layer table: every `#include "folder/..."`
# in src/ must name the file's own folder or one its row allows. A backend's folder
# (src/backends/NAME/) may include the interface in src/backends/ but no other backend's folder.
# Then that no folder above the backends tests the device, that COIL_ variables are read in one
# place, and that no function is over 100 lines unlisted (check_function_length.py). Prints each
# broken rule as `file: #include "..." (why)` or `file:line: code (why)` and exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."

awk '
  # The table rows: | `src/FOLDER/` | what | `a`, `b` |
  FILENAME == "docs/architecture.md" {
    if ($0 ~ /^\| `src\/[a-z_]+\/` \|/) {
      split($0, cell, "|")
      folder = cell[2]; gsub(/[ `]|src\/|\//, "", folder)
      allowed = cell[4]; gsub(/`|,|—/, " ", allowed)
      rows[folder] = " " allowed " "
    }
    next
  }
  FNR == 1 {
    rel = substr(FILENAME, 5)             # after "src/"
    n = split(rel, part, "/"); folder = part[1]
    if (n == 1) folder = "."
    if (!(folder in rows)) {
      print FILENAME ": folder src/" folder "/ has no row in docs/architecture.md"
      bad = 1
    }
  }
  /^#include "[a-z_]+\// {
    inc = $0; sub(/^#include "/, "", inc); sub(/".*/, "", inc)
    split(inc, ipart, "/"); target = ipart[1]
    if (target == folder) {
      # Within src/backends/: a backend folder sees the interface, never another backend.
      if (folder == "backends" && n > 2 && split(inc, q, "/") > 2 && q[2] != part[2]) {
        print FILENAME ": #include \"" inc "\" (a backend includes no other backend'"'"'s folder)"
        bad = 1
      }
    } else if ((folder in rows) && index(rows[folder], " " target " ") == 0) {
      may = rows[folder]; gsub(/^ +| +$/, "", may); gsub(/ +/, ", ", may)
      print FILENAME ": #include \"" inc "\" (src/" folder "/ may include " (may == "" ? "none of them" : may) ")"
      bad = 1
    }
  }
  END {
    if (length(rows) == 0) { print "check_layers: no layer table in docs/architecture.md"; exit 1 }
    if (bad) exit 1
    print "check_layers: every include in src/ follows docs/architecture.md"
  }
' docs/architecture.md $(find src -name '*.h' -o -name '*.cpp' -o -name '*.def' | sort)

# Above the backends no code tests which device it compiles for: what differs by device is asked
# of heuristics::for_device (src/heuristics/heuristics.h), which each backend answers.
above_backends="src/aot src/codegen src/decomp src/heuristics src/ir src/lower src/passes src/schedule"
if found=$(grep -rnE '\.is_cuda\(\)|\.is_cpu\(\)|DeviceType::(CPU|CUDA)|cuda::k[A-Z]' $above_backends); then
  echo "$found" | sed 's/$/ (a device test above src\/backends\/: ask heuristics::for_device)/'
  exit 1
fi
echo "check_layers: no device test above src/backends/"

# Environment variables are read in one place (src/support/config.h), which documents them.
if found=$(grep -rnE 'getenv\("COIL_' src | grep -v '^src/support/config\.cpp:'); then
  echo "$found" | sed 's/$/ (read COIL_ variables through src\/support\/config.h)/'
  exit 1
fi
echo "check_layers: every COIL_ variable is read through src/support/config.h"

# Functions fit on a screen, but those docs/architecture.md lists with a reason.
python3 scripts/check_function_length.py
