"""The differential harness's machinery (tests/system/test_differential.py): the same data through every
path, each run with its own cache, output folder and memo, the recall tables compared by their
value by value (floats by their bits); probes that record which side of each size threshold a run reached; and the
planted mutants that prove the comparison can fail.

A path is a function ``(recipe, data, where) -> recall frame`` sorted by (query_id, rank).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl
from hydra import compose as hcompose
from hydra import initialize_config_dir

from pipeline.run import packs, precompute
from tests.helpers import differential_corpus as corpus
from tests.helpers.isolated import fresh_cfg, fresh_run
from tests.helpers.paths import REPO

COMMON = ["device=cpu", "embed=hashing", "report=false", "k=10"]
# the OKS presets read the memory curve at each run's start (default_now: start); the two sides of a
# comparison share the newest-stamp reference time instead (tests/run/test_clock.py checks start)
NEWEST = ["default_now=null"]
RECIPES = {
    "best": ["preset=best"],  # hybrid channels, entity hubs, PPR by forward push, top-k (packable)
    "best-exact": ["preset=best", "diffuse.solver=exact"],  # the exact PPR solver's chunks/blocks
    "bme": ["preset=bme"],  # PEDSA, anchors, scope policy, DPP 30 of 90 (group by group)
    "bme+novelty": ["preset=bme", "novelty=bme"],  # and BME's NMF/FISTA novelty gate
    "dpp-wide": ["preset=best", "select=dpp", "select.target=90"],  # DPP pools of 270 > GRAM_MAX_P
    "oks_team": ["preset=oks_team", *NEWEST],  # BM25 + collab (team-sealed co-use), Snake Merge
    "oks-native": ["preset=oks", "oks_backend.search_backend=native", *NEWEST],  # OKS's 6+1 factors
}
EDIT_SEED = 7
_runs = itertools.count()


def config(recipe: str, extra: list[str] = ()):
    """The recipe's config (its folders are set per run by ``isolated.fresh_cfg``)."""
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return hcompose("config", overrides=[*COMMON, *RECIPES[recipe], *extra])


def name(tag: str) -> str:
    """A new folder name for one run (``isolated`` refuses a name twice: no shared state)."""
    return f"{next(_runs):03d}-{tag}"


def sorted_recall(frame: pl.DataFrame) -> pl.DataFrame:
    """Every column, rows by (query_id, rank)."""
    return frame.sort(["query_id", "rank"], maintain_order=True)


def run(recipe: str, data: dict, root: Path, tag: str, extra=(), shuffle=None) -> pl.DataFrame:
    """``runner.run`` (the API) on ``data`` with a fresh cache, output folder and memo, the memo
    kept across the run's groups as a Ray worker keeps one (``isolated.fresh_run``)."""
    cfg = config(recipe, list(extra))
    got = fresh_run(cfg, root, name(tag), dataset=corpus.dataset(data, shuffle), with_memo=True)
    return sorted_recall(got.recall())


