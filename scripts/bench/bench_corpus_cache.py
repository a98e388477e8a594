"""Benchmark: the corpus-side values a later run reads back from disk (``pipeline.core.npzcache``)
against computing them, in one process, on the synthetic corpus of ``scripts/bench/bench_pipeline.py``.

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_corpus_cache.py [--nodes 1000000] [--repeat 3]

Rows: the nodes' field tokens (``LexicalChannel.tokenise``'s node side: ``lexical.tokenize_fields``
with ``preset=best``'s tokenizer, against ``channels.token_cache.tokenised`` reading its file) and
their entity mentions (``entities.extract_ids`` with the entity layer's flags, against
``ops.entity_cache.extract_ids`` reading its file). Each side runs ``--repeat`` times (the
median's seconds; the cache in a fresh temporary folder, written once before the reads: that
first run's seconds, computing, keying and writing, are a column of their own);
the table says whether the read-back value equals the computed one, array by array, and the
file's size.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's pipeline

from pipeline.channels import lexical, token_cache  # noqa: E402
from pipeline.channels.candidates import node_fields  # noqa: E402
from pipeline.core import npzcache  # noqa: E402
from pipeline.ops import entities, entity_cache  # noqa: E402
from pipeline.stages import hubs  # noqa: E402
from pipeline.stages.channels import LexicalParams  # noqa: E402
from pipeline.synth.corpus import make  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_pipeline  # noqa: E402
from bench_pair_scores import timed  # noqa: E402  (median seconds of repeats)


def same_tokens(a: lexical.Tokens, b: lexical.Tokens) -> bool:
    arrays = lambda t: [  # noqa: E731
        *[x for m in t.fields.values() for x in (m.data, m.indices, m.indptr)],
        *t.places,
    ]
    return list(a.vocab.items()) == list(b.vocab.items()) and all(
        x.dtype == y.dtype and np.array_equal(x, y) for x, y in zip(arrays(a), arrays(b))
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    ds, _xb, _xq = make(a.nodes, 100, names=20, avg_degree=10)
    cfg = bench_pipeline.compose_cfg("best", [], tempfile.mkdtemp(prefix="bench_corpus_cache-"))
    p = LexicalParams.from_cfg(cfg.lexical, "lexical")
    settings = (p.stopwords, p.stemmer, p.tokenizer, p.cjk_bigrams, p.cjk_min_len, p.cjk_set)
    fields, texts = node_fields(ds.nodes), ds.nodes["text"].to_list()
    kw = hubs._extract_kw(hubs.HubParams.from_cfg(cfg.graph.hubs, "graph.hubs"))
    tok = lambda: lexical.make_tokenizer(*settings[:-1])  # noqa: E731
    print(
        f"{a.nodes:,} synthetic nodes (preset=best's tokenizer and entity flags), median of {a.repeat}"
    )
    print(
        "| value | computed s | first run (computed, keyed, written) s | read back s | speed-up "
        "| same | file MB |\n|---|---|---|---|---|---|---|"
    )
    with tempfile.TemporaryDirectory(prefix="bench_corpus_cache-") as root:
        tokens, cold = timed(lambda: lexical.tokenize_fields(tok(), fields, p.cjk_set), a.repeat)
        _, first = timed(  # computed, keyed and written once: a cold run's cost
            lambda: token_cache.tokenised(tok(), fields, settings, Path(root) / "tokens"), 1
        )
        got, warm = timed(
            lambda: token_cache.tokenised(tok(), fields, settings, Path(root) / "tokens"), a.repeat
        )
        size = sum(f.stat().st_size for f in (Path(root) / "tokens").glob("*.npz")) / 1e6
        print(
            f"| field tokens | {cold:.2f} | {first:.2f} | {warm:.2f} | {cold / warm:.1f}x | "
            f"{same_tokens(tokens, got)} | {size:,.0f} |"
        )
        ref, cold = timed(lambda: entities.extract_ids(texts, **kw), a.repeat)
        _, first = timed(lambda: entity_cache.extract_ids(texts, Path(root) / "entities", **kw), 1)
        got, warm = timed(
            lambda: entity_cache.extract_ids(texts, Path(root) / "entities", **kw), a.repeat
        )
        size = sum(f.stat().st_size for f in (Path(root) / "entities").glob("*.npz")) / 1e6
        same = all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(ref[:2], got[:2]))
        print(
            f"| entity mentions | {cold:.2f} | {first:.2f} | {warm:.2f} | {cold / warm:.1f}x | "
            f"{same and ref[2] == got[2]} | {size:,.0f} |"
        )
    print(f"(cached from {npzcache.MIN_ROWS:,} nodes on; smaller groups compute each time)")


if __name__ == "__main__":
    main()
