"""Dense flat search for corpora larger than memory (``dense=blocked``).

Node embeddings live in a memory-mapped ``.npy`` under the cache (keyed by the model and the
content hash of the texts), and the exact inner-product search streams it in blocks of ``block``
rows, keeping a running top-k per query — only one block and the (nq, k) heaps are in memory.
Ties are broken by node index. Same results as a FAISS flat scan up to float rounding and ties.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

import numpy as np

from pipeline.contract import io
from pipeline.core import npzcache
from pipeline.ops.topk import topk_by_row


def search(
    xb: np.ndarray, xq: np.ndarray, k: int, block: int = 65536, max_scores: int = 1 << 24
) -> tuple[np.ndarray, np.ndarray]:
    """xb: (n, d) float32 (a memmap is fine), xq: (nq, d) → (D, I) (nq, min(k, n)), best first.

    Node rows are read once, ``block`` at a time; queries go in chunks so that one score matrix
    holds at most ``max_scores`` entries; each chunk's running top-k is merged with the block's."""
    n, nq = len(xb), len(xq)
    k = min(k, n)
    D = np.full((nq, 0), -np.inf, np.float32)
    I = np.zeros((nq, 0), np.int64)
    if k <= 0 or nq == 0:
        return D, I
    xq = np.ascontiguousarray(xq, dtype=np.float32)
    qstep = max(1, max_scores // max(1, min(block, n)))
    for s in range(0, n, block):
        xs = np.asarray(xb[s : s + block], dtype=np.float32)
        ids = np.arange(s, s + len(xs), dtype=np.int64)
        parts = []
        for q in range(0, nq, qstep):
            bd, bi = topk_by_row(xq[q : q + qstep] @ xs.T, ids, k)
            parts.append(
                topk_by_row(
                    np.concatenate([D[q : q + qstep], bd], 1),
                    np.concatenate([I[q : q + qstep], bi], 1),
                    k,
                )
                if D.shape[1]
                else (bd, bi)
            )
        D, I = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    return D, I


class BlockedIndex:
    """The two verbs ``dense.search`` uses (``ntotal``, ``search``) over an array that stays on disk."""

    def __init__(self, xb: np.ndarray, block: int = 65536) -> None:
        self.xb, self.block, self.ntotal = xb, int(block), len(xb)

    def search(self, xq: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(scores, ids) of the ``k`` best inner products per query row, streamed block by block."""
        return search(self.xb, xq, k, self.block)


def memmap_cached(
    cache_dir: Path,
    model_id: str,
    texts: list[str],
    compute: Callable[[list[str]], tuple[np.ndarray, int]],
) -> tuple[np.ndarray, int]:
    """(read-only memmap of the texts' embeddings, number encoded): ``compute`` runs only when the
    ``.npy`` for this model and these texts is not in the cache yet; it is written atomically."""
    h = hashlib.sha256(model_id.encode())
    npzcache.digest(h, "text", texts)  # the texts' exact bytes in order, as every corpus cache
    path = Path(cache_dir) / "memmap" / f"{model_id.replace('/', '_')}-{h.hexdigest()[:20]}.npy"
    n = 0
    if not path.is_file():
        xb, n = compute(texts)
        io.atomic_write(path, lambda fh: np.save(fh, np.ascontiguousarray(xb, dtype=np.float32)))
    return np.load(path, mmap_mode="r"), n
