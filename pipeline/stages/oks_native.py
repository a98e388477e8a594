"""OKS's native backend over one query group (``pipeline.ops.oks_native`` holds the arithmetic).

:func:`page_table` turns the group's node rows (one OKS FTS5 row each) into its pages (the first
row of each ``doc_id``); :func:`native_hits` scores every (query, page) pair as
``recall.py::_recall_knowledge_with_context`` does and keeps each query's best ``depth`` hits in
OKS's order (relevance, then slug). Everything is computed from the group's own pages, queries and
the goals the queries name, so the statistics (IDF, N) are the scope's.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from pipeline.core import backend
from pipeline.ops import oks_native as ops
from pipeline.ops.tokenize import oks_token_set

BLOCK_CELLS = 1 << 22  # (queries × words × pages) cells of one block of the relevance
ON_HOST = "the OKS native relevance on cpu (numpy)"


def _str(nodes: pl.DataFrame, name: str, default: str | None = "") -> pl.Expr:
    if name not in nodes.columns:
        return pl.lit(default, pl.String).alias(name)
    return pl.col(name).cast(pl.String).alias(name)


def page_table(nodes: pl.DataFrame) -> pl.DataFrame:
    """One row per page (``doc_id``; a node without one is its own page) in first-row order:
    ``node_idx`` of its first row, ``slug`` (the file stem), the texts OKS's native scorer reads and
    the memory-curve inputs; a missing column takes OKS's default."""
    doc = pl.col("doc_id").fill_null(pl.col("node_id")) if "doc_id" in nodes.columns else "node_id"
    tags = (
        pl.col("tags").cast(pl.List(pl.String)).list.join(" ")
        if "tags" in nodes.columns
        else pl.lit("")
    )
    first = nodes.with_row_index("node_idx").with_columns(_doc=doc).unique("_doc", keep="first")

    def col(name, default, dtype):
        return (pl.col(name) if name in nodes.columns else pl.lit(default)).cast(dtype).alias(name)

    return first.sort("node_idx").select(
        pl.col("node_idx").cast(pl.Int64),
        (
            pl.col("slug")
            if "slug" in nodes.columns
            else pl.col("_doc").str.replace(r"^.*/", "").str.replace(r"\.[^.]*$", "")
        ).alias("slug"),
        _str(nodes, "title").fill_null(""),
        (
            _str(nodes, "body") if "body" in nodes.columns else pl.col("text").alias("body")
        ).fill_null(""),
        tags.fill_null("").alias("tags"),
        _str(nodes, "type", "concept"),
        _str(nodes, "status", "active"),
        _str(nodes, "area").fill_null("").str.to_lowercase().str.strip_chars().alias("area"),
        _str(nodes, "outcome", None),
        col("archived", False, pl.Boolean).fill_null(False),
        col("pinned", False, pl.Boolean).fill_null(False),
        col("decision_correct", None, pl.Boolean),
        (col("importance", None, pl.Float64) / 10.0).fill_null(0.5).alias("importance"),
        col("access_count", 0, pl.Int64).fill_null(0),
        col("created_at", None, pl.Datetime("us", "UTC")),
    )


def page_arrays(pages: pl.DataFrame) -> dict:
    """The per-page factors that do not depend on the query (``ops.relevance``'s page arrays)."""
    typ = pages["type"].to_list()
    return {
        "type_mult": np.array([ops.TYPE_MULTIPLIER.get(t, ops.OTHER_TYPE) for t in typ]),
        "generic": np.where(
            pages["title"].str.strip_chars().str.to_lowercase().is_in(list(ops.GENERIC_TITLES)),
            0.5,
            1.0,
        ),
        "decision": np.where((pages["decision_correct"] == False).fill_null(False), 2.0, 0.0),  # noqa: E712
        "failure": np.where((pages["outcome"] == "failure").fill_null(False), 1.0, 0.0),
        "eligible": ~(
            pages["status"].is_in(["dropped", "superseded"]).fill_null(False) | pages["archived"]
        ).to_numpy(),
    }


