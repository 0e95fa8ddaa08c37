#!/usr/bin/env bash
# Builds coil and runs the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target coil_demo
COIL_LOGS="${COIL_LOGS:-graph_code,decompositions,fusion,ir_post_fusion,output_code,timeline,guards,recompiles,graph_breaks}" ./build/examples/coil_demo
