#!/usr/bin/env bash
# Builds coil and runs everything that checks it: formatting, the layering rules, the test
# suite, an installed consumer project (find_package(coil)), and the unit tests again under
# ASan+UBSan.
# COIL_SKIP_SANITIZE=1 skips the sanitizer build.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/fetch_digits.sh  # the data examples/train_digits trains on
jobs=$(nproc)

echo "== format check (clang-format) (at $SECONDS s)"
files=$(git ls-files '*.h' '*.cpp' 2>/dev/null || find include src tests examples tools bench -name '*.h' -o -name '*.cpp')
clang-format --dry-run --Werror $files

echo "== layering and function lengths (scripts/check_layers.sh: the rules of docs/architecture.md) (at $SECONDS s)"
bash scripts/check_layers.sh

echo "== build and test (Release) (at $SECONDS s)"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DCOIL_WERROR=ON >/dev/null
cmake --build build -j "$jobs"
(cd build && ctest --output-on-failure -j "$jobs")

echo "== install, then build an outside project with find_package(coil) (at $SECONDS s)"
rm -rf build/install build/consumer
cmake --install build --prefix build/install >/dev/null
cmake -S examples/consumer -B build/consumer -G Ninja -DCMAKE_PREFIX_PATH="$PWD/build/install" >/dev/null
cmake --build build/consumer
LD_LIBRARY_PATH="$PWD/build/install/lib" ./build/consumer/consumer
if [ -d build/install/lib/python3/dist-packages/coil ] && /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "== the installed Python package, from outside the tree (at $SECONDS s)"
  (cd /tmp && PYTHONPATH="$OLDPWD/build/install/lib/python3/dist-packages" /usr/bin/python3 -c '
import coil, torch
f = coil.Function("def forward(self, x: \"f32[2][1]cpu\"):\n    y = coil.sin(x)\n    return (y,)\n")
assert torch.allclose(f(torch.ones(2))[0], torch.ones(2).sin())
print("coil from", coil.__file__)')
fi

if [ "${COIL_SKIP_SANITIZE:-0}" != "1" ]; then
  echo "== unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (at $SECONDS s)"
  # Without CUDA: the CUDA parts are built once, by the Release build above, and this build
  # checks that coil builds and passes its tests where no CUDA toolkit is found.
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCOIL_SANITIZE=ON -DCOIL_WITH_CUDA=OFF -DCOIL_BUILD_EXAMPLES=OFF -DCOIL_BUILD_BENCH=OFF >/dev/null
  cmake --build build-asan -j "$jobs"
  # One process per shard rather than ctest's process per test: a sanitized process takes about
  # a second to start and stop, which over six hundred tests was most of this stage's time.
  # Tests therefore also run after one another in one process, as users' programs do.
  # The whole-model tests (ResNet, GPT-2 against PyTorch) are numerics, run by the Release suite
  # above; their eager ops run under the sanitizer in the ops' own tests, and here they would
  # cost minutes of the CI's half hour.
  GTEST_FILTER='-ResNet.*:Gpt2.*' bash scripts/run_shards.sh build-asan/tests/coil_tests "$jobs"
fi
echo "== done (at $SECONDS s)"