def memory(pages: pl.DataFrame, now: dt.datetime) -> np.ndarray:
    """``store.py::compute_score`` of each page at ``now`` (an unparseable ``created``: 0 days)."""
    days = pages.select(
        (pl.lit(now, pl.Datetime("us", "UTC")) - pl.col("created_at")).dt.total_days().fill_null(0)
    ).to_series()
    typ = pages["type"].to_list()
    status = pages["status"]
    return ops.memory_scores(
        pages["importance"].to_numpy(),
        np.array([ops.DECAY_LAMBDA.get(t, ops.OTHER_LAMBDA) for t in typ]),
        np.maximum(days.to_numpy(), 0),
        pages["access_count"].to_numpy(),
        pages["pinned"].to_numpy(),
        (status == "active").fill_null(False).to_numpy(),
        (pages["archived"] | (status == "dropped").fill_null(False)).to_numpy(),
    )


def texts(pages: pl.DataFrame) -> dict[str, pl.Series]:
    """The lower-cased texts OKS matches against: title, body, ``searchable`` (title body tags)
    and the IDF corpus text (title body)."""
    title, body = pages["title"].str.to_lowercase(), pages["body"].str.to_lowercase()
    tags = pages["tags"].str.to_lowercase()
    return {
        "title": title,
        "body": body,
        "search": title + " " + body + " " + tags,
        "idf": title + " " + body,
    }


def word_matrices(t: dict, words: list[str]) -> dict[str, np.ndarray]:
    """(words × pages) booleans: the word is a substring of the searchable text / the title, or
    one of the page's own tokens; and each word's document frequency over the IDF texts."""
    n = len(t["search"])
    if not words:
        empty = np.zeros((0, n), bool)
        return {"search": empty, "title": empty, "token": empty, "df": np.zeros(0, np.int64)}
    sub = lambda col: np.stack([col.str.contains(w, literal=True).to_numpy() for w in words])  # noqa: E731
    at = {w: i for i, w in enumerate(words)}
    token = np.zeros((len(words), n), bool)
    for p, text in enumerate(t["search"].to_list()):
        for w in oks_token_set(text):
            if w in at:
                token[at[w], p] = True
    return {
        "search": sub(t["search"]),
        "title": sub(t["title"]),
        "token": token,
        "df": sub(t["idf"]).sum(axis=1),
    }


