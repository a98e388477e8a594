"""Write a ReMe store in ReMe's own on-disk format: the tests' ReMe stores and the float16 chunk
vectors ``scripts/parity/parity_reme.py`` writes into a copy of a ReMe workspace.

Field names and encodings are copied from agentscope-ai/ReMe @ c8e12487:
- ``reme/utils/jsonl_zst.py``: JSON Lines in one zstd frame (``write_jsonl_zst``);
- ``reme/components/file_graph/local_file_graph.py``: ``metadata/file_graph/<name>.jsonl.zst``, one
  ``FileNode.model_dump_json()`` per line (``reme/schema/file_node.py``: path, st_mtime, links,
  chunk_ids, front_matter; ``file_link.py``: source_path, target_path, target_anchor);
- ``reme/components/file_store/local_file_store.py``: ``metadata/file_store/
  file_chunks_<name>_<version>.jsonl.zst``, ``_serialize_chunk``: the ``FileChunk`` dump without
  ``embedding`` (id, text, metadata, path, start_line, end_line, scores) plus
  ``_embedding_f16_b64`` = base64 of the float16 bytes; ``FileChunk.set_hash_id``: id =
  sha256(" ".join([path, start, end, text]));
- ``reme/components/embedding_store/local_embedding_store.py``: ``metadata/embedding_store/
  <name>_<version>_<vector space>.npz`` with ``keys`` (sha256 of the text) and ``embeddings``.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import numpy as np
import pyarrow as pa


def write_jsonl_zst(path: Path, rows: list[dict]) -> None:
    """JSON Lines compressed as one zstd stream (what ReMe's ``write_jsonl_zst`` writes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)
    with pa.CompressedOutputStream(pa.OSFile(str(path), "wb"), "zstd") as fh:
        fh.write(data.encode("utf-8"))


def chunk_id(path: str, start: int, end: int, text: str) -> str:
    """``FileChunk.set_hash_id``: sha256 of path, start, end and text joined by spaces."""
    return hashlib.sha256(" ".join([path, str(start), str(end), text]).encode()).hexdigest()


def chunk_record(path: str, start: int, end: int, text: str, vec=None) -> dict:
    """One line of the chunk store, as ``LocalFileStore._serialize_chunk`` writes it."""
    rec = {
        "id": chunk_id(path, start, end, text),
        "text": text,
        "metadata": {},
        "path": path,
        "start_line": start,
        "end_line": end,
        "scores": {},
    }
    if vec is not None:
        raw = np.ascontiguousarray(np.asarray(vec, dtype=np.float16)).tobytes()
        rec["_embedding_f16_b64"] = base64.b64encode(raw).decode("ascii")
    return rec


def file_node(path: str, st_mtime: float, links, chunk_ids, name: str = "", description: str = ""):
    """One line of the file graph (``FileNode``); ``links`` are (target_path, target_anchor)."""
    return {
        "path": path,
        "st_mtime": st_mtime,
        "links": [{"source_path": path, "target_path": t, "target_anchor": a} for t, a in links],
        "chunk_ids": list(chunk_ids),
        "front_matter": {"name": name, "description": description},
    }


def write_store(root: Path, files: list[dict], chunks: list[dict], npz: dict | None = None) -> None:
    """``metadata/`` of a store: file graph, chunk store and (``npz``: text → vector) the cache."""
    meta = root / "metadata"
    write_jsonl_zst(meta / "file_graph" / "default.jsonl.zst", files)
    write_jsonl_zst(meta / "file_store" / "file_chunks_default_v1.jsonl.zst", chunks)
    if npz:
        keys = np.array([hashlib.sha256(t.encode()).hexdigest() for t in npz], dtype=str)
        emb = np.stack([np.asarray(v, np.float16) for v in npz.values()])
        (meta / "embedding_store").mkdir(parents=True, exist_ok=True)
        np.savez(
            meta / "embedding_store" / "default_v1_abc123def456.npz", keys=keys, embeddings=emb
        )
