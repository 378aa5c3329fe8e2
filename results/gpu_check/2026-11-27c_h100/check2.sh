#!/usr/bin/env bash
# fourth GPU check, second call: the same probe_shapes runs after multihead.sdpa left cuDNN's
# attention backend out on CUDA; first, which SDPA backend torch picks on its own
set -u
export PYTHONUNBUFFERED=1
t0=$(date +%s)
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=$PWD/src:$PWD:$PWD/.site:/tmp/site
python3 - <<'PY' 2>&1 | tee "$OUT/backends.txt"
import torch, torch.nn.functional as F
from torch.profiler import profile, ProfilerActivity
from attnmt.models.multihead import sdpa
q = torch.randn(64, 8, 37, 64, device="cuda", requires_grad=True)
mask = torch.rand(64, 1, 1, 37, device="cuda") > 0.2
for name, fn in (("F.scaled_dot_product_attention", F.scaled_dot_product_attention), ("attnmt sdpa", sdpa)):
    for m in (None, mask):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            with torch.autocast("cuda", dtype=torch.bfloat16):
                out = fn(q, q, q, m)
            out.float().sum().backward()
        ops = sorted({e.key for e in prof.key_averages() if "attention" in e.key and e.key.startswith("aten::_")})
        print(name, "mask" if m is not None else "no mask", ops)
PY
timeout 120 python3 -m benchmarks.probe_shapes --models transformer_base --device cuda \
    --out "$OUT/base16k-pad1-nocudnn.json" trainer.max_tokens=16384 2>&1 | grep -v Warning | tail -2
echo "base16k exit ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
timeout 90 python3 -m benchmarks.probe_shapes --models transformer --device cuda \
    --out "$OUT/default-pad1-nocudnn.json" 2>&1 | grep -v Warning | tail -2
echo "default exit ${PIPESTATUS[0]} at $(( $(date +%s) - t0 )) s"
timeout -s INT -k 20 60 python3 -m pytest -q --tb=short -p no:cacheprovider -n 4 \
    tests/test_multihead.py tests/test_transformer.py tests/test_probe_shapes.py >"$OUT/tests.txt" 2>&1
echo "pytest exit $? at $(( $(date +%s) - t0 )) s"; tail -4 "$OUT/tests.txt"
