#!/usr/bin/env bash
# One prepared GPU check, for the lent device machine (or any CUDA box with the package installed):
# which FAISS/CuPy/cuGraph it loads, the GPU-marked tests (parity with a cache folder per device,
# the cuGraph PageRank/Leiden/components dispatch, CuPy diffusion) and the CPU twins of the CuPy
# guards, then a timed sample run on cuda next to the same run on cpu.
# On the device machine, missing wheels travel in .whl/ (see the device tool's README).
set -euo pipefail
cd "$(dirname "$0")/.."
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
export HF_HUB_OFFLINE=1 PYTHONUNBUFFERED=1
OUT="${OUT:-/tmp/device_check}"
mkdir -p "$OUT"
python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
python3 - <<'PY' 2>&1 | tee "$OUT/gpu_libs.log" || true
from pipeline import backend
print(backend.faiss_summary())
for mod in ("cupy", "cugraph", "cudf"):
    try:
        __import__(mod)
    except ImportError as exc:
        print(mod, "does not import:", exc)
print("distributions", backend.distributions())
PY
python3 -m pytest -q -rs -m gpu tests/ 2>&1 | tee "$OUT/gpu_tests.log"
python3 -m pytest -q tests/test_xp_guards.py tests/test_graphalgo.py 2>&1 | tail -3 | tee -a "$OUT/gpu_tests.log"
for dev in cpu cuda; do
  python3 -m pipeline run preset=best device=$dev out_dir="$OUT/run-$dev" cache_dir="/tmp/cache-$dev" 2>&1 | tail -3
  python3 -c "import json,sys; m=json.load(open('$OUT/run-$dev/manifest.json')); print('$dev', m['timings_s'], m.get('graph_algorithms'), m['fallbacks'])"
done
# issue 6: the 1M-node end-to-end table (same script and table as on the CPU), bounded in time
timeout 300 python3 scripts/bench_pipeline.py --sizes 1000000 --queries 1000 device=cuda 2>&1 | tail -10 | tee "$OUT/bench_pipeline_1m.log" || true
