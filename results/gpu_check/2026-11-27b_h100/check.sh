#!/usr/bin/env bash
# third GPU check (2026-11-27 session 2): whole suite with CUDA visible, default preset auto/fp32
# at 1300 updates, transformer_base auto/fp32 at 16,384 tokens a batch, 300 updates
set -u
export PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:$PWD:$PWD/.site:/tmp/site
python3 -c "import attnmt, hydra, omegaconf, sentencepiece, sacrebleu, torch; print('imports ok', sentencepiece.__version__, torch.__version__, torch.cuda.get_device_name())" || exit 4
git rev-parse --short HEAD 2>/dev/null
TEST_TIMEOUT=175 WORKERS=14 RUN_TIMEOUT=85 PRESETS=transformer bash scripts/gpu_check.sh "$OUT" 1300 400
echo "default done at $(( $(date +%s) - t0 )) s"
TEST_TIMEOUT=0 RUN_TIMEOUT=95 PRESETS=transformer_base OVERRIDES="trainer.max_tokens=16384" bash scripts/gpu_check.sh "$OUT/base16k" 1300 300
echo "all done at $(( $(date +%s) - t0 )) s"
tail -3 "$OUT/tests.log"; cat "$OUT/info.txt" "$OUT/base16k/info.txt"