def query_words(queries: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
    """Each query's ``query.lower().strip()`` and its sorted ``_tokenize`` words."""
    lowered = [str(q or "").lower().strip() for q in queries["text"].to_list()]
    return lowered, [sorted(oks_token_set(q)) for q in lowered]


def goal_matches(queries: pl.DataFrame, goals: pl.DataFrame | None, pages, t) -> tuple:
    """(area, keyword): (queries × pages) booleans: the page's area is among the domains of the
    goals the query names (its ``goals`` column), a goal keyword is in the page's text."""
    n_q, n_p = queries.height, pages.height
    area, keyword = np.zeros((n_q, n_p), bool), np.zeros((n_q, n_p), bool)
    if goals is None or "goals" not in queries.columns or not goals.height:
        return area, keyword
    by_slug = {s.lower(): (d, k) for s, d, k in goals.select("slug", "domains", "keywords").rows()}
    seen: dict[tuple, tuple] = {}
    for qi, names in enumerate(queries["goals"].to_list()):
        key = tuple(sorted({str(s).lower() for s in names or []}))
        if key not in seen:
            doms = {d for s in key for d in (by_slug.get(s, ([], []))[0] or [])}
            kws = sorted({k for s in key for k in (by_slug.get(s, ([], []))[1] or [])})
            a = pages["area"].is_in(sorted(doms)).to_numpy() if doms else np.zeros(n_p, bool)
            k = np.zeros(n_p, bool)
            for kw in kws:
                k |= t["search"].str.contains(kw, literal=True).to_numpy()
            seen[key] = (a, k)
        area[qi], keyword[qi] = seen[key]
    return area, keyword


def _block_factors(words, at, m, qs, lowered, t, idf) -> dict:
    """The (queries × pages) factors of the queries ``qs``."""
    width = max([len(words[q]) for q in qs] + [1])
    ids = np.full((len(qs), width), -1, np.int64)
    for r, q in enumerate(qs):
        ids[r, : len(words[q])] = [at[w] for w in words[q]]
    live = ids >= 0
    safe = np.where(live, ids, 0)
    n_p = len(t["title"])
    pick = lambda mat: np.where(live[..., None], mat[safe] if len(mat) else False, False)  # noqa: E731
    sub = lambda col, q: (  # noqa: E731
        col.str.contains(lowered[q], literal=True).to_numpy()
        if len(lowered[q]) > 3
        else np.zeros(n_p, bool)
    )
    return {
        "weights": np.where(live, idf[safe] if len(idf) else 0.0, 0.0),
        "hits": pick(m["search"]).astype(np.float64),
        "overlap": pick(m["token"]).sum(axis=1).astype(np.float64),
        "title_terms": pick(m["title"]).sum(axis=1).astype(np.float64),
        "title_sub": np.stack([sub(t["title"], q) for q in qs]).astype(np.float64),
        "body_sub": np.stack([sub(t["body"], q) for q in qs]).astype(np.float64),
        "has_query": np.array([bool(lowered[q]) for q in qs]),
    }


def _ranked(qs: list[int], rel: np.ndarray, hit: np.ndarray, pages, depth: int) -> pl.DataFrame:
    """The hits of a block as (query, page, relevance) rows: each query's best ``depth`` by
    relevance, then slug (``scored.sort(key=(-relevance, slug))``)."""
    r, p = np.nonzero(hit)
    out = pl.DataFrame(
        {
            "query": np.asarray(qs, np.int64)[r],
            "page": p.astype(np.int64),
            "relevance": rel[r, p],
        }
    ).with_columns(slug=pages["slug"].gather(p))
    out = out.sort(["query", "relevance", "slug"], descending=[False, True, False])
    return out.filter(pl.int_range(pl.len()).over("query") < depth).drop("slug")


def query_blocks(queries: list[int], cells_per_query: int) -> list[list[int]]:
    """``queries`` cut, in order, into blocks of at most ``BLOCK_CELLS`` relevance cells (at least
    one query a block). Each query's relevance is computed on its own row, so the cut changes no
    bit (the differential harness crosses it)."""
    block = max(1, BLOCK_CELLS // max(1, cells_per_query))
    return [queries[s : s + block] for s in range(0, len(queries), block)]


def native_hits(
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    goals: pl.DataFrame | None,
    nows: list,
    depth: int,
    device: str = "cpu",
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(pages, hits): :func:`page_table` of ``nodes`` and each query's best ``depth`` native hits as
    (query, page, relevance) rows (``query``: its row in ``queries``; ``page``: a row of pages), at
    each query's reference time ``nows[q]``. The relevance blocks run on ``device``."""
    pages = page_table(nodes)
    t = texts(pages)
    lowered, words = query_words(queries)
    vocab = sorted({w for ws in words for w in ws})
    at = {w: i for i, w in enumerate(vocab)}
    m = word_matrices(t, vocab)
    idf = ops.idf(m["df"], pages.height)
    fixed = page_arrays(pages)
    area, keyword = goal_matches(queries, goals, pages, t)
    width = max([len(w) for w in words] + [1])
    frames = []
    for now in sorted(set(nows)):
        mem = memory(pages, now)
        mine = [q for q in range(queries.height) if nows[q] == now]
        for qs in query_blocks(mine, pages.height * width):
            c = {**_block_factors(words, at, m, qs, lowered, t, idf), **fixed, "memory": mem}
            c["area"], c["keyword"] = area[qs], keyword[qs]
            names = sorted(c)
            c = dict(zip(names, backend.to_device(device, ON_HOST, *[c[k] for k in names])))
            c["idf_overlap"] = ops.idf_overlap(c.pop("weights"), c.pop("hits"))
            rel, hit = ops.relevance(c)
            frames.append(_ranked(qs, backend.to_host(rel), backend.to_host(hit), pages, depth))
    schema = {"query": pl.Int64, "page": pl.Int64, "relevance": pl.Float64}
    hits = pl.concat(frames) if frames else pl.DataFrame(schema=schema)
    return pages, hits.sort("query", maintain_order=True)
