"""ReMe's float16 cosines (``dense.cosine=float16``, preset reme): agentscope-ai/ReMe @ c8e12487
``local_file_store.py::vector_search`` scores every chunk with ``utils/similarity_utils.py::
batch_cosine_similarity`` on the float16 vectors as stored (``_embedding_f16_b64``) and the float16
query vector: ``np.dot`` of the float16 arrays (one float32 sum per element, rounded to float16),
float16 norms, their float16 outer product and a float16 division. The same numpy expression runs
here on the stored vectors (the nodes' and queries' ``embedding`` columns, float16 values), so the
scores are ReMe's bits; ties (many, at float16's precision) go to the lower node, as the rest of
the dense channel breaks them, or with ``tie`` (``dense.ties=store``: the nodes' ``store_order``)
to the chunk earlier in ReMe's chunk store, as ``vector_search``'s heap on ``(score, −order)``
does. A brute-force scan, as ReMe's: for ReMe-sized workspaces.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from pipeline.contract.errors import ConfigError


def reme_cosine(q16: np.ndarray, m16: np.ndarray) -> np.ndarray:
    """``batch_cosine_similarity(q16, m16)`` in float16, as a float32 array (nq, n); a zero-norm
    row (ReMe: 0 / 1e-10 in float16, i.e. NaN) scores 0."""
    dots = np.dot(q16, m16.T)
    norms = np.outer(np.linalg.norm(q16, axis=1), np.linalg.norm(m16, axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        s = dots / np.where(norms == 0, np.float16(1e-10), norms)
    return np.nan_to_num(s.astype(np.float32), nan=0.0, posinf=0.0, neginf=0.0)


def raw16(frame: pl.DataFrame, n: int, what: str) -> np.ndarray:
    """The ``embedding`` column as float16 rows (zeros where missing); a ConfigError without it."""
    if "embedding" not in frame.columns:
        raise ConfigError(
            f"dense.cosine=float16 scores the stored vectors; the {what} have no 'embedding' "
            "column (use dense.cosine=float32 for encoded vectors)"
        )
    col = frame["embedding"]
    have = col.is_not_null().to_numpy()
    d = int(col.list.len().drop_nulls().max() or 0)
    out = np.zeros((n, d), np.float16)
    if have.any():
        out[have] = np.asarray(col.filter(col.is_not_null()).to_list(), np.float32)
    return out


@dataclass
class Float16Scores:
    """ReMe's cosines between one vector per query (``xq16``) and the nodes (``xb16``)."""

    xq16: np.ndarray
    xb16: np.ndarray
    tie: np.ndarray | None = None  # each node's store order (None: ties by node)

    def top(self, rows: np.ndarray, nodes_s: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
        """(row position, node, cosine) of each query row's ``k`` best nodes of ``nodes_s``,
        ties by the lower ``tie`` (store order), else by the lower node."""
        s = reme_cosine(self.xq16[rows], self.xb16[nodes_s])
        if self.tie is None:
            order = np.argsort(-s, axis=1, kind="stable")[:, :k]
        else:
            key = np.broadcast_to(self.tie[nodes_s], s.shape)
            order = np.lexsort((key, -s), axis=-1)[:, :k]
        qi = np.repeat(np.arange(len(rows)), order.shape[1])
        ni = order.ravel()
        return qi, ni, s[qi, ni]

    def reorder(self, q: np.ndarray, n: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, ...]:
        """(q, n, s, 1-based rank) sorted by query, score desc, then ``tie`` (else node)."""
        key = self.tie[n] if self.tie is not None else n
        o = np.lexsort((key, -s, q))
        q, n, s = q[o], n[o], s[o]
        first = np.unique(q, return_index=True)[1]
        start = np.repeat(first, np.diff(np.r_[first, len(q)])) if len(q) else q
        return q, n, s, (np.arange(len(q)) - start + 1).astype(np.int32)

    def pairs(self, qi: np.ndarray, ni: np.ndarray) -> np.ndarray:
        """The cosine of each (query qi[j], node ni[j]) pair (the bits :meth:`top` gives)."""
        if not len(qi):
            return np.zeros(0, np.float32)
        uq, iq = np.unique(qi, return_inverse=True)
        un, inn = np.unique(ni, return_inverse=True)
        return reme_cosine(self.xq16[uq], self.xb16[un])[iq, inn]
