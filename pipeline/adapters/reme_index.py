"""ReMe's own index under ``metadata/``, read as ReMe reads it (agentscope-ai/ReMe @ c8e12487):

- ``file_graph/<name>.jsonl.zst`` (``components/file_graph/local_file_graph.py``): one ``FileNode``
  per line: ``path``, ``st_mtime``, ``links`` [``source_path``, ``target_path``, ``target_anchor``],
  ``chunk_ids``, ``front_matter`` {``name``, ``description``, extras};
- ``file_store/file_chunks_<name>_<version>.jsonl.zst`` (``file_store/local_file_store.py``): one
  ``FileChunk`` per line: ``id``, ``text``, ``path``, ``start_line``, ``end_line`` (1-based,
  inclusive), ``metadata``, ``scores``, and the vector as ``_embedding_f16_b64`` (base64 of the
  float16 bytes; ``_deserialize_chunk``);
- ``embedding_store/<name>_<version>_<vector space>.npz`` (``embedding_store/
  local_embedding_store.py``): ReMe's embedding *cache*: ``keys`` = sha256 of the embedded text (not
  chunk ids), ``embeddings`` (n × d float16), one file per vector space (a store whose embedding
  model changed keeps two). Read only for a chunk without ``_embedding_f16_b64``.
- ``keyword_index/*.pkl``: a pickle; never opened (BM25 is rebuilt from the chunk texts, as ReMe's
  own ``_sync_keyword_index_from_chunks`` does).

The ``.zst`` files are read by ``common.read_jsonl`` (pyarrow's zstd codec); nothing is unpickled.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from pathlib import Path

import numpy as np

from pipeline.adapters import fields
from pipeline.adapters.common import inside, read_jsonl
from pipeline.contract.errors import DataError

FIX_INDEX = "rebuild ReMe's index (its reindex job), or move metadata/ away to read the notes"
ANCHOR_RANGE = re.compile(r"^L(\d+)(?:-L?(\d+))?$")


def file_nodes(meta: Path, name: str) -> dict[str, dict]:
    """path → FileNode record of ``file_graph/<name>.jsonl.zst`` (empty when the file is absent)."""
    path = inside(meta.parent, meta / "file_graph" / f"{name}.jsonl.zst")
    if not path.is_file():
        return {}
    out = {}
    for i, r in enumerate(read_jsonl(path, fields.REME_FILE_NODE, FIX_INDEX, file_fix=FIX_INDEX)):
        for j, link in enumerate(r.get("links") or []):
            row = f"line {i + 1} links[{j}]"
            fields.check(link, fields.REME_FILE_LINK, str(path), row, FIX_INDEX)
        out[r["path"]] = r
    return out


def chunks_file(meta: Path, name: str, version: str) -> Path:
    """``file_store/file_chunks_<name>_<version>.jsonl.zst`` (``LocalFileStore.chunks_path``)."""
    return meta / "file_store" / f"file_chunks_{name}_{version}.jsonl.zst"


def chunks(meta: Path, name: str, version: str) -> list[dict]:
    """The FileChunk records, in file order; a record without its fields is a DataError."""
    path = inside(meta.parent, chunks_file(meta, name, version))
    return read_jsonl(path, fields.REME_CHUNK, FIX_INDEX, file_fix=FIX_INDEX)


def chunk_vector(rec: dict, where: str) -> np.ndarray | None:
    """The chunk's stored float16 vector (``_embedding_f16_b64``, or a legacy ``embedding`` list)."""
    enc = rec.get("_embedding_f16_b64")
    if enc is not None:
        try:
            raw = base64.b64decode(enc, validate=True)
        except (binascii.Error, ValueError):
            raw = b"\0"  # odd length: reported below
        if len(raw) % 2:
            raise DataError(
                where,
                f"chunk {rec['id']} has an invalid _embedding_f16_b64",
                FIX_INDEX,
                field="_embedding_f16_b64",
            )
        return _finite(np.frombuffer(raw, dtype=np.float16), rec, where, "_embedding_f16_b64")
    if rec.get("embedding") is not None:
        return _finite(np.asarray(rec["embedding"], dtype=np.float16), rec, where, "embedding")
    return None


