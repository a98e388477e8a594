"""Batched graph diffusion (PEDSA, PPR) vs per-query loops, on the 2Wiki mention graph and a synthetic power-law graph.

Methods (time per query):
  batched PEDSA     ``pipeline.ops.pedsa.pedsa`` over blocks of ``--pedsa-block`` queries: sparse (N, B)
                    float32 seeds in, sparse results out (sparse frontier, sparse × sparse products)
  batched PPR       ``pipeline.ops.ppr.ppr`` over blocks of ``--ppr-block`` queries, damping 0.5, tol 1e-6:
                    sparse seeds in, dense (N, B) float32 scores out (solved on the seeds' components)
  PEDSA reference   ST-BME's per-query dict loop (``pipeline/bme/propagate.py::pedsa_reference``) with the
                    adjacency lists built once per graph instead of once per call; it is checked against
                    the literal function on a few queries
  igraph PPR        ``Graph.personalized_pagerank(damping=0.5, reset=<seed weights>, weights="weight",
                    directed=False, implementation="prpack")`` per query, as HippoRAG calls it
  scipy PPR         our ``ppr`` with B=1 per query, dense seed vector (each call also pays ppr's setup:
                    row sums, the CSR transpose, the component labels)

Per-query loops run on a random subset of the queries and are extrapolated per query. Every query has
10 distinct seed nodes with energies U(0.1, 2.0) (PPR: the same energies normalised to sum 1). PPR runs
on the normal (non-inhibitory) edges only. Thread settings are left as they are.

The last line printed is ``min speedup vs per-query loops: <ratio>``.

Block sizes (0 = auto): PEDSA 2^24 // N queries per call, PPR 2^26 // N (its dense output is N×B).
Building the sparse seed matrix of a block and reading its results is inside the batched timings.

Usage: python scripts/bench/bench_diffusion.py [--quick] [--subset 100] [--pedsa-block 0] [--ppr-block 0]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gzip
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pipeline.bme.propagate import adjacency_lists, pedsa_lists, pedsa_reference  # noqa: E402
from pipeline.ops.pedsa import pedsa  # noqa: E402
from pipeline.ops.ppr import ppr  # noqa: E402
from pipeline.stages import graph  # noqa: E402

CORPUS = Path("/work/shared/data/hipporag/2wikimultihopqa_corpus.json.gz")
MAX_BLOCK_ELEMS = 2**26  # N×B float32 per block at most (ppr's dense output)
PEDSA_BLOCK_ELEMS = 2**24  # N×B per PEDSA block (bounds the step-2 products on hub-heavy graphs)
N_SEEDS = 10


# ---------------------------------------------------------------- graphs and queries


def wiki_graph(path: Path):
    """2Wiki passages as nodes (text = title + "\\n" + text), title-mention edges."""
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as f:
        corpus = json.load(f)
    nodes = pl.DataFrame(
        {
            "node_id": [str(i) for i in range(len(corpus))],
            "title": [p["title"] for p in corpus],
            "text": [f"{p['title']}\n{p['text']}" for p in corpus],
        }
    )
    edges = graph.build(nodes, None, graph.GraphParams.defaults(temporal=False, mentions=True))
    return nodes.height, edges


def powerlaw_graph(n: int, m: int, seed: int, inhib_frac: float = 0.05, zipf_a: float = 0.8):
    """Preferential-attachment-like graph: source uniform, target ∝ rank^-a over a random node order."""
    rng = np.random.default_rng(seed)
    w = np.arange(1, n + 1, dtype=np.float64) ** -zipf_a
    w /= w.sum()
    order = rng.permutation(n)
    src = rng.integers(0, n, int(m * 1.02) + 10)
    dst = order[rng.choice(n, len(src), p=w)]
    keep = src != dst
    src, dst = src[keep][:m], dst[keep][:m]
    edges = pl.DataFrame(
        {
            "src": src,
            "dst": dst,
            "weight": rng.uniform(0.1, 1.0, m).astype(np.float32),
            "inhibit": rng.random(m) < inhib_frac,
            "relation": "synthetic",
        }
    ).cast(graph.EDGE_SCHEMA)
    return n, edges


def make_queries(n: int, q: int, seed: int):
    """(q, 10) distinct seed nodes per query and their energies."""
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.choice(n, N_SEEDS, replace=False) for _ in range(q)])
    return idx, rng.uniform(0.1, 2.0, (q, N_SEEDS))


def sparse(n: int, idx: np.ndarray, en: np.ndarray, normalise: bool = False):
    """(N, B) float32 CSC seed matrix for the queries in ``idx``/``en`` (columns summing to 1 if ``normalise``)."""
    import scipy.sparse as sp

    if normalise:
        en = en / en.sum(axis=1, keepdims=True)
    b, k = idx.shape
    return sp.csc_matrix(
        (en.ravel().astype(np.float32), idx.ravel(), np.arange(0, b * k + 1, k)), shape=(n, b)
    )


def dense(n: int, idx: np.ndarray, en: np.ndarray, normalise: bool = False) -> np.ndarray:
    """(N, B) float32 seed matrix for the queries in ``idx``/``en`` (columns summing to 1 if ``normalise``)."""
    if normalise:
        en = en / en.sum(axis=1, keepdims=True)
    out = np.zeros((n, len(idx)), np.float32)
    out[idx.T, np.arange(len(idx))[None, :]] = en.T
    return out


# ---------------------------------------------------------------- per-query baselines


def igraph_graph(adj_sym, n: int):
    """Undirected weighted igraph graph from the symmetric adjacency (one edge per nonzero above the diagonal)."""
    import igraph as ig
    import scipy.sparse as sp

    u = sp.triu(adj_sym, k=1).tocoo()
    g = ig.Graph(n=n, edges=np.c_[u.row, u.col].tolist(), directed=False)
    g.es["weight"] = u.data.astype(np.float64).tolist()
    return g


def igraph_ppr(g, reset: np.ndarray) -> np.ndarray:
    return np.asarray(
        g.personalized_pagerank(
            vertices=range(g.vcount()),
            directed=False,
            damping=0.5,
            reset=reset,
            weights="weight",
            implementation="prpack",
        )
    )


# ---------------------------------------------------------------- the benchmark


def clock(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def batched(kind, n, A, I, idx, en, block, keep):
    """Run all queries in blocks; return (seconds, {query: result column}, iterations) for the queries in ``keep``."""
    kept, iters = {}, []
    t0 = time.perf_counter()
    for s in range(0, len(idx), block):
        cols = slice(s, min(s + block, len(idx)))
        if kind == "pedsa":
            r = pedsa(A, I, sparse(n, idx[cols], en[cols]))
        else:
            r, info = ppr(A, sparse(n, idx[cols], en[cols], normalise=True), damping=0.5, tol=1e-6)
            iters.append(info.n_iter)
            if not info.converged:
                raise SystemExit(f"ppr did not converge: {info}")
        for q in keep:
            if cols.start <= q < cols.stop:
                kept[q] = column(r, q - cols.start)
    return time.perf_counter() - t0, kept, iters


def column(r, j: int) -> np.ndarray:
    """Column ``j`` of a dense (N, B) array or a CSC matrix, as float64 (CSC: from its arrays, since
    scipy's column indexing costs ~0.1 ms a call)."""
    if not hasattr(r, "indptr"):
        return np.array(r[:, j], dtype=np.float64)
    out = np.zeros(r.shape[0])
    lo, hi = r.indptr[j], r.indptr[j + 1]
    out[r.indices[lo:hi]] = r.data[lo:hi]
    return out


def bench_graph(name, n, edges, sizes, subset, n_literal, args, rows, ratios, checks):
    A, I = graph.adjacency(edges, n)
    n_edges = edges.height
    n_inhib = int(edges["inhibit"].sum())
    isolated = int((np.diff(A.indptr) == 0).sum())
    print(
        f"\n{name}: {n:,} nodes, {n_edges:,} edges ({n_inhib:,} inhibitory), "
        f"{A.nnz:,} nonzeros in the symmetric adjacency, {isolated:,} nodes without normal edges",
        flush=True,
    )
    qmax = max(sizes)
    idx, en = make_queries(n, qmax, seed=args.seed + 1)
    rng = np.random.default_rng(args.seed + 2)
    sub = np.sort(rng.choice(min(sizes), subset, replace=False))  # in every query set
    pb = max(1, min(args.pedsa_block or PEDSA_BLOCK_ELEMS // n, MAX_BLOCK_ELEMS // n, qmax))
    rb = max(1, min(args.ppr_block or MAX_BLOCK_ELEMS // n, MAX_BLOCK_ELEMS // n, qmax))

    # warm-up (first-call overheads: imports, allocator)
    pedsa(A, I, sparse(n, idx[:2], en[:2]))
    ppr(A, sparse(n, idx[:2], en[:2], normalise=True), damping=0.5, tol=1e-6)

    # per-query loops on the subset
    rows_e = list(
        zip(
            edges["src"].to_list(),
            edges["dst"].to_list(),
            edges["weight"].to_list(),
            edges["inhibit"].to_list(),
        )
    )
    normal = [(a, b, w) for a, b, w, h in rows_e if not h]
    inhib = [(a, b, w) for a, b, w, h in rows_e if h]
    adj_lists = adjacency_lists(normal, inhib)
    seeds = [{int(i): float(e) for i, e in zip(idx[q], en[q])} for q in sub]
    t_ref, ref = clock(lambda: [pedsa_lists(n, adj_lists, s) for s in seeds])
    t_scipy, sc = clock(
        lambda: [
            ppr(A, dense(n, idx[q : q + 1], en[q : q + 1], normalise=True), damping=0.5, tol=1e-6)[
                0
            ][:, 0].astype(np.float64)
            for q in sub
        ]
    )
    t_build_ig, g = clock(lambda: igraph_graph(A, n))
    resets = [
        dense(n, idx[q : q + 1], en[q : q + 1], normalise=True)[:, 0].astype(np.float64)
        for q in sub
    ]
    t_ig, igr = clock(lambda: [igraph_ppr(g, r) for r in resets])

    # the literal test function (rebuilds its adjacency every call) on a few queries: parity + its cost
    t_lit, lit = clock(lambda: [pedsa_reference(n, normal, inhib, s) for s in seeds[:n_literal]])
    d_lit = max(float(np.abs(a - b).max()) for a, b in zip(lit, ref))
    checks.append(
        (
            name,
            f"ref loop (lists built once) vs literal propagate.pedsa_reference, {n_literal} queries",
            d_lit,
            1e-12,
        )
    )

    loop_ms = {
        "ref": 1e3 * t_ref / subset,
        "scipy": 1e3 * t_scipy / subset,
        "igraph": 1e3 * t_ig / subset,
        "literal": 1e3 * t_lit / n_literal,
    }
    for q_total in sizes:
        t_pe, pe, _ = batched("pedsa", n, A, I, idx[:q_total], en[:q_total], pb, set(sub.tolist()))
        t_pr, pr, iters = batched(
            "ppr", n, A, None, idx[:q_total], en[:q_total], rb, set(sub.tolist())
        )
        ms_pe, ms_pr = 1e3 * t_pe / q_total, 1e3 * t_pr / q_total
        tag = f"{name}, {q_total:,} q"
        rows += [
            (tag, f"batched PEDSA (B={pb})", f"all {q_total:,}", ms_pe, t_pe, False),
            (
                tag,
                f"batched PPR (B={rb}, {min(iters)}–{max(iters)} iters)",
                f"all {q_total:,}",
                ms_pr,
                t_pr,
                False,
            ),
            (
                tag,
                "per-query PEDSA reference (dict loop)",
                f"{subset}",
                loop_ms["ref"],
                loop_ms["ref"] * q_total / 1e3,
                True,
            ),
            (
                tag,
                "per-query igraph PPR (prpack)",
                f"{subset}",
                loop_ms["igraph"],
                loop_ms["igraph"] * q_total / 1e3,
                True,
            ),
            (
                tag,
                "per-query scipy PPR (our ppr, B=1)",
                f"{subset}",
                loop_ms["scipy"],
                loop_ms["scipy"] * q_total / 1e3,
                True,
            ),
            (
                tag,
                "(info) literal propagate.pedsa_reference, rebuilds adjacency per call",
                f"{n_literal}",
                loop_ms["literal"],
                loop_ms["literal"] * q_total / 1e3,
                True,
            ),
        ]
        ratios += [
            (tag, "batched PEDSA vs per-query PEDSA reference", loop_ms["ref"] / ms_pe),
            (tag, "batched PPR vs igraph loop", loop_ms["igraph"] / ms_pr),
            (tag, "batched PPR vs per-query scipy loop", loop_ms["scipy"] / ms_pr),
        ]
        # correctness on the subset
        d_pe = max(float(np.abs(pe[q] - r).max()) for q, r in zip(sub, ref))
        d_sc = max(float(np.abs(pr[q] - s).max()) for q, s in zip(sub, sc))
        d_ig = max(float(np.abs(pr[q] / pr[q].sum() - r / r.sum()).max()) for q, r in zip(sub, igr))
        checks += [
            (tag, "batched PEDSA vs per-query reference", d_pe, 1e-5),
            (tag, "batched PPR vs per-query scipy PPR", d_sc, 1e-5),
            (tag, "batched PPR vs igraph PPR (both normalised to sum 1)", d_ig, 1e-4),
        ]
        print(f"  {q_total:,} queries: PEDSA {t_pe:.1f} s, PPR {t_pr:.1f} s", flush=True)
    print(
        f"  loops on {subset} queries: reference {t_ref:.1f} s, scipy PPR {t_scipy:.1f} s, "
        f"igraph PPR {t_ig:.1f} s (+{t_build_ig:.1f} s to build the igraph graph once), "
        f"literal reference {t_lit:.1f} s for {n_literal}",
        flush=True,
    )
    return {
        "name": name,
        "nodes": n,
        "edges": n_edges,
        "inhibitory": n_inhib,
        "nnz": int(A.nnz),
        "isolated": isolated,
    }


def threads_note() -> str:
    parts = [f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()})"]
    try:
        from threadpoolctl import threadpool_info

        parts += [f"{i['internal_api']} {i['num_threads']} threads" for i in threadpool_info()]
    except ImportError:
        pass
    parts.append("scipy sparse products single-threaded; torch not used")
    return "; ".join(parts)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="2Wiki + 20k/200k synthetic, 200 queries, loops on 30"
    )
    ap.add_argument(
        "--subset",
        type=int,
        default=0,
        help="queries timed in the per-query loops (default 100; quick 30)",
    )
    ap.add_argument(
        "--literal", type=int, default=3, help="queries run through the literal test function"
    )
    ap.add_argument(
        "--pedsa-block",
        type=int,
        default=0,
        help="queries per batched PEDSA call (0: auto, 2^24/N; capped at 2^26/N)",
    )
    ap.add_argument(
        "--ppr-block",
        type=int,
        default=0,
        help="queries per batched PPR call (0: auto, 2^26/N, i.e. the largest dense output allowed)",
    )
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="markdown + json record (default runs/bench_diffusion[_quick])",
    )
    args = ap.parse_args()
    import igraph
    import scipy

    if args.quick:
        sizes, subset, syn = [200], args.subset or 30, (20_000, 200_000)
    else:
        sizes, subset, syn = [1_000, 10_000], args.subset or 100, (100_000, 1_000_000)
    out = args.out or ROOT / "runs" / ("bench_diffusion_quick" if args.quick else "bench_diffusion")
    machine = threads_note()
    print(
        f"machine: {machine}; numpy {np.__version__}, scipy {scipy.__version__}, igraph {igraph.__version__}"
    )

    rows, ratios, checks, graphs = [], [], [], []
    t0 = time.perf_counter()
    n, edges = wiki_graph(args.corpus)
    graphs.append(
        bench_graph(
            "2Wiki mentions", n, edges, sizes, subset, args.literal, args, rows, ratios, checks
        )
    )
    n, edges = powerlaw_graph(*syn, seed=args.seed)
    graphs.append(
        bench_graph(
            f"power-law {syn[0] // 1000}k/{syn[1] // 1000}k",
            n,
            edges,
            sizes,
            subset,
            args.literal,
            args,
            rows,
            ratios,
            checks,
        )
    )
    wall = time.perf_counter() - t0

    lines = [
        f"Machine: {machine}. numpy {np.__version__}, scipy {scipy.__version__}, python-igraph "
        f"{igraph.__version__}. Run {dt.date.today().isoformat()}, {wall:.0f} s in all.",
        "",
    ]
    lines += [
        "| graph | nodes | edges (inhibitory) | symmetric nnz | nodes without normal edges |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {g['name']} | {g['nodes']:,} | {g['edges']:,} ({g['inhibitory']:,}) | {g['nnz']:,} | {g['isolated']:,} |"
        for g in graphs
    ]
    lines += [
        "",
        "| graph, queries | method | queries timed | ms / query | total s |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {tag} | {m} | {timed} | {ms:.3f} | {'≈' if extrap else ''}{tot:.2f} |"
        for tag, m, timed, ms, tot, extrap in rows
    ]
    lines += [
        "",
        "≈: extrapolated from the timed subset. PPR runs on the normal edges only; the per-query scipy "
        "row includes ppr's per-call setup (row sums, CSR transpose, component labels).",
        "",
        "| graph, queries | speedup | × |",
        "|---|---|---|",
    ]
    lines += [f"| {tag} | {what} | {r:.1f} |" for tag, what, r in ratios]
    lines += [
        "",
        "| graph, queries | correctness check | max abs diff | tolerance | ok |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {tag} | {what} | {d:.2e} | {tol:.0e} | {'yes' if d <= tol else 'NO'} |"
        for tag, what, d, tol in checks
    ]
    table = "\n".join(lines)
    print("\n" + table)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(table + "\n")
    out.with_suffix(".json").write_text(
        json.dumps(
            {
                "machine": machine,
                "quick": args.quick,
                "wall_s": wall,
                "graphs": graphs,
                "rows": [
                    dict(
                        zip(
                            ("graph", "method", "timed", "ms_per_query", "total_s", "extrapolated"),
                            r,
                        )
                    )
                    for r in rows
                ],
                "ratios": [dict(zip(("graph", "ratio", "value"), r)) for r in ratios],
                "checks": [dict(zip(("graph", "check", "max_abs_diff", "tol"), c)) for c in checks],
            },
            indent=1,
        )
    )
    print(f"\nrecorded: {out.with_suffix('.md')}, {out.with_suffix('.json')}")
    failed = [c for c in checks if not c[2] <= c[3]]
    if failed:
        print(f"{len(failed)} correctness check(s) failed (see table)")
    print(f"min speedup vs per-query loops: {min(r for *_, r in ratios):.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
