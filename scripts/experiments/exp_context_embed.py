"""Experiment (issue 17, not part of the pipeline): embed each conversation turn together with its
neighbours in the same session (same ``doc_id``, ``seq`` ± 1), so that a short answer ("It was an
awesome time!") carries the question it answers. Everything else is ``recall run``.

    python scripts/experiments/exp_context_embed.py prev run data=locomo preset=best report=false \\
        cache_dir=/tmp/ctx-prev out_dir=runs/h17s5/locomo-ctxprev
    python scripts/experiments/exp_context_embed.py prevnext run ...   # the turn before and the turn after

Use a cache folder of its own: the channels stage's cache key holds the config and the nodes, not
the embedded texts, so a shared cache would serve the unchanged run's candidates. Results:
docs/results.md ("Turns embedded with their neighbours").
"""

from __future__ import annotations

import sys

from pipeline.stages import embed

MODE = sys.argv.pop(1)
if MODE not in ("prev", "prevnext"):
    sys.exit("usage: exp_context_embed.py prev|prevnext <recall arguments>")
_own = embed.embed_texts


def with_neighbours(nodes, include_title: bool) -> list[str]:
    """Each node's own embedded text, with the session's previous (and next) turn around it."""
    texts = _own(nodes, include_title)
    if "seq" not in nodes.columns or "doc_id" not in nodes.columns:
        return texts
    doc, seq, raw = nodes["doc_id"].to_list(), nodes["seq"].to_list(), nodes["text"].to_list()
    at = {(d, s): t for d, s, t in zip(doc, seq, raw)}
    out = []
    for d, s, t in zip(doc, seq, texts):
        before = at.get((d, s - 1)) if s is not None else None
        after = at.get((d, s + 1)) if s is not None and MODE == "prevnext" else None
        out.append("\n".join(x for x in (before, t, after) if x))
    return out


embed.embed_texts = with_neighbours

if __name__ == "__main__":
    from pipeline.cli.main import main

    main()
