#!/usr/bin/env bash
# rerun of transformer_base at 16,384 tokens: bf16 and fp32 interleaved, nothing else on the machine
set -u
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:$PWD:$PWD/.site:/tmp/site
uptime
i=0
for p in bf16 fp32 bf16 fp32; do
  i=$((i+1))
  timeout 60 python3 train.py model=transformer_base device=cuda trainer.precision=$p trainer.max_tokens=16384 \
    trainer.max_steps=150 trainer.time_budget_min=0 trainer.early_stopping_patience=0 trainer.val_every_steps=1000 \
    trainer.val_subset=20 trainer.heatmaps_every=0 trainer.test=false trainer.log_every_steps=25 trainer.progress_bar=false \
    hydra.run.dir=outputs/rr/$i-$p > $OUT/$i-$p.log 2>&1
  echo "$i $p exit $?"; grep -o 'step [0-9]* |.*tok/s' outputs/rr/$i-$p/train.log | awk '{print $2, $(NF-1)}' | tr '\n' ' '; echo
done
uptime
