"""Bootstrap confidence intervals over queries: resample a run's queries with replacement, take the
mean of each resample, report the percentile interval. Vectorised numpy; a fixed seed, so the same
per-query values always give the same interval."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.contract.errors import DataError

N_RESAMPLES = 1000
CONFIDENCE = 0.95
SEED = 13
_CHUNK = 200  # resamples drawn at once (bounds memory at _CHUNK × n_queries × n_metrics floats)


@dataclass(frozen=True)
class Interval:
    """The mean over queries and its percentile bootstrap interval [low, high]."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def half(self) -> float:
        """The half width shown after ``±``: the larger side (the interval may be skewed)."""
        return max(self.mean - self.low, self.high - self.mean)

    def format(self, scale: float = 1.0, digits: int = 1) -> str:
        """'67.1 ± 2.9 [64.2, 70.0]': the half width is the larger side (the interval may be skewed)."""
        m, lo, hi = (scale * v for v in (self.mean, self.low, self.high))
        return (
            f"{m:.{digits}f} ± {max(m - lo, hi - m):.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"
        )


def bootstrap_means(
    values: np.ndarray, n_resamples: int = N_RESAMPLES, seed: int = SEED
) -> np.ndarray:
    """values (n,) or (n, m) → (n_resamples,) or (n_resamples, m): the column means of each resample
    of the n rows drawn with replacement (the same rows for every column: a paired resample)."""
    values = np.asarray(values, dtype=np.float64)
    n = values.shape[0]
    if n == 0:
        raise DataError(
            "per-query values",
            "no queries to resample",
            "pass a run with at least one judged query",
        )
    rng = np.random.default_rng(seed)
    out = []
    for start in range(0, n_resamples, _CHUNK):
        idx = rng.integers(0, n, size=(min(_CHUNK, n_resamples - start), n))
        out.append(values[idx].mean(axis=1))
    return np.concatenate(out)


def bootstrap_ci(
    values, n_resamples: int = N_RESAMPLES, confidence: float = CONFIDENCE, seed: int = SEED
) -> Interval:
    """The percentile bootstrap interval of the mean of ``values`` (one value per query)."""
    values = np.asarray(values, dtype=np.float64).ravel()
    means = bootstrap_means(values, n_resamples, seed)
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(float(values.mean()), float(low), float(high), int(values.size))


def metric_cis(
    per_query: pl.DataFrame, metrics: list[str], by: str | None = None, **kwargs
) -> pl.DataFrame:
    """per_query (query_id, [by], <metric>...) → one row per metric (and value of ``by``):
    [by], metric, n, mean, low, high. Groups are sorted; a null group reads 'none'."""
    missing = [m for m in metrics if m not in per_query.columns]
    if missing:
        raise DataError(
            "per_query", f"no column {missing}", f"ask for metrics among {per_query.columns}"
        )
    if by is None:
        parts = [(None, per_query)]
    else:
        keyed = per_query.with_columns(pl.col(by).cast(pl.String).fill_null("none"))
        parts = [(g, keyed.filter(pl.col(by) == g)) for g in sorted(keyed[by].unique())]
    rows = []
    for g, sub in parts:
        for m in metrics:
            ci = bootstrap_ci(sub[m].to_numpy(), **kwargs)
            rows.append(
                {
                    **({by: g} if by else {}),
                    "metric": m,
                    "n": ci.n,
                    "mean": ci.mean,
                    "low": ci.low,
                    "high": ci.high,
                }
            )
    return pl.DataFrame(rows)


def paired_difference(a: pl.DataFrame, b: pl.DataFrame, metric: str, **kwargs) -> Interval:
    """The interval of mean(a − b) over the queries both tables judge, paired by query_id (run a's
    gain over run b; an interval above 0 is a win beyond resampling noise)."""
    both = (
        a.select("query_id", pl.col(metric).alias("a"))
        .join(b.select("query_id", pl.col(metric).alias("b")), on="query_id", how="inner")
        .sort("query_id")
    )
    return bootstrap_ci((both["a"] - both["b"]).to_numpy(), **kwargs)
