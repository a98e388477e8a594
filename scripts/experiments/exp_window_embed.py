"""Experiment (issue 17, not part of the pipeline): embed a text longer than the encoder's window
(MiniLM: 256 tokens, 254 of text) in overlapping windows (254 tokens, stride 192, cut at the
tokenizer's character offsets) and pool the windows into the node's one vector, so that the end
of a long abstract counts too. Everything else is ``recall run``; a short text is embedded as before.

    python scripts/experiments/exp_window_embed.py mean run data=scifact preset=best report=false \\
        cache_dir=/tmp/win-mean out_dir=runs/h17s6/scifact-best-winmean
    python scripts/experiments/exp_window_embed.py firstmean run ...   # normalise(first window + mean)

Pools: ``mean`` = normalised mean of the windows; ``firstmean`` = normalised sum of the first window
(today's vector) and that mean. Use a cache folder of its own (the channels stage's cache key holds
the config and nodes, not the vectors). Results: docs/results.md ("Long texts embedded in windows").
"""

from __future__ import annotations

import sys

import numpy as np

from pipeline.encoders.models import embed_cached
from pipeline.stages import embed

MODE = sys.argv.pop(1)
if MODE not in ("mean", "firstmean"):
    sys.exit("usage: exp_window_embed.py mean|firstmean <recall arguments>")
WIDTH, STRIDE = 254, 192
_own = embed.embed_texts


def windows(tokenizer, texts: list[str]) -> tuple[list[str], np.ndarray]:
    """Each text's windows (character spans of WIDTH tokens, STRIDE apart) and their owners."""
    out, owner = [], []
    for j, text in enumerate(texts):
        offs = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        offs = offs["offset_mapping"]
        n = len(offs)
        starts = [0] if n <= WIDTH else list(range(0, n - WIDTH + STRIDE, STRIDE))
        for s in starts:
            end = min(s + WIDTH, n)
            out.append(text[offs[s][0] : offs[end - 1][1]] if n else text)
            owner.append(j)
            if end >= n:
                break
    return out, np.asarray(owner)


def pooled(cfg, nodes, device):
    """``embed.embed_nodes`` with every node's vector pooled from its windows."""
    from pathlib import Path

    from pipeline.contract.registry import call_target
    from pipeline.encoders.models import EmbeddingCache

    encoder = call_target(cfg.embed.encoder)
    cache = EmbeddingCache(Path(cfg.cache_dir) / f"emb-{encoder.model_id}.sqlite", encoder.dim)
    texts = _own(nodes, cfg.embed.include_title)
    wins, owner = windows(encoder._load(device).tokenizer, texts)
    xw, n = embed_cached(encoder, wins, cache, device)
    starts = np.r_[0, np.flatnonzero(np.diff(owner)) + 1]  # owners ascend: each text's first window
    first = xw[starts]
    mean = np.zeros_like(first)
    np.add.at(mean, owner, xw)
    mean /= np.linalg.norm(mean, axis=1, keepdims=True)
    vec = mean if MODE == "mean" else first + mean
    vec /= np.linalg.norm(vec, axis=1, keepdims=True)
    print(f"{len(texts)} texts, {len(wins)} windows", file=sys.stderr)
    return encoder, cache, vec.astype(np.float32), n


embed.embed_nodes = pooled

if __name__ == "__main__":
    from pipeline.cli.main import main

    main()
