#!/usr/bin/env bash
# A GPU machine's whole visit in one command (its time is short and every start costs minutes):
#   1. benchmarks/gpu_check.py — the model on CUDA: naive, eager and CUDA-graph tokens/s, the launch floor, the
#      SDPA backends (its last line: graph_vs_eager=… launch_floor_us=…);
#   2. the training presets named on the command line, side by side on the one GPU (a 0.9 M-parameter model
#      leaves it mostly idle; each run builds its batches on a CPU core of its own), each with its report and
#      full-cache copy scores.
#
#   OUT=/tmp/out bash benchmarks/device_session.sh mha_copy_gpu mha_copy_gpu_scratch mha_copy_gpu_repeat
#
# Everything lands in $OUT: gpu_check.txt, <preset>.safetensors and <preset>.json for each preset, and
# train.log (each run's log one after another). At most 3 presets: the device tool brings back 8 files.
# Checked here without a GPU: TRAIN_DEVICE=cpu TRAIN_ARGS="--steps 3" OUT=/tmp/o bash benchmarks/device_session.sh mha
set -uo pipefail
out=${OUT:-/tmp/device_out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
if [ "$#" -gt 3 ]; then
    echo "at most 3 presets (gpu_check.txt + 2 files a preset + train.log = 8 files back), got $#" >&2
    exit 2
fi

timeout "${GPU_CHECK_S:-180}" "$python" benchmarks/gpu_check.py 2>&1 | tee "$out/gpu_check.txt"

pids=()
for preset in "$@"; do
    # shellcheck disable=SC2086  # TRAIN_ARGS: extra words for the trainer (a smoke run here: "--steps 3")
    OMP_NUM_THREADS=2 timeout "${TRAIN_S:-420}" "$python" -m sim.model.train --preset "$preset" \
        --device "${TRAIN_DEVICE:-cuda}" ${TRAIN_ARGS:-} --out "$out/$preset.safetensors" > "$out/$preset.log" 2>&1 &
    pids+=("$!")
done
status=0
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { status=$?; echo "preset ${*:$((i + 1)):1}: exit $status" >&2; }
done
for preset in "$@"; do
    { echo "=== $preset"; cat "$out/$preset.log"; } >> "$out/train.log"
    rm -f "$out/$preset.log"
    tail -n 3 "$out/train.log"
done
exit "$status"
