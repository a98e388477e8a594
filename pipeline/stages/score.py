"""Final score: ``(Σ_t w_t·term_t) / (Σ_t w_t if normalize) × Π_f factor_f``, every term and factor a
column of ``recall.parquet``.

A term is a candidate column (``fused``, ``graph``, ``residual``, ``dense``…) or a registered term
function; factors are registered functions. New ones are added with ``@term``/``@factor``, not by
editing an if-chain. Node attributes (importance, created_at, …) and signals are joined by node.
The columns are built here (polars); the arithmetic is ``pipeline.ops.scoring.combine`` on the run's
device, whose bits it defines.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar

import numpy as np
import polars as pl

from pipeline.contract.errors import ConfigError
from pipeline.core import backend
from pipeline.core.backend import host_column
from pipeline.core.stage import Params, Stage
from pipeline.ops import scoring, speakers

TERMS: dict[str, Callable[[pl.DataFrame], pl.Expr | pl.Series]] = {}
FACTORS: dict[str, Callable[[pl.DataFrame], pl.Expr | pl.Series]] = {}
NEEDS: dict[str, tuple[str, ...]] = {}  # node / signal columns a term or factor reads
QUERY_TEXT = "query_text"  # in NEEDS: the term or factor reads its query's text (joined by query)
DAY_US = 86_400 * 1_000_000
SCORE_ON_HOST = "the score and the head cut on cpu (numpy)"  # the fallback note without CuPy


def term(name: str, needs: tuple[str, ...] = ()):
    """Decorator registering a score term ``name`` (weighted into the sum) and the node columns it needs."""

    def wrap(fn):
        TERMS[name], NEEDS[name] = fn, needs
        return fn

    return wrap


FILTERS: set[str] = set()  # factors that drop the rows where they are 0 (instead of scoring them 0)


def factor(name: str, needs: tuple[str, ...] = (), drops: bool = False):
    """Decorator registering a multiplicative score factor ``name``; with ``drops``, a 0 drops the row."""

    def wrap(fn):
        FACTORS[name], NEEDS[name] = fn, needs
        if drops:
            FILTERS.add(name)
        return fn

    return wrap


def _clip01(e: pl.Expr) -> pl.Expr:
    return e.fill_null(0.0).cast(pl.Float64).clip(0.0, 1.0)


def _days(col: str) -> pl.Expr:
    """Whole-run days between the query's ``now`` and a node timestamp (≥ 0; null → 0)."""
    delta = (pl.col("now") - pl.col(col)).dt.total_microseconds() / DAY_US
    return delta.fill_null(0.0).clip(lower_bound=0.0)


@term("bme_graph")
def _bme_graph(df: pl.DataFrame) -> pl.Expr:  # BME: clip(graphScore / 2, 0, 1)
    return _clip01(pl.col("graph") / 2.0)


@term("bme_dense")
def _bme_dense(df: pl.DataFrame) -> pl.Expr:
    """BME: clip(vectorScore, 0, 1) for vector hits; a node only diffusion (or the co-occurrence
    boost) reached has vectorScore 0 — a candidate without a ``dense_rank`` was no vector hit."""
    if "dense_rank" not in df.columns:
        return _clip01(pl.col("dense"))
    return pl.when(pl.col("dense_rank").is_not_null()).then(_clip01(pl.col("dense"))).otherwise(0.0)


@term("lexical_max")
def _lexical_max(df: pl.DataFrame) -> pl.Expr:  # lexical / per-query max, in [0, 1]
    x = pl.col("lexical").fill_null(0.0).cast(pl.Float64)
    mx = x.max().over("query_idx")
    return pl.when(mx > 0).then(x / mx).otherwise(0.0)


