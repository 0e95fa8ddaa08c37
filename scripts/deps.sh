#!/usr/bin/env bash
# Installs the Debian packages coil builds and tests with, when they are missing (idempotent).
set -euo pipefail
packages=(g++ cmake ninja-build pkg-config git clang-format libgtest-dev libgmock-dev
  libbenchmark-dev libopenblas-openmp-dev libsleef-dev libfmt-dev nlohmann-json3-dev
  libxxhash-dev libdnnl-dev graphviz libdlpack-dev python3-torch)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "coil: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
