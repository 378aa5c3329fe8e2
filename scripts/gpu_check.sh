#!/usr/bin/env bash
# The checks a session runs when it is lent a CUDA machine (docs/performance.md, "On a GPU"):
# the test suite with CUDA visible, then the default preset and transformer_base at fixed
# update counts, trainer.precision=auto (fp32 or bf16/fp16, as the timed probe decides:
# docs/training.md, "Precision") and fp32, one run at a time.
# PRESETS / PRECISIONS narrow the runs, OVERRIDES adds Hydra overrides to each (for example
# "trainer.max_tokens=16384"), TESTS narrows the tests; TEST_TIMEOUT / RUN_TIMEOUT bound each
# step (seconds; TEST_TIMEOUT=0 skips the tests). Then, unless SHAPES_TIMEOUT=0, the probe
# against new batch shapes (benchmarks/probe_shapes.py) for each preset, with OVERRIDES.
#
#   bash scripts/gpu_check.sh OUT_DIR [DEFAULT_STEPS] [BASE_STEPS]
#
# Writes OUT_DIR/info.txt (GPU, torch, CPU), OUT_DIR/tests.log, OUT_DIR/runs.tgz (each
# run's summary.json, metrics.jsonl and train.log) and OUT_DIR/probe_shapes.json. `python -m benchmarks.gpu_runs OUT_DIR`
# reads them back into a table. Needs python with torch (CUDA build), hydra-core, omegaconf,
# sentencepiece, sacrebleu, matplotlib, tensorboard; pytest-xdist for WORKERS > 0.
set -u
out=${1:?usage: gpu_check.sh OUT_DIR [DEFAULT_STEPS] [BASE_STEPS]}
default_steps=${2:-1300}
base_steps=${3:-1000}
py=${PY:-python3}
mkdir -p "$out"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$py" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, \
'tf32 matmul', torch.backends.cuda.matmul.allow_tf32, 'cudnn tf32', torch.backends.cudnn.allow_tf32)"
    lscpu | grep -E 'Model name|^CPU\(s\)'
} >"$out/info.txt" 2>&1

workers=${WORKERS:-12}
xdist=()
[ "$workers" -gt 0 ] && xdist=(-n "$workers")
# SIGINT at the limit: pytest still prints its summary of the failures so far.
# TEST_TIMEOUT=0 skips the tests; TESTS narrows them (pytest arguments, default all).
if [ "${TEST_TIMEOUT:-300}" -gt 0 ]; then
    # shellcheck disable=SC2086  # TESTS is a list of pytest arguments
    timeout -s INT -k 30 "${TEST_TIMEOUT:-300}" "$py" -m pytest -v --tb=short -p no:cacheprovider \
        -m "not network" "${xdist[@]}" ${TESTS:-} >"$out/tests.log" 2>&1
    echo "pytest exit $?" >>"$out/tests.log"
fi

runs=outputs/gpu_check
rm -rf "$runs"
mkdir -p outputs
for preset in ${PRESETS:-transformer transformer_base}; do
    steps=$default_steps
    [ "$preset" = transformer_base ] && steps=$base_steps
    for precision in ${PRECISIONS:-auto fp32}; do
        name=$preset-$precision
        # shellcheck disable=SC2086  # OVERRIDES is a list of Hydra overrides
        timeout "${RUN_TIMEOUT:-240}" "$py" train.py model="$preset" device="${DEVICE:-cuda}" \
            trainer.precision="$precision" trainer.max_steps="$steps" trainer.time_budget_min=0 \
            trainer.early_stopping_patience=0 trainer.val_every_steps=$((steps / 2)) \
            trainer.progress_bar=false ${OVERRIDES:-} hydra.run.dir="$runs/$name" >"$runs-$name.out" 2>&1
        echo "$name exit $?" >>"$out/info.txt"
        mkdir -p "$runs/$name"
        mv "$runs-$name.out" "$runs/$name/stdout.txt"
        # after every run, so that a check stopped by its time limit still returns the rest
        tar czf "$out/runs.tgz" --exclude='*.pt' --exclude='*.png' --exclude='events.out*' \
            -C "$runs" .
    done
done

if [ "${SHAPES_TIMEOUT:-120}" -gt 0 ]; then
    # shellcheck disable=SC2086  # PRESETS and OVERRIDES are lists
    timeout "${SHAPES_TIMEOUT:-120}" "$py" -m benchmarks.probe_shapes \
        --models ${PRESETS:-transformer transformer_base} --device "${DEVICE:-cuda}" \
        --out "$out/probe_shapes.json" ${OVERRIDES:-} >>"$out/info.txt" 2>&1
    echo "probe_shapes exit $?" >>"$out/info.txt"
fi