def same(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    """Exact equality: the same columns in the same order with the same dtypes, the same nulls, and
    every value the same — floats compared by their bits (so 0.0 ≠ -0.0 and a NaN equals only the
    same NaN). Arrow IPC bytes are stricter than the values: two equal frames built differently
    (a cache concatenated from partitions) can carry other validity buffers."""
    if list(a.schema.items()) != list(b.schema.items()) or a.height != b.height:
        return False
    for c in a.columns:
        x, y = a[c], b[c]
        if not x.is_null().equals(y.is_null()):
            return False
        if x.dtype.is_float():
            bits = {pl.Float32: np.uint32, pl.Float64: np.uint64}[x.dtype]
            xv, yv = (v.fill_null(0).to_numpy().view(bits) for v in (x, y))
            if not np.array_equal(xv, yv):
                return False
        elif not x.equals(y):
            return False
    return True


def differing(a: pl.DataFrame, b: pl.DataFrame) -> int:
    """Rows of ``a`` with no identical row in ``b`` (or the larger height when the columns or
    their dtypes differ; a different column order alone is not counted)."""
    if dict(a.schema) != dict(b.schema):
        return max(a.height, b.height)
    return a.join(b, on=a.columns, how="anti", nulls_equal=True).height + abs(a.height - b.height)


# ── the paths ────────────────────────────────────────────────────────────────────────────────


def full(recipe, data, root):
    """``recall run`` on the data as generated."""
    return run(recipe, data, root, "full")


def api_shuffled(recipe, data, root):
    """``runner.run`` with the node and query rows in a random order."""
    return run(recipe, data, root, "shuffled", shuffle=np.random.default_rng(3))


def precompute_after_edits(recipe, data, root, n_edits: int = 4):
    """``recall precompute`` on the data, then after each of a random sequence of edits (change,
    add, delete a note); what the cache serves at the end. Compared with a fresh full run of the
    final data (:func:`final_data`)."""
    cfg = fresh_cfg(config(recipe), root, name("precompute"))
    rng = np.random.default_rng(EDIT_SEED)
    precompute.precompute(cfg, dataset=corpus.dataset(data))
    for _ in range(n_edits):
        data = corpus.edit(data, rng)
        precompute.precompute(cfg, dataset=corpus.dataset(data))
    return sorted_recall(precompute.served(cfg.cache_dir))


def final_data(data: dict, n_edits: int = 4) -> dict:
    """The data after :func:`precompute_after_edits`'s edits."""
    rng = np.random.default_rng(EDIT_SEED)
    for _ in range(n_edits):
        data = corpus.edit(data, rng)
    return data


def packs_alone(recipe, data, root):
    """One group at a time (``packs.packable`` refused)."""
    with _patched(packs, "packable", lambda *a: False):
        return run(recipe, data, root, "alone")


def packs_small(recipe, data, root):
    """Packs that close at 60 nodes (``packs.TARGET``): other pack compositions."""
    with _patched(packs, "TARGET", 60):
        return run(recipe, data, root, "packs60")


def batches_small(recipe, data, root):
    """Small CPU batches: DPP/MMR queries per torch batch, PEDSA/expand block, novelty batch, dense
    searches of 7 queries, threshold scans of at most 5,000 scores a block, push solves cut into progress parts from 5 queries on, BM25 top-k in
    blocks of 5 query rows or 40 bounded scores, BM25 pair scores in blocks of 9 pairs, component
    joins in blocks of 3 queries, push solves in parts of at most 4 queries, BM25 layouts by the
    sort (``segvocab.DENSE_SPAN`` 0; the full run takes the dense minimum), OKS native relevance in
    blocks of 20 cells, PEDSA's sparse solves of 3 queries."""
    from pipeline.channels import candidates, dense_range, lexical, segvocab
    from pipeline.core import progress
    from pipeline.ops import ppr_push
    from pipeline.stages import diffuse, fuse, oks_native

    extra = ["select.batch=7", "diffuse.block=1000", "novelty.batch=5"]
    with (
        _patched(candidates, "SEARCH_BLOCK", 7),
        _patched(dense_range, "RANGE_SCORES", 5_000),
        _patched(progress, "INNER_MIN", 5),
        _patched(lexical, "SCORE_ROWS", 5),
        _patched(lexical, "SCORE_ENTRIES", 40),
        _patched(lexical, "PAIR_BLOCK", 9),
        _patched(fuse, "JOIN_QUERIES", 3),
        _patched(ppr_push, "PUSH_COLS", 4),
        _patched(segvocab, "DENSE_SPAN", 0),
        _patched(oks_native, "BLOCK_CELLS", 20),
        _patched(diffuse, "PEDSA_QUERIES", 3),
    ):
        return run(recipe, data, root, "batches", extra)


def blocked(recipe, data, root):
    """The blocked dense scan with its default block."""
    return run(recipe, data, root, "blocked", ["dense=blocked"])


def blocked_small(recipe, data, root):
    """The blocked dense scan in blocks of 300 rows and query chunks of ≤ 6,000 scores."""
    from pipeline.channels import blocked as mod

    small = functools.partial(mod.search, max_scores=6_000)
    with _patched(mod, "search", small):
        return run(recipe, data, root, "blocked-small", ["dense=blocked", "dense.block=300"])


def device_tail(recipe, data, root):
    """The score stage's device branch on the host: the score left out of the frame
    (``stages.score.on_host`` false), so the select stage cuts each query's head from the score
    array (``stages.select.scored_rows``) and only those rows get their score; in head blocks of
    at most 40 cells and score blocks of 7 rows (``ops.scoring``)."""
    from pipeline.ops import scoring
    from pipeline.stages import score

    with (
        _patched(score, "on_host", lambda _s: False),
        _patched(scoring, "HEAD_CELLS", 40),
        _patched(scoring, "COMBINE_ROWS", 7),
    ):
        return run(recipe, data, root, "device-tail")


TORCH = ["dense.index=torch", "lexical.scorer=torch"]


def torch_channels(recipe, data, root):
    """The device channels' code on the CPU: the torch dense scan and the torch BM25 product."""
    return run(recipe, data, root, "torch", TORCH)


def torch_channels_small(recipe, data, root):
    """The same in small blocks: 7 queries × 300 nodes a dense product, threshold scans of at most
    5,000 scores a block, BM25 blocks of at most 6
    queries and 5,000 scores, rescores in blocks of 500 pairs (torch on the CPU: the host block)."""
    from pipeline.channels import bm25_device, dense_range, dense_torch
    from pipeline.ops import pairdot

    with contextlib.ExitStack() as stack:
        for mod, key, value in (
            (dense_torch, "QUERY_BLOCK", 7),
            (dense_torch, "NODE_BLOCK", 300),
            (dense_range, "RANGE_SCORES", 5_000),
            (bm25_device, "BLOCK_SCORES", 5_000),
            (bm25_device, "BLOCK_QUERIES", 6),
            (pairdot, "HOST_BLOCK", 500),
        ):
            stack.enter_context(_patched(mod, key, value))
        return run(recipe, data, root, "torch-small", TORCH)


def faiss_blas(recipe, data, root):
    """FAISS's flat search on its BLAS path from 20 queries on (the threshold of FAISS < 1.13; the
    installed one's default, 128,000 queries, is more than a CI run holds)."""
    import faiss

    old = faiss.cvar.distance_compute_blas_threshold
    faiss.cvar.distance_compute_blas_threshold = 20
    try:
        return run(recipe, data, root, "blas20")
    finally:
        faiss.cvar.distance_compute_blas_threshold = old


CACHED_MIN = 100  # npzcache.MIN_ROWS in corpus_cached: some groups above it, some below


def corpus_cached(recipe, data, root):
    """Corpus-side values read back from disk (``pipeline.core.npzcache``, ``MIN_ROWS`` 100: the
    nodes' field tokens, ``channels.token_cache``, and entity mentions, ``ops.entity_cache``): a
    run over every other query fills one cache, then the run over all queries, with that cache,
    computes them only for the groups the first run did not see (other queries: no candidate of
    the first run is reused). Fails unless the second run read each kind back."""
    from pipeline.core import npzcache
    from pipeline.run import runner

    cfg = fresh_cfg(config(recipe), root, name("cached"))
    half = {**data, "queries": data["queries"][::2]}
    read = set()
    real = npzcache.read

    def counted(path):
        got = real(path)
        if got is not None:
            read.add(path.parent.name)
        return got

    with _patched(npzcache, "MIN_ROWS", CACHED_MIN):
        runner.run(cfg, Path(cfg.out_dir) / "half", dataset=corpus.dataset(half))
        with _patched(npzcache, "read", counted):
            runner.run(cfg, Path(cfg.out_dir) / "all", dataset=corpus.dataset(data))
    wanted = {"tokens"} | ({"entities"} if recipe.startswith("best") else set())
    assert wanted <= read, f"the run over all queries read back {sorted(read)}, not {wanted}"
    return sorted_recall(pl.read_parquet(Path(cfg.out_dir) / "all" / "recall.parquet"))


def precompute_cached(recipe, data, root):
    """:func:`precompute_after_edits` with the corpus-side values cached from 100 nodes on
    (``npzcache.MIN_ROWS``): an edited group's texts are a new key, so no value cached before an
    edit is served after it. Fails unless the precomputes wrote cache files."""
    from pipeline.core import npzcache

    before = set(Path(root).glob("*/cache/tokens/*.npz"))
    with _patched(npzcache, "MIN_ROWS", CACHED_MIN):
        got = precompute_after_edits(recipe, data, root)
    assert set(Path(root).glob("*/cache/tokens/*.npz")) - before, "no field tokens were cached"
    return got


def ray_path(shards: int, workers: int):
    """``executor=ray`` with ``shards`` query shards on ``workers`` actors (a started Ray)."""

    def path(recipe, data, root):
        extra = ["executor=ray", f"ray.shards={shards}", f"ray.num_workers={workers}"]
        return run(recipe, data, root, f"ray{shards}x{workers}", extra)

    path.__name__ = f"ray_{shards}x{workers}"
    return path


def team_seal(recipe, data, root, seed: int, ref: pl.DataFrame) -> dict:
    """The team seal (issue 28) on ``data`` (``corpus.with_teams``): the log rows of one or two
    random teams changed (rows deleted, sessions added, then the whole log reordered,
    ``corpus.perturb_log``), a fresh run, and per team (changed?, rows of its queries identical
    to ``ref``'s by :func:`same`, how many of them differ)."""
    rng = np.random.default_rng(seed)
    changed = set(rng.choice(corpus.TEAMS, size=int(rng.integers(1, 3)), replace=False).tolist())
    got = run(recipe, corpus.perturb_log(data, changed, rng), root, f"seal{seed}")
    out = {}
    for t in corpus.TEAMS:
        ids = [q["query_id"] for q in data["queries"] if q["team"] == t]
        a, b = (f.filter(pl.col("query_id").is_in(ids)) for f in (got, ref))
        out[t] = (t in changed, same(a, b), differing(a, b))
    return out


@contextlib.contextmanager
def _patched(obj, name, value):
    old = getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, old)


