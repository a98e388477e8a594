"""SentenceEncoder (a text's vector independent of its batch) vs plain
``SentenceTransformer.encode`` (batches of 64 padded to their longest text), on LoCoMo turns,
SciFact abstracts and 76 of the bundled sample's notes (few texts over many padded widths).

One table, both encoders in one process on the same texts (each timed ``--repeat`` times, best
kept, interleaved): texts/s, our time over plain's, the least cosine between the two encoders'
vectors, and whether every checked text gives the same bytes alone, in a handful of 5 and in the
whole list. Exits 1 when a ratio exceeds ``--max-ratio`` or a check fails.

Usage: RECALL_DATA_DIR=... python scripts/bench/bench_embed.py [--short 300] [--long 76] [--small 76]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sentence_transformers import SentenceTransformer

from pipeline.adapters import beir, locomo, sample
from pipeline.encoders.models import SentenceEncoder


def _sets(short: int, long: int, small: int) -> dict[str, list[str]]:
    """The first ``short`` LoCoMo turns, ``long`` SciFact abstracts and ``small`` texts of the
    bundled sample's notes (file order)."""
    root = Path(os.environ["RECALL_DATA_DIR"])
    turns = locomo.load(str(root / "locomo" / "locomo_dev5.json.gz")).nodes["text"].to_list()
    docs = beir.load(str(root / "beir_scifact"), max_docs=long).nodes["text"].to_list()
    notes = sample.load().nodes["text"].to_list()
    return {
        "LoCoMo turns": turns[:short],
        "SciFact abstracts": docs[:long],
        "sample notes": notes[:small],
    }


def _bits_hold(enc: SentenceEncoder, texts: list[str], whole: np.ndarray, checks: int) -> bool:
    """Whether ``checks`` texts spread over the list give their in-list bytes alone and in a
    handful of 5 (the text and four others from across the list)."""
    picks = np.linspace(0, len(texts) - 1, checks).astype(int)
    for i in picks:
        if enc.encode([texts[i]])[0].tobytes() != whole[i].tobytes():
            return False
        hand = [int(i), *((i + k * len(texts) // 5) % len(texts) for k in range(1, 5))]
        got = enc.encode([texts[j] for j in hand])
        if any(got[r].tobytes() != whole[j].tobytes() for r, j in enumerate(hand)):
            return False
    return True


def _row(name, texts, enc, model, repeat, checks) -> tuple[str, float, bool]:
    """One table row: (line, our time / plain time, bits independent of the batch)."""
    t_old = t_new = float("inf")
    for _ in range(repeat):  # interleaved: a load spike hits both
        t0 = time.perf_counter()
        old = model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True)
        t_old = min(t_old, time.perf_counter() - t0)
        t0 = time.perf_counter()
        new = enc.encode(texts)
        t_new = min(t_new, time.perf_counter() - t0)
    ok = _bits_hold(enc, texts, new, checks)
    cos = float((old * new).sum(axis=1).min())
    line = (
        f"| {name} | {len(texts)} | {len(texts) / t_old:.1f} | {len(texts) / t_new:.1f} "
        f"| {t_new / t_old:.2f}x | {cos:.7f} | {ok} |"
    )
    return line, t_new / t_old, ok


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--short", type=int, default=300)
    ap.add_argument("--long", type=int, default=76)
    ap.add_argument("--small", type=int, default=76, help="sample texts: few, many widths")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--checks", type=int, default=6, help="texts checked alone and in a handful")
    ap.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    ap.add_argument("--max-ratio", type=float, default=1.25)
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    enc = SentenceEncoder()
    enc._load("cpu")  # outside the timing, as is the reference's load
    model = SentenceTransformer(str(enc.resolved_path()), device="cpu", local_files_only=True)
    model.max_seq_length = enc.max_seq_length  # the reference: a model loaded apart
    t0 = time.perf_counter()
    ok = enc.batching_ok("cpu")  # once per process, outside the table's timings
    print(
        f"batching keeps bits on this machine (the probe): {ok}, {time.perf_counter() - t0:.2f} s"
    )
    print(
        "| texts | n | plain texts/s | ours texts/s | ours/plain time | min cosine | bits alone = handful = list |"
    )
    print("|---|---|---|---|---|---|---|")
    bad = False
    for name, texts in _sets(a.short, a.long, a.small).items():
        line, ratio, ok = _row(name, texts, enc, model, a.repeat, a.checks)
        print(line, flush=True)
        bad |= ratio > a.max_ratio or not ok
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