@term(
    "bme_lexical",
    needs=("title", "description", "text", "status", "lex_names", "lex_fields", QUERY_TEXT),
)
def _bme_lexical(df: pl.DataFrame) -> pl.Series:
    """BME's unit-coverage lexical score (``pipeline.bme.lexcover``): sources = query text + segments.
    A node's ``lex_names`` / ``lex_fields`` (BME's own field lists, ``data=bme``) are its name and
    summary fields where present; else ``title`` and ``description``/``text``/``status``."""
    if "bme_lexical" in df.columns:  # already computed by the scope policy's knowledge gate
        return df["bme_lexical"]
    from pipeline.bme.lexcover import column
    from pipeline.stages.query import lexical_sources

    return column(df, lexical_sources)


@term("importance", needs=("importance",))
def _importance(df: pl.DataFrame) -> pl.Expr:  # BME: clip(importance / 10), default 5
    return _clip01(pl.col("importance").fill_null(5.0) / 10.0)


@term("memory_curve", needs=("memory_score",))
def _memory_curve(df: pl.DataFrame) -> pl.Expr:  # OKS memory curve (signals), as a term
    return pl.col("memory_score").fill_null(0.0).cast(pl.Float64)


@term("speaker_named", needs=("speaker", QUERY_TEXT))
def _speaker_named(df: pl.DataFrame) -> pl.Series:
    """1 when the unit's speaker is named in the query ("What is Caroline's ...?" → Caroline's turns), else 0."""
    return speakers.named(df)


@factor("speaker_named_x2", needs=("speaker", QUERY_TEXT))
def _speaker_named_x2(df: pl.DataFrame) -> pl.Series:
    """× 2 for units whose speaker the query names, × 1 otherwise (the multiplicative speaker_named)."""
    return 1.0 + speakers.named(df)


@factor("speaker_gated_x2", needs=("speaker", QUERY_TEXT))
def _speaker_gated_x2(df: pl.DataFrame) -> pl.Series:
    """``speaker_named_x2`` only for queries whose best ``speakers.GATE_TOP`` first-pass units
    (highest ``fused``) are all by a speaker the query names: the name is trusted only when the
    topic match agrees with it (a question naming the wrong person keeps its ranking)."""
    named = speakers.named(df)
    return 1.0 + named * speakers.top_agrees(df, named)


@factor("bme_time_decay", needs=("created_at",))
def _bme_time_decay(df: pl.DataFrame) -> pl.Expr:  # 0.8 + 0.2 / (1 + ln(1 + days since created))
    return 0.8 + 0.2 / (1.0 + (1.0 + _days("created_at")).log(math.e))


@factor("reme_inbound", needs=("inbound",))
def _reme_inbound(df: pl.DataFrame) -> pl.Expr:  # 1 + 0.15·ln(1 + inbound)
    return 1.0 + 0.15 * (1.0 + pl.col("inbound").fill_null(0).cast(pl.Float64)).log(math.e)


@factor("reme_recency", needs=("updated_at", "created_at"))
def _reme_recency(
    df: pl.DataFrame,
) -> pl.Expr:  # exp(−Δt / 60 d) since the last update (or creation)
    return (-_days("last_update") / 60.0).exp()


@factor("reme_archived", needs=("archived_signal",), drops=True)
def _reme_archived(
    df: pl.DataFrame,
) -> pl.Expr:  # ReMe design: recency_score < 0.15 ⇒ archived, not recalled
    return 1.0 - pl.col("archived_signal").cast(pl.Boolean).fill_null(False).cast(pl.Float64)


@factor("reme_community", needs=("community",))
def _reme_community(df: pl.DataFrame) -> pl.Series:  # ×1.2 in the community of a top-3 fused node
    top = (
        df.filter(pl.col("community").is_not_null())
        .sort(["query_idx", "fused", "node_idx"], descending=[False, True, False])
        .group_by("query_idx", maintain_order=True)
        .head(3)
        .group_by("query_idx")
        .agg(seed_comms=pl.col("community"))
    )
    hit = df.select("query_idx", "community").join(
        top, on="query_idx", how="left", maintain_order="left"
    )
    same = hit["seed_comms"].list.contains(hit["community"]).fill_null(False)
    return pl.Series(same.cast(pl.Float64) * 0.2 + 1.0)


