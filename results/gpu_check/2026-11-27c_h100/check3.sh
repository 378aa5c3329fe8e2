#!/usr/bin/env bash
# fourth GPU check, third call: whole runs of transformer_base at 16,384 tokens a batch, auto
# (the probe chose bf16) and fp32, 300 updates each, after multihead.sdpa left cuDNN out
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:$PWD:$PWD/.site:/tmp/site PYTHONUNBUFFERED=1
TEST_TIMEOUT=0 SHAPES_TIMEOUT=0 RUN_TIMEOUT=110 PRESETS=transformer_base OVERRIDES="trainer.max_tokens=16384" bash scripts/gpu_check.sh "$OUT/base16k-runs" 1300 300
