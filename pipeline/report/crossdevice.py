"""One answer across devices: two recall tables of the same run on two devices compared by the
contract of docs/reliability.md "One answer across devices".

Equal: each query's rows (node ids) and their ranks. A node may swap places with its neighbour, or
sit on the other side of the cut, only where the first table's scores of the two are within the
bound (a near-tie whose order the last float bits decide). Every float column within the bound
(NaN equal to NaN, null to null). The bound (:data:`SCORE_BOUND`) covers the pipeline's arithmetic
on the same input vectors: graph diffusion's sparse sums (cuSPARSE orders its additions its own
way), DPP's and NMF's matrix products (cuBLAS), both in float32 before the float64 score; the
embeddings are not the same input across devices (each device's own model run, float16 on a GPU:
cosine >= 0.9999 to the CPU's vector), and their bound is the encoder's, measured by the device
check. Used by ``scripts/parity/cross_device.py`` and the tests of the device paths.
"""

from __future__ import annotations

import numpy as np
import polars as pl

SCORE_BOUND = 1e-4  # |Δ| of any float column across devices on the same vectors (measured: 6e-6)
# |Δ| with each device's own MiniLM vectors (float16 on a GPU): a cosine moves by at most
# ‖Δq‖ + ‖Δd‖ = 2·sqrt(2·(1 − c)) for vectors at cosine c to the CPU's; c = 0.9999986 (measured,
# docs/benchmarks.md "Embedding") gives 3.3e-3, a dense fusion weight ≤ 1 keeps it
EMBED_BOUND = 4e-3


def near_ties(score: np.ndarray, query: np.ndarray, bound: float) -> np.ndarray:
    """Per row (rows by query, then rank): whether its score is within ``bound`` of the row
    before or after it in the same query."""
    gap = np.abs(np.diff(score))
    same = query[1:] == query[:-1]
    close = same & (gap <= bound)
    out = np.zeros(len(score), bool)
    out[1:] |= close
    out[:-1] |= close
    return out


def compare(want: pl.DataFrame, got: pl.DataFrame, bound: float = SCORE_BOUND) -> dict:
    """``got`` (one device's recall table) against ``want`` (the other's): rows per table, moved
    rows (another node at a (query, rank)), whether every move and every row found by one table
    only is a near-tie of ``want`` (:func:`near_ties`, or within ``bound`` of the other table's
    last score of its query: crossing the cut), the largest |Δ| of each float column over the rows both hold, and ``ok``: no move but
    near-ties and every |Δ| within ``bound``."""
    keys = ["query_id", "rank"]
    a, b = want.sort(keys), got.sort(keys)
    out: dict = {"rows": (a.height, b.height), "bound": bound}
    other = b.select(*keys, pl.col("node_id").alias("_other"))  # position by position: a row
    m = a.join(other, on=keys, how="left", maintain_order="left")  # more or fewer at a cut moves
    moved = (m["_other"].is_null() | (m["node_id"] != m["_other"])).fill_null(True).to_numpy()
    q = a["query_id"].cast(pl.String).to_numpy()
    pairs = ["query_id", "node_id"]
    last = a.group_by("query_id").agg(pl.col("score").min().alias("_last"))
    gone = a.join(b.select(*pairs, pl.lit(True).alias("_in")), on=pairs, how="left",
                       maintain_order="left")["_in"].is_null().to_numpy()  # fmt: skip
    b_last = a.select("query_id").join(  # the other table's last score of each row's query
        b.group_by("query_id").agg(pl.col("score").min().alias("_b")), on="query_id", how="left",
        maintain_order="left")["_b"].fill_null(np.inf).to_numpy()  # fmt: skip
    at_cut_a = np.abs(a["score"].to_numpy() - b_last) <= bound  # lost where the other cut
    # a moved row: a near-tie with its neighbour, or a node the other table lost at the cut
    allowed = near_ties(a["score"].to_numpy(), q, bound) | (gone & at_cut_a)
    new = b.join(a.select(pairs), on=pairs, how="anti").join(last, on="query_id", how="left")
    at_cut_b = (new["score"] - new["_last"]).abs().fill_null(np.inf) <= bound
    out["moved"] = int(moved.sum())
    out["only_one"] = int(gone.sum()) + new.height
    out["moves_are_ties"] = bool(allowed[moved].all()) and bool(at_cut_b.all())
    both = a.join(b, on=pairs, suffix="_other")
    diffs = {}
    for col, dtype in a.schema.items():
        if dtype.is_float() and f"{col}_other" in both.columns:
            x, y = both[col].to_numpy(), both[f"{col}_other"].to_numpy()
            d = np.abs(x.astype(np.float64) - y.astype(np.float64))
            d[(np.isnan(x) & np.isnan(y)) | (x == y)] = 0.0
            diffs[col] = float(np.nanmax(np.where(np.isnan(d), np.inf, d))) if len(d) else 0.0
    out["max_diff"] = diffs
    out["ok"] = out["moves_are_ties"] and all(v <= bound for v in diffs.values())
    return out


def summary(name: str, res: dict) -> str:
    """One line of :func:`compare`'s result."""
    worst = max(res["max_diff"].items(), key=lambda kv: kv[1], default=("score", 0.0))
    return (
        f"{name}: rows {res['rows'][0]}/{res['rows'][1]}, moved {res['moved']}, in one only "
        f"{res['only_one']}, moves near-ties {res['moves_are_ties']}, max |diff| "
        f"{res['max_diff'].get('score', 0.0):.2e} (score), {worst[1]:.2e} ({worst[0]}); "
        f"bound {res['bound']:.0e}: {'PASS' if res['ok'] else 'FAIL'}"
    )