# ── threshold probes ─────────────────────────────────────────────────────────────────────────


def _is_mask(x) -> bool:
    import torch

    return isinstance(x, torch.Tensor) and x.dtype == torch.bool


@contextlib.contextmanager
def probes():
    """Record, for every data-crossed threshold of ``pipeline.core.thresholds``, which sides the runs
    inside reach: ``seen[name]`` is a set of "below"/"above"."""
    import faiss

    from pipeline.channels import dense
    from pipeline.ops import dpp, ppr

    seen = defaultdict(set)
    side = lambda above: "above" if above else "below"  # noqa: E731
    stack = contextlib.ExitStack()

    def wrap(mod, name, make):
        stack.enter_context(_patched(mod, name, make(getattr(mod, name))))

    def cosine_rows(fn):
        def probe(emb, valid, dtype):
            seen["GRAM_MAX_P"].add(side(emb.shape[1] > dpp.GRAM_MAX_P))
            return fn(emb, valid, dtype)

        return probe

    def tiny_flat(fn):
        def probe(index, nq):
            blas = faiss.cvar.distance_compute_blas_threshold
            seen["cvar.distance_compute_blas_threshold"].add(side(nq >= blas))
            if nq < blas:
                seen["TINY"].add(side(nq * index.ntotal > dense.TINY))
            return fn(index, nq)

        return probe

    def dense_components(fn):
        def probe(xp, q, comp, size):
            pair = np.unique(q.astype(np.int64) * size.size + comp)
            hits = np.bincount(pair % size.size, minlength=size.size)
            hit = hits > 0
            seen["DENSE_MIN"].update(side(s >= ppr.DENSE_MIN) for s in size[hit])
            big = hit & (size >= ppr.DENSE_MIN)
            seen["DENSE_WORK"].update(side(w >= ppr.DENSE_WORK) for w in (size * hits)[big])
            return fn(xp, q, comp, size)

        return probe

    def pair_blocks(fn):
        def probe(*a):
            chunks = list(fn(*a))
            seen["PAIR_NNZ"].add(side(len(chunks) > 1))
            return iter(chunks)

        return probe

    def column_blocks(fn):
        def probe(xp, sp, trans, label, c, sel, q, i, v, solve):
            members = int((label == c).sum())
            cols = np.unique(q[sel]).size
            fits = ppr.BLOCK_BYTES // (members * v.itemsize)  # columns the byte budget allows
            width = max(8, min(256, 1 << max(0, fits.bit_length() - 1)))  # as _column_blocks
            seen["BLOCK_BYTES"].add(side(fits < 256 and cols > width))
            return fn(xp, sp, trans, label, c, sel, q, i, v, solve)

        return probe

    def pack_groups(fn):
        def probe(groups):
            seen["SMALL"].update(side(len(g[1]) > packs.SMALL) for g in groups)
            out = fn(groups)
            sizes = [sum(len(g[1]) for g in p) for p in out if len(p) > 1]
            seen["TARGET"].update(side(s >= packs.TARGET) for s in sizes)
            return out

        return probe

    def blocked_search(fn):
        def probe(xb, xq, k, block=65536, max_scores=1 << 24):
            seen["search.max_scores"].add(side(len(xq) * min(block, len(xb)) > max_scores))
            seen["dense.block"].add(side(len(xb) > block))
            return fn(xb, xq, k, block, max_scores)

        return probe

    def diversify(fn):
        def probe(pool, k, p, xb, device):
            seen["select.batch"].add(side(pool["query_idx"].n_unique() > p.batch))
            sizes = pool.group_by("query_idx").len()["len"].to_list()
            edge = 2 * dpp.WIDTH_STEP  # pools on both sides of one padded width's edge
            seen["WIDTH_STEP"].update(side(n > edge) for n in sizes)
            return fn(pool, k, p, xb, device)

        return probe

    def greedy(fn):
        def probe(quality, emb, k, *a, **kw):
            valid = next((x for x in (*a, *kw.values()) if _is_mask(x)), None)
            real = int(valid.any(1).sum()) if valid is not None else quality.shape[0]
            seen["MIN_ROWS"].add(side(real >= dpp.MIN_ROWS))
            return fn(quality, emb, k, *a, **kw)

        return probe

    def scope(fn):
        def probe(rows, qs, n_nodes, edges, seeds, p, *a):
            if p.method != "ppr":  # PPR runs from sparse seeds, whatever the block
                step = max(1, p.block // max(1, len(rows)))  # at least this many columns
                seen["diffuse.block"].add(side(len(qs) > step))
            return fn(rows, qs, n_nodes, edges, seeds, p, *a)

        return probe

    def pedsa_hits(fn):
        def probe(adj, inhib, rows, cols, qs, *a):
            seen["PEDSA_QUERIES"].add(side(len(qs) > diffuse.PEDSA_QUERIES))
            return fn(adj, inhib, rows, cols, qs, *a)

        return probe

    def gates(fn):
        def probe(xb, xq, m, basis_nodes, p, device):
            seen["novelty.batch"].add(side(int((m >= p.basis_min).sum()) > p.batch))
            return fn(xb, xq, m, basis_nodes, p, device)

        return probe

    def members(fn):
        def probe(nodes, scopes):
            seen["JOIN_ABOVE"].add(side(len(scopes) * nodes.height > scope_mod.JOIN_ABOVE))
            return fn(nodes, scopes)

        return probe

    def torch_search(fn):
        def probe(self, xq, k):
            seen["QUERY_BLOCK"].add(side(len(xq) > dense_torch.QUERY_BLOCK))
            seen["NODE_BLOCK"].add(side(self.ntotal > dense_torch.NODE_BLOCK))
            return fn(self, xq, k)

        return probe

    def bm25_blocks(fn):
        def probe(lo, hi, scores, most):
            if len(lo):
                seen["BLOCK_SCORES"].add(side(len(lo) * int(hi.max() - lo.min()) > scores))
                seen["BLOCK_QUERIES"].add(side(len(lo) > most))
            return fn(lo, hi, scores, most)

        return probe

    def ranged(fn):
        def probe(xq, xb, thr, scores=None):
            most = dense_range.RANGE_SCORES if scores is None else scores
            seen["RANGE_SCORES"].add(side(len(xq) * len(xb) > most))
            return fn(xq, xb, thr, scores)

        return probe

    def searched(fn):
        def probe(index, xq, xs, k, kind):
            seen["SEARCH_BLOCK"].add(side(len(xq) > candidates.SEARCH_BLOCK))
            return fn(index, xq, xs, k, kind)

        return probe

    def top_scores(fn):
        def probe(q, s, k, st=None):
            seen["SCORE_ROWS"].add(side(q.shape[0] > lexical.SCORE_ROWS))
            bound = int(np.diff(s.T.tocsr().indptr)[q.tocsr().indices].sum())
            seen["SCORE_ENTRIES"].add(side(bound > lexical.SCORE_ENTRIES))
            return fn(q, s, k, st)

        return probe

    def lexical_pairs(fn):
        def probe(q, s, qi, di):
            seen["PAIR_BLOCK"].add(side(len(qi) > lexical.PAIR_BLOCK))
            return fn(q, s, qi, di)

        return probe

    def dots(fn):
        def probe(xq, xb, qi, di, block=None):
            name = "DEVICE_BLOCK" if pairdot.on_accelerator(xb) else "HOST_BLOCK"
            seen[name].add(side(len(qi) > (block or pairdot.default_block(xb))))
            return fn(xq, xb, qi, di, block)

        return probe

    def joined(fn):
        def probe(ctx, hits, column):
            q = ctx.cand["query_idx"]
            if q.len() and hits.height:
                seen["JOIN_QUERIES"].add(side(q.max() - q.min() >= fuse_mod.JOIN_QUERIES))
            return fn(ctx, hits, column)

        return probe

    def earliest(fn):
        def probe(s, t, n_terms, *when):
            if len(s):
                span = int((s * n_terms + t).max()) + 1
                seen["DENSE_SPAN"].add(side(span > segvocab.DENSE_SPAN * len(s)))
            return fn(s, t, n_terms, *when)

        return probe

    def tokens(fn):
        def probe(tokenizer, fields, settings, root):
            n = len(next(iter(fields.values()), []))
            seen["MIN_ROWS"].add(side(n >= npzcache.MIN_ROWS))
            return fn(tokenizer, fields, settings, root)

        return probe

    def head(fn):
        def probe(query, score, depth, cells=None):
            if len(query):
                widest = int(np.bincount(np.asarray(query) - int(np.min(query))).max())
                cells_ = scoring.HEAD_CELLS if cells is None else cells
                seen["HEAD_CELLS"].add(side(widest * len(np.unique(query)) > cells_))
            return fn(query, score, depth, cells)

        return probe

    def combined(fn):
        def probe(terms, total, factors):
            seen["COMBINE_ROWS"].add(side(len(terms[0][1]) > scoring.COMBINE_ROWS))
            return fn(terms, total, factors)

        return probe

    def spans(fn):
        def probe(b, workers):
            seen["INNER_MIN"].add(side(b >= progress.INNER_MIN))
            seen["PUSH_COLS"].add(side(b > ppr_push.PUSH_COLS))
            return fn(b, workers)

        return probe

    def native_blocks(fn):
        def probe(queries, cells_per_query):
            out = fn(queries, cells_per_query)
            seen["BLOCK_CELLS"].add(side(len(out) > 1))
            return out

        return probe

    from pipeline.channels import blocked as blocked_mod
    from pipeline.channels import (
        bm25_device,
        candidates,
        dense_range,
        dense_torch,
        lexical,
        segvocab,
        token_cache,
    )
    from pipeline.core import npzcache, progress
    from pipeline.ops import pairdot, ppr_push, scoring
    from pipeline.ops import scope as scope_mod
    from pipeline.stages import diffuse, novelty, oks_native, select
    from pipeline.stages import fuse as fuse_mod

    with stack:
        wrap(dpp, "cosine_rows", cosine_rows)
        wrap(dense, "_tiny_flat", tiny_flat)
        wrap(ppr, "_dense_components", dense_components)
        wrap(ppr, "_pair_blocks", pair_blocks)
        wrap(ppr, "_column_blocks", column_blocks)
        wrap(packs, "packs", pack_groups)
        wrap(blocked_mod, "search", blocked_search)
        wrap(select, "_diversify", diversify)
        wrap(dpp, "dpp_greedy", greedy)
        wrap(dpp, "mmr_greedy", greedy)
        wrap(diffuse, "_scope", scope)
        wrap(diffuse, "_pedsa_hits", pedsa_hits)
        wrap(novelty, "_gates", gates)
        wrap(scope_mod, "_members", members)
        wrap(dense_torch.TorchIndex, "search", torch_search)
        wrap(bm25_device, "blocks", bm25_blocks)
        wrap(candidates, "_searched", searched)
        wrap(dense_range, "within", ranged)
        wrap(ppr_push, "_spans", spans)
        wrap(token_cache, "tokenised", tokens)
        wrap(segvocab, "_earliest", earliest)
        wrap(lexical, "top_scores", top_scores)
        wrap(lexical, "pair_scores", lexical_pairs)
        wrap(fuse_mod, "join_component", joined)
        wrap(pairdot, "pair_dots", dots)
        wrap(scoring, "head", head)
        wrap(scoring, "combine", combined)
        wrap(oks_native, "query_blocks", native_blocks)
        yield seen
