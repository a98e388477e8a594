"""What changes a MiniLM row's bits on this machine: the row count of a pass, or its padded width.

For a text of n tokens: whether its vector alone equals its vector in passes of other row counts
(other texts of its length around it), and which padded widths give the same bytes (each width
mapped to the narrowest width with its bytes). docs/architecture.md "Embedding bits" reads these.

Usage: python scripts/experiments/probe_embed_bits.py [--rows 1 2 3 8 17 33 64]
"""

from __future__ import annotations

import argparse

import numpy as np
import torch

from pipeline.encoders.models import LENGTH_STEP, SentenceEncoder, forward_pass, tokenize

WORDS = "the cat sat on a mat and we had tea in my house by an old red door at noon".split()


def _texts(n: int, k: int) -> list[str]:
    """``k`` texts of ``n`` MiniLM tokens (each word one token, [CLS] and [SEP] two more)."""
    rng = np.random.default_rng(n)
    return [" ".join(rng.choice(WORDS, n - 2)) for _ in range(k)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 2, 3, 8, 17, 33, 64])
    a = ap.parse_args()
    model = SentenceEncoder()._load("cpu")
    with torch.inference_mode():
        for n in (13, 40):
            toks = tokenize(model, _texts(n, max(a.rows)))
            w = -(-n // LENGTH_STEP) * LENGTH_STEP
            ref = forward_pass(model, toks.take([0], w), "cpu")[0].tobytes()
            rows = lambda r: toks.take(np.arange(r), w)  # noqa: E731
            bad = [r for r in a.rows if forward_pass(model, rows(r), "cpu")[0].tobytes() != ref]
            print(f"n={n} width {w}: row counts {a.rows}, bits differ at {bad or 'none'}")
        for n in (13, 17, 40, 120, 129, 143, 200):
            tok = tokenize(model, _texts(n, 1))
            widths = sorted({n, -(-n // 8) * 8, *range(-(-n // 16) * 16, 257, 16)})
            got = {w: forward_pass(model, tok.take([0], w), "cpu")[0].tobytes() for w in widths}
            first = {w: next(v for v in widths if got[v] == got[w]) for w in widths}
            print(f"n={n}: width -> narrowest width with the same bytes {first}")


if __name__ == "__main__":
    main()
