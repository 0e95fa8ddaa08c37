#!/usr/bin/env bash
# On the device machine, with prebuilt binaries (bench/device_prebuilt.sh's carry plus
# build/bench/coil-bench-models): GPT-2 small (or the model in $COIL_MODEL) under autocast in
# bfloat16 (or $COIL_AMP) on the GPU (or on the host's 16 cores with COIL_DEVICE=cpu), coil
# against PyTorch eager and Inductor (bench/compare_models.py), the JSON and log under $OUT.
# Extra arguments go to compare_models.py (--channels-last, --quick).
cd "$(dirname "$0")/.."
model=${COIL_MODEL:-gpt2} amp=${COIL_AMP:-bf16} device=${COIL_DEVICE:-cuda}
threads=""
[ "$device" = cpu ] && threads="--threads 16"
bash bench/device_prebuilt.sh "python3 bench/compare_models.py --coil-bench-models \
build/bench/coil-bench-models --device $device $threads --model $model --amp $amp \
--json '$OUT/models_${model}_${amp}_${device}.json' $* 2>&1 | tee '$OUT/models_${model}_${amp}_${device}.txt'"
