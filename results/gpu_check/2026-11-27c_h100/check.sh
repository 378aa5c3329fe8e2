#!/usr/bin/env bash
# fourth GPU check (2026-11-27 session 3): does the precision probe's one repeated batch predict
# bf16's speed on the loader's new shapes? benchmarks/probe_shapes.py on CUDA for
# transformer_base at 16,384 tokens a batch (where the probe chose bf16 2.02x and whole runs
# trained 0.66x), as the loader gives the batches and padded to multiples of 8; the default
# preset at its 2,048 tokens; then the test files that touch devices and precision.
set -u
export PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:$PWD:$PWD/.site:/tmp/site
python3 -c "import attnmt, hydra, omegaconf, sentencepiece, sacrebleu, torch; print('imports ok', sentencepiece.__version__, torch.__version__, torch.cuda.get_device_name())" || exit 4
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; lscpu | grep -E 'Model name|^CPU\(s\)'; } | tee "$OUT/info.txt"
for pad in 1 8; do
    timeout 150 python3 -m benchmarks.probe_shapes --models transformer_base --device cuda \
        --pad-multiple $pad --out "$OUT/base16k-pad$pad.json" trainer.max_tokens=16384 2>&1 | grep -v Warning | tail -3
    echo "base16k pad $pad exit ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
done
timeout 90 python3 -m benchmarks.probe_shapes --models transformer --device cuda \
    --out "$OUT/default-pad1.json" 2>&1 | grep -v Warning | tail -3
echo "default exit ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
timeout -s INT -k 20 120 python3 -m pytest -q --tb=short -p no:cacheprovider -n 8 \
    tests/test_probe_shapes.py tests/test_precision.py tests/test_precision_probe.py \
    tests/test_recipe.py tests/test_machine.py tests/test_batching.py >"$OUT/tests.txt" 2>&1
echo "pytest exit $? at $(( $(date +%s) - t0 )) s"; tail -4 "$OUT/tests.txt"
