"""SentenceEncoder (fixed batch shapes: a text's vector independent of its batch) vs the plain
``SentenceTransformer.encode`` it replaced (25fe52a), on LoCoMo turns and SciFact abstracts.

Prints texts/s for both in one process (each timed ``--repeat`` times, best kept), the cost ratio,
the largest |difference| between the two encoders' vectors, and whether a few texts encoded alone
give the bits they got in the full list.

Usage: RECALL_DATA_DIR=... python scripts/bench_embed.py [--short 500] [--long 100] [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import torch

from pipeline.adapters import beir, locomo
from pipeline.stages.embed import SentenceEncoder


def _texts(short: int, long: int) -> tuple[list[str], list[str]]:
    """The first ``short`` LoCoMo turns and ``long`` SciFact abstracts (texts in file order)."""
    root = Path(os.environ["RECALL_DATA_DIR"])
    turns = locomo.load(str(root / "locomo" / "locomo_dev5.json.gz")).nodes["text"].to_list()
    docs = beir.load(str(root / "beir_scifact"), max_docs=long).nodes["text"].to_list()
    return turns[:short], docs[:long]


def _best(fn, repeat: int) -> tuple[float, np.ndarray]:
    """Shortest wall time of ``repeat`` calls and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", type=int, default=500)
    ap.add_argument("--long", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    enc = SentenceEncoder()
    model = enc._load("cpu")
    for name, texts in zip(("LoCoMo turns", "SciFact abstracts"), _texts(a.short, a.long)):
        plain = lambda: model.encode(  # noqa: E731  what SentenceEncoder.encode did at 25fe52a
            texts, batch_size=enc.batch_size, normalize_embeddings=True, convert_to_numpy=True
        )
        t_old, old = _best(plain, a.repeat)
        t_new, new = _best(lambda: enc.encode(texts), a.repeat)
        alone = all(np.array_equal(enc.encode([texts[i]])[0], new[i]) for i in range(0, 50, 7))
        print(
            f"{name}: {len(texts)} texts  plain {len(texts) / t_old:.1f}/s  fixed shapes "
            f"{len(texts) / t_new:.1f}/s  ({t_new / t_old:.2f}x the time)  max |diff| "
            f"{np.abs(old - new).max():.2e}  alone == in the list: {alone}"
        )


if __name__ == "__main__":
    main()
