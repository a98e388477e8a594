"""Benchmark: two host steps of a big corpus against the way they ran before, in one process.

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_host_steps.py [--nodes 1000000] [--queries 10000]

On the synthetic corpus of ``scripts/bench/bench_pipeline.py`` (``pipeline/synth/corpus.py``, 20 names
per cluster):

- **entity keys**: ``entities.extract`` text by text (the old hub path) against
  ``entities.extract_ids`` (one scan of the joined texts), which must give the same pairs;
- **BM25 top-k**: the lexical channel of ``preset=best`` over one scope; each block of
  ``lexical.top_scores`` is ranked both by ``topk_long`` over all its positive scores (the old
  ``topk_sparse``: one packed sort of every score) and by ``topk_sparse`` (rows cut to their best
  ``k`` by ``topk_entry_mask`` first), which must give the same bits.

Prints one table: the step, each side's seconds (summed over blocks for BM25) and the ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's pipeline

from pipeline.channels import lexical  # noqa: E402
from pipeline.channels.candidates import LexicalChannel, Segments  # noqa: E402
from pipeline.ops import entities, topk  # noqa: E402
from pipeline.stages.channels import LexicalParams  # noqa: E402
from pipeline.synth.corpus import make  # noqa: E402

CONF = str(Path(__file__).resolve().parents[2] / "conf")


def full_sort(r, k: int):
    """The old ``topk_sparse``: every positive score of ``r`` sorted by ``topk_long``."""
    c = r.tocoo()
    m = c.data > 0
    return topk.topk_long(
        c.row[m].astype(np.int64), c.col[m].astype(np.int64), c.data[m].astype(np.float32), k
    )


def entity_row(texts: list[str]) -> tuple[float, float]:
    """Seconds of extract per text and of extract_ids; raises unless their pairs agree."""
    t0 = time.perf_counter()
    found = [entities.extract(t) for t in texts]
    old = time.perf_counter() - t0
    t0 = time.perf_counter()
    unit, kid, names = entities.extract_ids(texts)
    new = time.perf_counter() - t0
    want = [(i, k) for i, keys in enumerate(found) for k in keys]
    if list(zip(unit.tolist(), (names[j] for j in kid.tolist()))) != want:
        raise SystemExit("extract_ids differs from extract text by text")
    return old, new


def bm25_row(ds, nq: int) -> tuple[float, float, int]:
    """Seconds of the full sort and of topk_sparse over every block of the channel's top_scores,
    and the scores ranked; raises unless both give the same bits."""
    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("config", overrides=["preset=best"])
    p = LexicalParams.from_cfg(cfg.lexical, "lexical")
    ch = LexicalChannel.tokenise(ds.nodes, ds.queries, p)
    seconds, scores = [0.0, 0.0], [0]
    real = lexical.topk_sparse

    def both(r, k):
        t0 = time.perf_counter()
        a = full_sort(r, k)
        seconds[0] += time.perf_counter() - t0
        t0 = time.perf_counter()
        b = real(r, k)
        seconds[1] += time.perf_counter() - t0
        scores[0] += r.nnz
        if any(x.dtype != y.dtype or x.tobytes() != y.tobytes() for x, y in zip(a, b)):
            raise SystemExit("topk_sparse differs from the full sort")
        return b

    lexical.topk_sparse = both
    try:
        segs = Segments.of([("all", np.arange(ds.nodes.height), np.arange(nq))])
        ch.ranks_and_scores(segs)
    finally:
        lexical.topk_sparse = real
    return seconds[0], seconds[1], scores[0]


def main() -> int:
    """Build the corpus, time both steps, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=10_000)
    a = ap.parse_args()
    ds, _xb, _xq = make(a.nodes, a.queries, names=20, avg_degree=10)
    e_old, e_new = entity_row(ds.nodes["text"].to_list())
    b_old, b_new, n = bm25_row(ds, a.queries)
    print(f"nodes {a.nodes:,}, queries {a.queries:,}; both sides give the same answer")
    print("| step | before s | now s | before / now |\n|---|---|---|---|")
    print(
        f"| entity keys (extract per text / extract_ids) | {e_old:.2f} | {e_new:.2f} | {e_old / e_new:.1f}x |"
    )
    print(
        f"| BM25 top-k of {n:,} scores (full sort / topk_sparse) | {b_old:.2f} | {b_new:.2f} "
        f"| {b_old / b_new:.1f}x |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
