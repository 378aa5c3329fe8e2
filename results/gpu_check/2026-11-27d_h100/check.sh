#!/usr/bin/env bash
# fifth GPU check (2026-11-27, session 5): the whole suite with CUDA visible (more time than the
# third check gave it), then the RNN presets on CUDA for the first time, auto and fp32, 1,300 updates
set -u
export PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:$PWD:$PWD/.site:/tmp/site
python3 -c "import attnmt, hydra, omegaconf, sentencepiece, sacrebleu, torch; print('imports ok', sentencepiece.__version__, torch.__version__, torch.cuda.get_device_name())" || exit 4
TEST_TIMEOUT=230 WORKERS=14 RUN_TIMEOUT=75 SHAPES_TIMEOUT=0 PRESETS="rnn_bahdanau rnn_luong" \
    bash scripts/gpu_check.sh "$OUT" 1300 400
echo "all done at $(( $(date +%s) - t0 )) s"
tail -4 "$OUT/tests.log"; grep -E "FAILED|ERROR" "$OUT/tests.log" | head -20; cat "$OUT/info.txt"
PYTHONPATH=$PWD/src:$PWD python3 -m benchmarks.gpu_runs "$OUT/runs.tgz" 2>&1 | tail -8