def attach(
    cand: pl.DataFrame,
    nodes: pl.DataFrame,
    queries: pl.DataFrame,
    signals: pl.DataFrame | None,
    names: list[str],
    now: dt.datetime,
) -> pl.DataFrame:
    """Join the node/signal columns the chosen terms and factors read, and each query's ``now``."""
    need = {c for n in names for c in NEEDS.get(n, ())}
    wants_text = QUERY_TEXT in need
    need.discard(QUERY_TEXT)
    node_cols = [c for c in need if c in nodes.columns]
    out = cand
    if node_cols:
        out = out.join(
            nodes.select(node_cols).with_row_index("node_idx").cast({"node_idx": pl.Int64}),
            on="node_idx",
            how="left",
        )
    sig_cols = [
        c for c in need if signals is not None and c in signals.columns and c not in node_cols
    ]
    if sig_cols:
        out = out.join(
            signals.select(sig_cols).with_row_index("node_idx").cast({"node_idx": pl.Int64}),
            on="node_idx",
            how="left",
        )
    for c in sorted(need - set(out.columns) - {"updated_at"}):
        dtype = pl.Datetime("us", "UTC") if c.endswith("_at") else pl.Float64
        out = out.with_columns(pl.lit(None, dtype=dtype).alias(c))
    qnow = (
        queries["now"]
        if "now" in queries.columns
        else pl.Series([None] * queries.height, dtype=pl.Datetime("us", "UTC"))
    )
    now_tbl = pl.DataFrame(
        {
            "query_idx": pl.Series(range(queries.height), dtype=pl.Int64),
            "now": qnow.cast(pl.Datetime("us", "UTC")).fill_null(now),
        }
    )
    out = out.join(now_tbl, on="query_idx", how="left")
    if wants_text:
        qtext = pl.DataFrame(
            {
                "query_idx": pl.Series(range(queries.height), dtype=pl.Int64),
                "query_text": queries["text"],
            }
        )
        out = out.join(qtext, on="query_idx", how="left")
    if "reme_recency" in names:
        upd = (
            pl.col("updated_at")
            if "updated_at" in out.columns
            else pl.lit(None, dtype=pl.Datetime("us", "UTC"))
        )
        out = out.with_columns(last_update=pl.coalesce(upd, pl.col("created_at")))
    return out


@dataclass
class Scored:
    """The ``score`` of every row of a candidate frame, on the run's device (numpy or CuPy):
    ``valid`` False where a null factor left the score null (None: every score defined)."""

    score: object
    valid: object = None

    def column(self, rows=None) -> pl.Series:
        """The host ``score`` column (Float64, nulls where not valid) of all rows or of ``rows``
        (indices in the score's own namespace): one transfer of just those values."""
        take = (lambda a: a) if rows is None else (lambda a: a[rows])  # noqa: E731
        return host_column(
            "score", take(self.score), None if self.valid is None else take(self.valid)
        )


def compute(cand: pl.DataFrame, terms: dict, factors: list[str], normalize: bool) -> pl.DataFrame:
    """Adds each registered term/factor as a column, and ``score`` (:func:`scores` on the host)."""
    frame, scored = scores(cand, terms, factors, normalize)
    return frame.with_columns(scored.column())


