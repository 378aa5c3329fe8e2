#!/usr/bin/env bash
# fourth GPU check, fourth call: the default preset at its 2,048 tokens, bf16 forced against
# fp32, 1,300 updates each (same seed): BLEU at equal updates, cuDNN's attention left out
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:$PWD:$PWD/.site:/tmp/site PYTHONUNBUFFERED=1
TEST_TIMEOUT=0 SHAPES_TIMEOUT=0 RUN_TIMEOUT=95 PRESETS=transformer PRECISIONS="bf16 fp32" bash scripts/gpu_check.sh "$OUT/default-bf16" 1300 300
cat "$OUT/default-bf16/info.txt"