def _finite(v: np.ndarray, rec: dict, where: str, field: str) -> np.ndarray:
    """``v`` when every component is finite (a float16 NaN/inf, or a value past float16's 65504,
    would poison every cosine); else a DataError naming the chunk."""
    if not np.isfinite(v).all():
        raise DataError(
            where,
            f"vector holds NaN or inf at component {int(np.argmin(np.isfinite(v)))}",
            FIX_INDEX,
            row=f"chunk {rec['id']}",
            field=field,
        )
    return v


def embedding_caches(meta: Path, name: str, version: str) -> list[tuple[Path, str, dict]]:
    """Every ``<name>_<version>_<vector space>.npz`` as (file, vector space id, text sha256 →
    float16 vector): ReMe keeps one cache per vector space (``LocalEmbeddingStore._cache_path``), so
    a store whose embedding model changed holds two. Read with ``allow_pickle=False`` (numpy's
    default), never unpickled."""
    out = []
    for f in sorted((meta / "embedding_store").glob(f"{name}_{version}_*.npz")):
        inside(meta.parent, f)
        try:
            with np.load(f, allow_pickle=False) as data:
                keys, emb = data["keys"], data["embeddings"]
        except Exception as exc:  # numpy raises several types for a bad archive
            raise DataError(str(f), f"cannot read the npz ({str(exc)[:120]})", FIX_INDEX) from None
        if emb.ndim != 2 or len(keys) != len(emb):
            raise DataError(str(f), f"keys {keys.shape} / embeddings {emb.shape} differ", FIX_INDEX)
        with np.errstate(over="ignore"):  # a value past float16's 65504 is inf: reported below
            emb = emb.astype(np.float16)
        bad = np.flatnonzero(~np.isfinite(emb).all(axis=1))
        if len(bad):  # NaN or inf would poison every cosine of the chunk that reads it
            raise DataError(
                str(f),
                f"vector of text {str(keys[bad[0]])[:12]}… holds NaN or inf",
                FIX_INDEX,
                row=f"embeddings[{bad[0]}]",
            )
        space = f.name[len(f"{name}_{version}_") : -len(".npz")]
        out.append((f, space, {str(k): e for k, e in zip(keys, emb)}))
    return out


def cached_vector(caches: list, key: str, width: int | None, where: str) -> np.ndarray | None:
    """The vector of text ``key`` in the caches (those of ``width`` when the chunks' own vectors
    have one); a text two caches give different vectors is a DataError naming both files."""
    found = [
        (f, v) for f, _s, c in caches if (v := c.get(key)) is not None and width in (None, len(v))
    ]
    if len(found) > 1 and any(not np.array_equal(found[0][1], v) for _f, v in found[1:]):
        raise DataError(
            where,
            f"text {key[:12]}… has different vectors in {found[0][0].name} and {found[1][0].name}",
            "keep the cache of the embedding model the store uses",
        )
    return found[0][1] if found else None


def text_key(text: str) -> str:
    """ReMe's embedding-cache key of a text (``LocalEmbeddingStore._cache_key``)."""
    return hashlib.sha256(text.encode()).hexdigest()


def line_ranges(anchor: str | None) -> list[tuple[int, int]]:
    """``L2-L5,L9-L9`` → [(2, 5), (9, 9)]; [] when the anchor is not a line anchor (a heading)."""
    out = []
    for part in (anchor or "").split(","):
        m = ANCHOR_RANGE.match(part.strip())
        if not m:
            return []
        a = int(m.group(1))
        out.append((a, int(m.group(2) or a)))
    return out


def pickles(meta: Path) -> list[str]:
    """The pickle files under ``metadata/`` (never opened), relative to the store root."""
    return sorted(p.relative_to(meta.parent).as_posix() for p in meta.rglob("*.pkl"))
