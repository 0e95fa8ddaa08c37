#!/usr/bin/env bash
# On the device machine, with prebuilt binaries (bench/device_prebuilt.sh's carry plus
# build/probe-bin/forward_gaps, built from bench/probes/forward_gaps.cpp against build/libcoil):
# one inference forward of each model in $MODELS (gpt2 resnet50) under autocast in $AMP (bf16),
# coil compiled (and eager with COIL_EAGER=1) under coil's profiler, PyTorch eager and Inductor
# under torch.profiler; the kernels summed by name, the logs under $OUT.
cd "$(dirname "$0")/.."
amp=${AMP:-bf16}
commands=()
for model in ${MODELS:-gpt2 resnet50}; do
  for mode in compiled ${COIL_EAGER:+eager}; do
    commands+=("build/probe-bin/forward_gaps $model $mode $amp 2>&1 | tee '$OUT/coil_${model}_$mode.txt'")
  done
  for mode in eager inductor; do
    commands+=("python3 bench/probes/torch_forward_kernels.py $model $mode $amp 2>&1 | tail -45 | tee '$OUT/torch_${model}_$mode.txt'")
  done
done
bash bench/device_prebuilt.sh "${commands[@]}"
