"""ReMe adapter (``data=reme``): a ReMe workspace read as ReMe reads it (agentscope-ai/ReMe @ c8e12487).

- **ReMe's own index** when ``metadata/`` holds it (``pipeline.adapters.reme_index``): one node per
  ``FileChunk`` (``node_id = "<path>#L<start>-L<end>"``, ``doc_id`` = the workspace-relative path,
  ``text``, ``start_line``/``end_line``, ``chunk_id``), ``updated_at`` = the file's ``st_mtime``,
  ``title``/``description`` = front matter ``name``/``description``, and the chunk's stored vector
  as ``embedding`` (bring your own vectors: ``stages/embed.py``). Edges are the file graph's links:
  from the source chunk holding the ``[[target#anchor]]`` text to the target chunks holding the
  anchor's lines (``#L9-L10,L12-L12``), or the target's first chunk.
- **The markdown walk** when it does not (``index=auto``; ``index=notes`` forces it): the notes
  ReMe's default index covers (``config/default.yaml``: ``daily/`` and ``digest/``, ``*.md``), one
  node per heading section, links resolved the same way (targets taken literally, as ReMe does).
- ``layer`` = the path's first folder (``daily | digest | resource | session | …``): ``data.layers``
  keeps only some; a query's ``doc_scope: ["daily"]`` sees only that layer.
- ``meta/*.json`` signals (``pipeline.adapters.reme_meta``) become node columns for ``reme_design``.

A run only reads the store; ``recall feedback RUN --format reme`` writes its access log.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.adapters import fields, reme_index, reme_meta, reme_slots
from pipeline.adapters.common import EDGE_COLUMNS, finish
from pipeline.adapters.markdown import slugify
from pipeline.adapters.workspace import _root, list_notes, note_rows, qrels_table, queries_table
from pipeline.channels.lexical import stopword_list
from pipeline.contract.dataset import Dataset
from pipeline.contract.errors import ConfigError, DataError, require_one_of
from pipeline.contract.schema import conform, frame, parse_timestamp
from pipeline.ops.tokenize import reme_words

log = logging.getLogger(__name__)
LINK_KEYS = ("source_path", "target_path", "target_anchor")  # reme/schema/file_link.py
NOTE_DIRS = ("daily", "digest")  # ReMe config/default.yaml: index_update_loop watch_dirs, suffix md


def _utc(seconds, where: str) -> dt.datetime | None:
    """An ``st_mtime`` (seconds) as a UTC datetime; one past the years 1–9999 is a DataError."""
    if seconds is None:
        return None
    t = fields.epoch_utc(seconds)
    if t is None:
        raise DataError(
            where,
            f"modification time {seconds!r} is not a date of years 1–9999",
            "set a real modification time (touch the file)",
            field="st_mtime",
        )
    return t


def _layer(path: str) -> str:
    return path.split("/", 1)[0] if "/" in path else ""


def _unique_id(base: str, seen: set[str]) -> str:
    nid, n = base, 1
    while nid in seen:
        n += 1
        nid = f"{base}~{n}"
    seen.add(nid)
    return nid


def _source_chunk(units: list[dict], target: str, anchor: str | None) -> str:
    """The source chunk whose text holds the link (ReMe's FileLink keeps no line); else the first."""
    needle = f"[[{target}#{anchor}" if anchor else f"[[{target}"
    for u in units:
        if needle in u["text"]:
            return u["node_id"]
    return units[0]["node_id"]


def resolve_links(links: list[tuple], units: dict[str, list[dict]], skipped: Counter) -> list[dict]:
    """(src node_id, target path, anchor) → edges to the target units holding the anchor's lines
    (a heading anchor: the section of that slug), else to the target's first unit; a target
    outside the index is skipped and counted (ReMe keeps it as a "virtual" node)."""
    edges, seen = [], set()
    for src, target, anchor in links:
        tu = units.get(target)
        if not tu:
            skipped["link_target_not_indexed"] += 1
            continue
        ranges = reme_index.line_ranges(anchor)
        if ranges:
            dsts = [
                u["node_id"]
                for u in tu
                if any(u["start_line"] <= b and a <= u["end_line"] for a, b in ranges)
            ]
        elif anchor:
            dsts = [u["node_id"] for u in tu if u.get("slug") == slugify(anchor)]
        else:
            dsts = [tu[0]["node_id"]]
        if not dsts:
            skipped["link_anchor_unmatched"] += 1
            dsts = [tu[0]["node_id"]]
        for dst in dsts:
            if dst == src:
                skipped["link_self"] += 1
            elif (src, dst) not in seen:
                seen.add((src, dst))
                edges.append({"src": src, "dst": dst, "relation": "wikilink", "weight": 1.0})
    return edges


def _vectors(recs: list[dict], meta: Path, p: dict, where: str) -> tuple[list | None, str]:
    """(each chunk's vector — its own, else ReMe's caches by text hash —, the vector space when the
    store has one cache, else ""); None when ``data.vectors`` is ``false`` or (``auto``) no chunk
    has one. A chunk without one, or two widths, is a DataError."""
    mode = p["vectors"]
    if mode == "false":
        return None, ""
    vecs = [reme_index.chunk_vector(r, where) for r in recs]
    caches = reme_index.embedding_caches(meta, p["index_name"], p["store_version"])
    space = caches[0][1] if len(caches) == 1 else ""  # two caches: the chunks' space is unnamed
    if any(v is None for v in vecs):  # the caches matter only for a chunk without its own vector
        own = {len(v) for v in vecs if v is not None}
        width = own.pop() if len(own) == 1 else None
        vecs = [
            v
            if v is not None
            else reme_index.cached_vector(caches, reme_index.text_key(r["text"]), width, where)
            for v, r in zip(vecs, recs)
        ]
    if mode == "auto" and all(v is None for v in vecs):
        return None, space
    for v, r in zip(vecs, recs):
        if v is None:
            raise DataError(
                where,
                f"chunk {r['id']} ({r['path']}:{r['start_line']}-{r['end_line']}) has no vector "
                "(no _embedding_f16_b64, not in the embedding store)",
                "let ReMe backfill its embeddings, or set data.vectors=false to embed every chunk "
                "with embed.model_path",
                field="_embedding_f16_b64",
            )
    widths = sorted({len(v) for v in vecs})
    if len(widths) > 1:
        raise DataError(
            where, f"chunk vectors of widths {widths}", "re-embed the store with one model"
        )
    return vecs, space


def _indexable(text: str, stop: set[str]) -> bool:
    """``BM25Index.is_indexable``: ReMe's tokenizer leaves at least one term."""
    return any(w not in stop for w in reme_words(text))


def _keyword_slots(meta: Path, stored: list[dict], notes: dict) -> tuple[dict, int] | None:
    """ReMe's persisted BM25 slots (``reme_slots``) when ReMe keeps that index: its live chunks
    are the chunk store's chunks with text, less those without a term that it lacks
    (``_sync_keyword_index_from_chunks``); else None (ReMe rebuilds it in chunk store order)."""
    layout = reme_slots.slot_layout(meta)
    if layout is None:
        return None
    live = set(layout[0])
    texts = {r["id"]: r["text"] for r in stored if r["text"]}
    stop = set(stopword_list("reme"))
    expected = {c for c in texts if c in live or _indexable(texts[c], stop)}
    if live != expected:
        notes["keyword_slots"] = f"{reme_slots.PICKLE}: stale (ReMe rebuilds it)"
        return None
    notes["keyword_slots"] = (
        f"{reme_slots.PICKLE}: {len(live)} live of {layout[1]} slots, read without unpickling"
    )
    return layout


def _chunk_rows(recs: list[dict], graph: dict, vecs: list | None) -> list[dict]:
    """One node row per FileChunk (sorted by path and lines), with its file node's fields."""
    rows, seen, seq = [], set(), Counter()
    for i, r in enumerate(recs):
        fnode = graph.get(r["path"], {})
        fm = fnode.get("front_matter") or {}
        rows.append(
            {
                "node_id": _unique_id(f"{r['path']}#L{r['start_line']}-L{r['end_line']}", seen),
                "text": r["text"],
                "doc_id": r["path"],
                "title": str(fm.get("name") or Path(r["path"]).stem),
                "description": str(fm["description"]) if fm.get("description") else None,
                "layer": _layer(r["path"]),
                "start_line": int(r["start_line"]),
                "end_line": int(r["end_line"]),
                "seq": seq[r["path"]],
                "updated_at": _utc(fnode.get("st_mtime"), r["path"]),
                "chunk_id": r["id"],
                "store_order": r["_store_order"],
                "keyword_slot": r["_slot"],
                "keyword_slots": r["_slots"],
                **({"embedding": vecs[i].astype(np.float32)} if vecs is not None else {}),
            }
        )
        seq[r["path"]] += 1
    return rows


def _index_units(
    root: Path, p: dict, skipped: Counter, notes: dict
) -> tuple[list[dict], list[tuple], list[Path]]:
    """(node rows, raw links, files read) from ReMe's index."""
    meta = root / "metadata"
    graph = reme_index.file_nodes(meta, p["index_name"])
    cpath = reme_index.chunks_file(meta, p["index_name"], p["store_version"])
    stored = reme_index.chunks(meta, p["index_name"], p["store_version"])
    if not stored:  # ReMe's search finds nothing in it; a run over no node is refused
        raise DataError(
            str(cpath),
            "ReMe's chunk store holds no chunk (nothing was indexed)",
            "let ReMe index the workspace (its index_update job) before recalling from it",
        )
    first: dict[str, int] = {}
    for i, r in enumerate(stored):  # ReMe's file_chunks dict: a repeated id keeps its first place
        first.setdefault(r["id"], i)
    recs = sorted(stored, key=lambda r: (r["path"], r["start_line"], r["end_line"], r["id"]))
    slots = _keyword_slots(meta, stored, notes) if p["keyword_slots"] else None
    for r in recs:
        r["_store_order"] = first[r["id"]]
        r["_slot"] = None if slots is None else slots[0].get(r["id"])
        r["_slots"] = None if slots is None else slots[1]
    vecs, space = _vectors(recs, meta, p, str(cpath))
    in_graph = {c for n in graph.values() for c in n.get("chunk_ids") or []}
    skipped["chunk_not_in_file_graph"] += sum(r["id"] not in in_graph for r in recs)
    skipped["file_graph_chunk_missing"] += len(in_graph - {r["id"] for r in recs})
    rows = _chunk_rows(recs, graph, vecs)
    units = _by_doc(rows)
    links = [
        (
            _source_chunk(units[n["path"]], lk["target_path"], lk.get("target_anchor")),
            lk["target_path"],
            lk.get("target_anchor"),
        )
        for n in graph.values()
        if n["path"] in units
        for lk in n.get("links") or []
        if lk.get("target_path")
    ]
    if vecs is None and p["vectors"] == "auto":  # ReMe indexed it without an embedding model
        notes["store_vectors"] = "none"
    if vecs is not None:
        width = len(vecs[0])
        notes["vector_model"] = p["vector_model"] or f"reme:{space or 'chunk-vectors'}-{width}d"
    notes["index"] = (
        f"ReMe index {cpath.relative_to(root)}: {len(recs)} chunks of {len(units)} files"
    )
    notes["_file_graph"] = graph  # taken out by load(): the link-expansion tables
    files = [
        f for f in (meta / "file_graph" / f"{p['index_name']}.jsonl.zst", cpath) if f.is_file()
    ]
    files += sorted(
        (meta / "embedding_store").glob(f"{p['index_name']}_{p['store_version']}_*.npz")
    )
    return rows, links, files


def _note_units(
    root: Path, skipped: Counter, notes: dict
) -> tuple[list[dict], list[tuple], list[Path]]:
    """(node rows, raw links, files read) of the markdown walk over ``daily/`` and ``digest/``."""
    files = [f for d in NOTE_DIRS if (root / d).is_dir() for f in list_notes(root / d)]
    rows, links = [], []
    for f in sorted(files, key=lambda f: f.relative_to(root).as_posix()):
        r, lk = note_rows(root, f, skipped)
        mtime = _utc(f.stat().st_mtime, str(f))
        for row in r:
            row.update(
                layer=_layer(row["doc_id"]), updated_at=mtime, slug=row["node_id"].rsplit("#", 1)[1]
            )
        rows += r
        links += [(src, target, anchor) for src, _rel, target, anchor in lk if target]
    if not rows:
        raise DataError(
            str(root),
            "no ReMe index (metadata/) and no notes under daily/ or digest/",
            "point data.path at a ReMe workspace",
        )
    notes["index"] = f"no ReMe index: markdown walk of {', '.join(NOTE_DIRS)} ({len(files)} notes)"
    return rows, links, files


def graph_tables(graph: dict[str, dict]) -> dict[str, pl.DataFrame]:
    """ReMe's file graph as two tables for ``inject.format=reme``'s link expansion
    (``inject/reme.py``): ``file_links`` (node_path, source_path, target_path,
    target_anchor, in each file's link order) and ``file_nodes`` (path, name, description)."""
    s = pl.String
    links = pl.DataFrame(
        [
            (path, *(None if lk.get(k) is None else str(lk[k]) for k in LINK_KEYS))
            for path, n in graph.items()
            for lk in n.get("links") or []
            if isinstance(lk, dict)
        ],
        schema={"node_path": s, "source_path": s, "target_path": s, "target_anchor": s},
        orient="row",
    )
    files = pl.DataFrame(
        [
            (path, str(fm.get("name") or "") or None, str(fm.get("description") or "") or None)
            for path, n in graph.items()
            for fm in [n["front_matter"] if isinstance(n.get("front_matter"), dict) else {}]
        ],
        schema={"path": s, "name": s, "description": s},
        orient="row",
    )
    return {"file_links": links, "file_nodes": files}


def _by_doc(rows: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["doc_id"], []).append(r)
    return out


def _with_signals(nodes: pl.DataFrame, root: Path, now, notes: dict) -> tuple[pl.DataFrame, dict]:
    """Nodes with the ``meta/*.json`` columns joined by path; freshness per signal at ``now``
    (``data.now``, else the store's latest ``st_mtime``: never the wall clock)."""
    latest = nodes["updated_at"].max() if "updated_at" in nodes.columns else None
    ref = now or latest or dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
    per_path, fresh = reme_meta.load(root, ref)
    nodes = nodes.drop([c for c in per_path.columns if c != "doc_id" and c in nodes.columns])
    nodes = nodes.join(per_path, on="doc_id", how="left", maintain_order="left")
    if fresh["archived"]["status"] in ("fresh", "stale"):
        nodes = nodes.with_columns(pl.col("archived_store").fill_null(False))
    used = sorted(k for k, v in fresh.items() if v["status"] in ("fresh", "stale"))
    notes["meta_signals"] = (
        f"meta/*.json used: {', '.join(used) or 'none'} (reference time {ref.isoformat()})"
    )
    return nodes, fresh


def _read_files(root: Path, files: list[Path]) -> list[Path]:
    """Every file the dataset was read from before its queries: the index or notes, and the
    ``meta/*.json`` signal files the store has."""
    meta = (root / "meta" / n for n in reme_meta.SIGNAL_FILES.values())
    return [*files, *(f for f in meta if f.is_file())]


def _units(root: Path, p: dict, index: str, skipped: Counter, notes: dict):
    """(node rows, raw links, files read): ReMe's index, or the markdown walk (``data.index``)."""
    index_name, store_version = p["index_name"], p["store_version"]
    has_index = reme_index.chunks_file(root / "metadata", index_name, store_version).is_file()
    if index == "reme" and not has_index:
        raise DataError(
            str(reme_index.chunks_file(root / "metadata", index_name, store_version)),
            "not found",
            "set data.index=auto to read the notes",
        )
    if has_index and index != "notes":
        rows, links, files = _index_units(root, p, skipped, notes)
    else:
        rows, links, files = _note_units(root, skipped, notes)
        if p["vectors"] == "auto":  # no ReMe index: ReMe's default config searches by keyword
            notes["store_vectors"] = "none"
    if (root / "metadata").is_dir():
        if pk := reme_index.pickles(root / "metadata"):
            notes["pickles_ignored"] = (
                f"never unpickled: {', '.join(pk)} (BM25 is rebuilt from the chunk texts; "
                "only the slot layout is read, from the opcodes)"
            )
    return rows, links, files


def _in_layers(nodes: pl.DataFrame, layers, skipped: Counter, root: Path) -> pl.DataFrame:
    """The nodes of ``data.layers`` (all when it is None); the others are counted."""
    if layers is None:
        return nodes
    keep = [str(x) for x in layers]
    skipped["layer_filtered"] += int((~nodes["layer"].is_in(keep)).sum())
    nodes = nodes.filter(pl.col("layer").is_in(keep))
    if nodes.height == 0:
        raise ConfigError(f"data.layers={keep}: no node of {root} is in those layers")
    return nodes


def load(
    path: str,
    *,
    name: str = "reme",
    queries: str | None = None,
    qrels: str | None = None,
    limit_queries: int | None = None,
    index: str = "auto",
    index_name: str = "default",
    store_version: str = "v1",
    layers: list[str] | None = None,
    vectors: str = "auto",
    vector_model: str | None = None,
    now: str | None = None,
    queries_format: str = "auto",
    keyword_slots: bool = False,
) -> Dataset:
    """A Dataset from a ReMe workspace (see the module docstring for every option)."""
    require_one_of("data.index", index, ("auto", "reme", "notes"))
    require_one_of("data.vectors", str(vectors).lower(), ("auto", "true", "false"))
    root = _root(path)
    skipped, notes = Counter(), {}
    p = {
        "index_name": index_name,
        "store_version": store_version,
        "vectors": str(vectors).lower(),
        "vector_model": vector_model,
        "keyword_slots": bool(keyword_slots),
    }
    rows, links, files = _units(root, p, index, skipped, notes)
    graph = notes.pop("_file_graph", None)
    edge_rows = resolve_links(links, _by_doc(rows), skipped)
    for r in rows:
        r.pop("slug", None)
    nodes = conform(pl.DataFrame(rows, infer_schema_length=None), "nodes", str(root))
    nodes = _in_layers(nodes, layers, skipped, root)
    ids = set(nodes["node_id"])
    edge_rows = [e for e in edge_rows if e["src"] in ids and e["dst"] in ids]
    t_now = parse_timestamp(now, "data.now", None, "now") if now else None
    nodes, fresh = _with_signals(nodes, root, t_now, notes)
    edges = frame(edge_rows, "edges", EDGE_COLUMNS, str(root))
    return finish(
        name,
        nodes,
        queries_table(queries, queries_format),
        [*_read_files(root, files), queries, qrels],
        limit_queries,
        edges=edges,
        qrels=qrels_table(queries, qrels, queries_format, nodes),
        skipped=skipped,
        notes=notes,
        freshness=fresh,
        tables=graph_tables(graph) if graph is not None else {},
    )
