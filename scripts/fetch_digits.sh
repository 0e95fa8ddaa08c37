#!/usr/bin/env bash
# Puts scikit-learn's handwritten-digits data set (1797 8x8 images, 64 pixel columns then the
# label) at data/digits.csv for examples/train_digits. Debian ships it in python3-sklearn; this
# takes the file from that package without installing it and its dependencies (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."
out=data/digits.csv
[ -s "$out" ] && exit 0
src=/usr/lib/python3/dist-packages/sklearn/datasets/data/digits.csv.gz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ ! -f "$src" ]; then
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  if ! (cd "$tmp" && apt-get download -qq python3-sklearn >/dev/null 2>&1); then
    $sudo_cmd apt-get update -qq
    (cd "$tmp" && apt-get download -qq python3-sklearn >/dev/null 2>&1)
  fi
  dpkg-deb -x "$tmp"/python3-sklearn_*.deb "$tmp/pkg"
  src="$tmp/pkg$src"
fi
mkdir -p data
gunzip -c "$src" > "$out.tmp"
mv "$out.tmp" "$out"
echo "coil: wrote $out ($(wc -l < "$out") rows)"
