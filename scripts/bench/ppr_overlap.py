"""How far a PPR solver's top-`keep` sets are from the exact solver's, on a real run's inputs.

    .venv/bin/python scripts/bench/ppr_overlap.py data=musique preset=best diffuse.solver=push [overrides]

Runs ``querypath.recall_queries`` (the query path of ``recall run``) with ``diffuse.SOLVERS``
wrapped: every call of the configured solver also calls the exact solver (``ops.ppr.ppr_top``) on
the same adjacency and seeds (hubs and hub seeds included), and the two top lists are compared per
query. Prints, for k in 10, 50 and ``keep``: the mean over queries of |top-k ∩ exact top-k| /
min(k, |exact top-k|), the share of queries whose top-k sets are equal, and the exact PPR mass of
the solver's top k over the exact top k's (``top_overlap``). Nothing is written.
``scripts/bench/bench_pipeline.py --overlap`` uses the same wrapper on the synthetic corpus.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from pipeline.ops.topk import topk_long
from pipeline.stages import diffuse

CONF = str(Path(__file__).resolve().parents[2] / "conf")


def top_overlap(got, ref, ks: list[int]) -> dict[int, tuple[np.ndarray, ...]]:
    """Per k: (overlap share, equal set, mass share) per query column that the exact solver
    reached; ``got`` and ``ref`` are solver results (node, col, score, ...). The mass share is the
    exact score summed over the solver's top k (0 for a node outside the exact top list) over the
    exact top k's: near-ties in a tail swap nodes but hardly change it."""
    g_col, g_node, _g, g_rank = topk_long(got[1], got[0], got[2], max(ks))
    r_col, r_node, r_val, r_rank = topk_long(ref[1], ref[0], ref[2], max(ks))
    size = int(max(g_node.max(initial=0), r_node.max(initial=0))) + 1
    cols = np.unique(r_col)
    out = {}
    for k in ks:
        gk = g_col[g_rank <= k] * size + g_node[g_rank <= k]
        rk = r_col[r_rank <= k] * size + r_node[r_rank <= k]
        hit = np.bincount(r_col[r_rank <= k][np.isin(rk, gk)], minlength=cols.max(initial=0) + 1)
        n_ref = np.bincount(r_col[r_rank <= k], minlength=hit.size)
        n_got = np.bincount(g_col[g_rank <= k], minlength=hit.size)[: hit.size]
        share = hit[cols] / np.minimum(k, n_ref[cols])
        exact_of = dict(zip(rk.tolist(), r_val[r_rank <= k].tolist()))
        full = dict(zip((r_col * size + r_node).tolist(), r_val.tolist()))
        got_mass = np.bincount(
            g_col[g_rank <= k], weights=[full.get(c, 0.0) for c in gk.tolist()], minlength=hit.size
        )[: hit.size]
        ref_mass = np.bincount(
            r_col[r_rank <= k], weights=list(exact_of.values()), minlength=hit.size
        )
        mass = got_mass[cols] / np.where(ref_mass[cols] > 0, ref_mass[cols], 1.0)
        out[k] = (share, (hit[cols] == n_ref[cols]) & (n_got[cols] == n_ref[cols]), mass)
    return out


@contextmanager
def recording(stats: list):
    """``diffuse.SOLVERS`` wrapped so that each solve also runs the exact solver; appends one
    :func:`top_overlap` result per solve to ``stats``."""
    real = dict(diffuse.SOLVERS)

    def wrap(name):
        def solve(adj, pers, rows, p):
            got = real[name](adj, pers, rows, p)
            ref = real["exact"](adj, pers, rows, p)
            stats.append(top_overlap(got, ref, sorted({10, 50, p.keep or 10**9})))
            return got

        return solve

    for name in real:
        diffuse.SOLVERS[name] = wrap(name)
    try:
        yield
    finally:
        diffuse.SOLVERS.update(real)


def summary(stats: list) -> str:
    """One line per k: mean overlap and share of queries with equal sets, over every solve."""
    lines = []
    for k in stats[0] if stats else []:
        share = np.concatenate([s[k][0] for s in stats])
        same = np.concatenate([s[k][1] for s in stats])
        mass = np.concatenate([s[k][2] for s in stats])
        lines.append(
            f"top-{k}: mean overlap with the exact solver {share.mean():.4f} (min {share.min():.3f})"
            f", queries with the same set {same.mean():.1%} of {share.size:,}; exact PPR mass"
            f" captured {mass.mean():.4f} (min {mass.min():.3f})"
        )
    return "\n".join(lines)


def main() -> int:
    """Compose ``recall run``'s config from the arguments, run the query path, print the overlap."""
    from hydra import compose, initialize_config_dir

    from pipeline.contract.ingest import nodes_and_queries
    from pipeline.contract.registry import call_target
    from pipeline.core import backend
    from pipeline.core.stagelog import StageLog
    from pipeline.run import querypath

    with initialize_config_dir(config_dir=CONF, version_base="1.3"):
        cfg = compose("config", overrides=sys.argv[1:])
    ds = call_target(cfg.data)
    nodes, queries = nodes_and_queries(ds, cfg.get("query_part"))
    stats: list = []
    with recording(stats):
        querypath.recall_queries(
            cfg, ds, nodes, queries, backend.resolve_device(cfg.device), StageLog()
        )
    print(f"solver={cfg.diffuse.solver} push_eps={cfg.diffuse.push_eps} keep={cfg.diffuse.keep}")
    print(summary(stats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