def scores(
    cand: pl.DataFrame, terms: dict, factors: list[str], normalize: bool, device: str = "cpu"
) -> tuple[pl.DataFrame, Scored]:
    """The candidates with each registered term/factor as a column (rows a filtering factor
    drops left out), and their score on ``device`` (``ops.scoring.combine``: the columns go
    there, the score stays there). Components a registered term reads but this run did not
    produce (``graph`` with ``diffuse=none``) count as 0."""
    missing = [
        c for c in ("dense", "lexical", "graph", "residual", "fused") if c not in cand.columns
    ]
    cand = cand.with_columns([pl.lit(0.0).alias(c) for c in missing])
    used, total = [], 0.0
    for name, w in terms.items():
        if not w:
            continue
        if name in TERMS:
            cand = cand.with_columns(TERMS[name](cand).alias(name))
        elif name not in cand.columns or name in missing:
            continue  # a component this run did not produce (e.g. graph with diffuse=none)
        used.append((float(w), name))
        total += float(w)
    if not used:
        raise ConfigError(
            f"score.terms={dict(terms)} selects no component; choose from the candidate columns "
            f"or {sorted(TERMS)}"
        )
    for f in factors:
        if f in FACTORS:
            cand = cand.with_columns(FACTORS[f](cand).alias(f))
        elif f not in cand.columns:  # else a precomputed factor column (e.g. from the scope policy)
            raise ConfigError(f"score.factors: unknown factor {f!r}; choose from {sorted(FACTORS)}")
    out = cand.drop(missing)
    for f in FILTERS & set(factors):
        out = out.filter(pl.col(f) > 0)
    up = lambda s: backend.to_device(device, SCORE_ON_HOST, s.to_numpy())[0]  # noqa: E731
    xs = [(w, up(out[n].fill_null(0.0).cast(pl.Float64))) for w, n in used]
    fs = [
        (
            up(out[f].cast(pl.Float64).fill_null(0.0)),
            up(out[f].is_not_null()) if out[f].null_count() else None,
        )
        for f in factors
    ]
    score, valid = scoring.combine(xs, max(total, 1e-6) if normalize else None, fs)
    return out, Scored(score, valid)


@dataclass(frozen=True)
class ScoreParams(Params):
    """The ``score`` group (``terms``: weight per term, ``factors``, ``normalize``) and the scope
    policy's settings (``scope_policy``: ``stages.scope_policy.ScopeParams``)."""

    GROUP: ClassVar[str] = "score"
    terms: dict
    factors: list
    normalize: bool
    scope: Any = field(default=None, metadata={"runtime": True})  # scope_policy.ScopeParams

    @classmethod
    def of(cls, run) -> ScoreParams:
        """The parameters of a run (a ``RunState``)."""
        from pipeline.stages import scope_policy

        cfg = run.cfg
        scope = scope_policy.ScopeParams.from_cfg(cfg.scope_policy, "scope_policy")
        return cls.from_cfg(cfg.score, "score", scope=scope)


def run_stage(ctx, p: ScoreParams) -> object:
    """Attach the score terms and factors, apply the scope policy, compute ``score``."""
    from pipeline.stages import scope_policy

    terms, factors = p.terms, list(p.factors)
    nodes = ctx.scored_nodes if ctx.scored_nodes is not None else ctx.nodes
    names = [n for n, w in terms.items() if w] + factors
    cand = attach(ctx.cand, nodes, ctx.queries, ctx.signals, names, ctx.now)
    ctx.policy = scope_policy.apply(cand, nodes, ctx.queries, p.scope)
    frame, ctx.scored = scores(
        ctx.policy.cand, terms, factors + ctx.policy.factors, p.normalize, ctx.run.device
    )
    # on the host the score is a column at once; from a device only the rows select keeps come
    # back (``stages.select.run_stage``)
    ctx.cand = frame.with_columns(ctx.scored.column()) if on_host(ctx.scored) else frame
    return ctx


def on_host(scored: Scored) -> bool:
    """Whether ``scored`` lives in host memory (numpy)."""
    return isinstance(scored.score, np.ndarray)


def term_columns(terms: dict, factors: list[str]) -> list[str]:
    """The registered terms and factors a recipe uses: they are recall columns."""
    names = [n for n, w in terms.items() if w] + factors
    return [n for n in names if n in TERMS or n in FACTORS]


STAGE = Stage("score", run_stage, params=ScoreParams.of)
