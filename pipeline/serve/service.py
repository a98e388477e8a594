"""``Service``: the stores, indexes and model loaded once; each lookup answered from the cache or,
on a miss, by the batch's query path.

- A **hit** (an entry under the request's scope id and text key whose scope version is the scope's
  version in the loaded data) is read, never recomputed.
- A **miss** runs ``precompute.recall_rows`` (``querypath.recall_queries``, the path of
  ``recall run`` and ``recall precompute``) on the request's text and scope, so its rows equal
  those of a run of that text. Misses that arrive together are micro-batched
  (``pipeline.serve.batcher``: up to ``serve.max_batch`` collected for ``serve.batch_window_ms``);
  a query's result does not depend on its batch (sealed scopes). A computed entry is kept in
  memory for this scope version (``serve.memory_entries`` of them, then the oldest go), so asking
  again is a hit; the disk cache is only written by ``recall precompute``.
- **Reference time**: with ``default_now: start`` (``preset=oks``) the service computes misses at
  the reference time recorded by the generation it serves (``pipeline.run.clock``), and follows
  a new generation's; with no generation yet, at its own start.
- **Freshness**: at most every ``serve.check_interval`` seconds (0: every request) the stat of
  exactly the files the adapter reads is digested (``pipeline.serve.fresh``); a change reloads the
  dataset before the request is answered (in a worker thread, never on the event loop), and
  entries built against another scope version are misses from then on. While the store cannot be
  read (caught mid-write, a file or folder made unreadable) every request is a 503 naming the file
  relative to the store, never the old answer, until it reads again.
- **Scopes** are known by the nodes the request's viewer may see (``fields.viewer``; without one,
  the nodes without a ``visibility`` list): a scope none of whose nodes it may see is a 404, as
  a scope that names nothing, whoever asked before. At most :data:`SCOPE_VERSIONS` scope
  versions (by scope id) and checks (by scope id and viewer) are kept per load.
"""

from __future__ import annotations

import json
import os
import threading
from collections import OrderedDict
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
from omegaconf import DictConfig

from pipeline.contract.errors import ConfigError, DataError, UserError, require_one_of
from pipeline.contract.ingest import drop_empty
from pipeline.contract.registry import call_target
from pipeline.ops.scope import scope_rows, visible
from pipeline.recallcache import keys, recipe
from pipeline.recallcache.reader import RecallCache
from pipeline.run import clock, precompute
from pipeline.serve import render
from pipeline.serve.batcher import MicroBatcher
from pipeline.serve.fresh import DataWatch, data_paths, input_files
from pipeline.serve.guard import without_paths

FLOAT32_MAX = 3.4028234663852886e38  # a stored query embedding is Float32 (the contract)
SCOPE_VERSIONS = 4096  # scope versions kept per load (a client may send any number of scopes)


class BadRequest(UserError):
    """A request the service cannot answer; ``status`` is its HTTP status (4xx)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Loaded:
    """One load of the dataset: its nodes, scope versions and per-node-table memo."""

    ds: object
    nodes: pl.DataFrame
    digest: str
    versions: OrderedDict = field(default_factory=OrderedDict)
    seen: OrderedDict = field(default_factory=OrderedDict)  # (scope id, viewer): not a 404
    memo: dict = field(default_factory=dict)
    computed: OrderedDict = field(default_factory=OrderedDict)
    public: pl.DataFrame | None = None  # the nodes a request (no viewer) may see

    def __post_init__(self) -> None:
        if "visibility" in self.nodes.columns:
            mask = visible(self.nodes["visibility"].to_list(), None)
            self.public = self.nodes.filter(pl.Series(mask))
        else:
            self.public = self.nodes


def check_request(text, scope, k, fmt) -> tuple[str, tuple | None, int | None, str]:
    """(text, scope tuple, k, format) of a request, or a BadRequest naming the field and the fix."""
    if not isinstance(text, str) or not keys.normalise(text):
        raise BadRequest("field 'text': give the query text as a non-empty string")
    try:
        keys.require_utf8(text, "field 'text'")  # MCP, the Python API: no guard before them
        scope_t = keys.scope_tuple(scope)
        require_one_of("format", fmt, render.FORMATS)
    except ConfigError as exc:
        raise BadRequest(str(exc)) from None
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k <= 0):
        raise BadRequest(f"field 'k'={k!r}: give a positive integer")
    return text, scope_t, k, fmt


def request_fields(fields) -> dict:
    """A request's query fields (``keys.RESULT_FIELDS``: a chat query's ``context``, ``now``,
    ``viewer``, BME's scene columns …) in the contract's dtypes, nulls dropped: the columns
    ``recall precompute`` keyed the query with (``keys.query_key``), and a miss is computed with.
    A BadRequest names an unknown field or a value the contract cannot read."""
    from pipeline.contract.schema import conform, parse_timestamp

    if fields is None:
        return {}
    if not isinstance(fields, dict):
        raise BadRequest(
            "field 'fields': give an object of query fields, e.g. {\"context\": [...]}"
        )
    unknown = sorted(set(fields) - set(keys.RESULT_FIELDS))
    if unknown:
        raise BadRequest(
            f"fields {unknown}: not query fields; choose from {list(keys.RESULT_FIELDS)}"
        )
    row = {k: v for k, v in fields.items() if v is not None}
    if not row:
        return {}
    row = {name: _typed_field(name, value) for name, value in row.items()}
    try:
        if isinstance(row.get("now"), str):
            row["now"] = parse_timestamp(row["now"], "request", None, "now")
        frame = conform(pl.DataFrame([{"query_id": "-", "text": "-", **row}]), "queries", "request")
    except (UserError, TypeError, ValueError, pl.exceptions.PolarsError) as exc:
        raise BadRequest(f"field 'fields': {' '.join(str(exc).split())[:300]}") from None
    got = frame.drop("query_id", "text").to_dicts()[0]
    return {k: v for k, v in got.items() if v is not None}


def _field_kind(name: str) -> tuple[str, tuple, tuple | None]:
    """(what to give, the JSON types of a query field's value, of its items or None): from the
    contract's dtype of ``name`` (``team``/``agent_id``, not in it, are strings)."""
    from pipeline.contract.schema import TABLES

    dtype = TABLES["queries"]["optional"].get(name, pl.String)
    if isinstance(dtype, pl.List):
        floats = dtype.inner.is_float()
        return (f"a list of numbers within ±{FLOAT32_MAX:.4g}", (list,), (int, float)) if floats else (
            "a list of strings", (list,), (str,))  # fmt: skip
    if dtype.is_temporal():
        return "an ISO 8601 date-time string, e.g. 2026-01-02T03:04:05Z", (str,), None
    return ("an integer", (int,), None) if dtype.is_integer() else ("a string", (str,), None)


def _typed_field(name: str, value):
    """A query field's JSON value checked against its contract type (a list of numbers as
    floats); a BadRequest otherwise: a number for ``now`` (it would be read as microseconds since
    1970), true, an object, a list item of another type or a number past float64 are refused,
    never coerced."""
    what, kinds, items = _field_kind(name)
    ok = isinstance(value, kinds) and not isinstance(value, bool)
    if ok and items is not None:
        ok = all(isinstance(v, items) and not isinstance(v, bool) for v in value)
    if ok and items == (int, float):  # the contract's Float32: past its range would be inf
        ok = all(abs(v) <= FLOAT32_MAX for v in value)  # NaN compares False
        value = [float(v) for v in value] if ok else value
    if not ok:
        shown = json.dumps(value, ensure_ascii=False, default=str)
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        raise BadRequest(f"fields.{name}={shown}: give {what}")
    return value


class Service:
    """Recall lookups for one dataset and recipe (``cfg``: the overrides of ``recall run`` plus
    ``cache_dir``, and the ``serve`` settings)."""

    def __init__(self, cfg: DictConfig) -> None:
        self.cfg, self.given = cfg, cfg
        self.follows_clock = cfg.get("default_now") == clock.START  # pipeline.run.clock
        opts = cfg.get("serve") or {}
        self.memory_entries = int(opts.get("memory_entries", 10000))
        self.roots = _roots(cfg)
        self.failure: tuple[str, str] | None = None  # (digest, message) while the store fails
        self.watch = DataWatch(lambda: input_files(cfg), float(opts.get("check_interval", 0.5)))
        self._lock = threading.Lock()
        self.state = self._load(self.watch.seen)
        self.namespace = keys.namespace(self.state.ds.name, **recipe.namespace_parts(cfg))
        self.cache = RecallCache(
            cfg.cache_dir, self.namespace, float(opts.get("cache_check", 0.05))
        )
        self.clock_generation = self.cache.generation
        self.cfg = clock.resolve(cfg, clock.served_time(cfg.cache_dir, self.namespace))
        self.recipe = recipe.recipe_hash(self.cfg)
        window = float(opts.get("batch_window_ms", 5)) / 1000
        self.batcher = MicroBatcher(self._compute, window, int(opts.get("max_batch", 64)))
        self.counts = {"hit": 0, "miss": 0, "reloads": 0}

    def _load(self, digest: str) -> Loaded:
        try:
            ds = call_target(self.cfg.data)
        except OSError as exc:  # unreadable (permissions, I/O): the store's fault, one line
            where = exc.filename or self.cfg.data.get("path") or self.cfg.data.name
            raise DataError(str(where), exc.strerror or str(exc), "make it readable") from None
        nodes, _queries = drop_empty(ds)
        return Loaded(ds, nodes, digest)

    def public(self, message: str) -> str:
        """``message`` with the store's paths relative to it and no other absolute path."""
        return without_paths(str(message), self.roots)

    def current(self, wait: bool = True) -> Loaded | None:
        """The loaded dataset, reloaded first when its files changed (``serve.check_interval``);
        a 503 BadRequest while the store cannot be read. ``wait=False`` (the event loop): None
        instead of looking at the files or waiting for a reload."""
        if not wait and (self.failure is not None or self.watch.due()):
            return None
        if not self._lock.acquire(blocking=wait):
            return None
        try:
            return self._fresh()
        finally:
            self._lock.release()

    def _fresh(self) -> Loaded:
        """:meth:`current` under the lock."""
        if self.failure is not None:
            self.watch.recheck()  # failing: every request looks again
        digest = None
        try:
            digest = self.watch.changed()
            if digest is not None and self.failure is not None and digest == self.failure[0]:
                raise BadRequest(self.failure[1], 503)  # unchanged since it failed
            if digest is not None:
                self.state = self._load(digest)
                self.watch.mark(digest)
                self.counts["reloads"] += 1
        except BadRequest:
            raise
        except UserError as exc:
            msg = f"the store cannot be read ({self.public(exc)}); it is answered once it reads"
            self.failure = (digest or "", msg)
            raise BadRequest(msg, 503) from None
        self.failure = None
        self._follow_clock()
        return self.state

    def _follow_clock(self) -> None:
        """With ``default_now: start``, take the reference time of a newly published generation
        (``pipeline.run.clock``): misses are computed at the time its entries were."""
        if not self.follows_clock:
            return
        gen = self.cache.generation
        if gen == self.clock_generation:
            return
        self.clock_generation = gen
        at = clock.served_time(self.cfg.cache_dir, self.namespace, gen)
        if at and at != self.cfg.default_now:
            self.cfg = clock.resolve(self.given, at)
            self.recipe = recipe.recipe_hash(self.cfg)
            self.state.computed.clear()  # computed at the previous reference time

    def version(self, state: Loaded, scope: tuple | None, viewer: str | None = None) -> str:
        """The scope's version in ``state`` (as ``recall precompute`` keys it); a 404 BadRequest
        when no node the request's ``viewer`` may see (None: a request without one sees the
        notes without a ``visibility`` list) lies in the scope. Both are kept per load (bounded
        by :data:`SCOPE_VERSIONS`): the version by scope id, the check by (scope id, viewer)."""
        sid = keys.scope_id(scope)
        if scope is not None and (sid, viewer) not in state.seen:
            nodes = state.public
            if viewer is not None and "visibility" in state.nodes.columns:
                mask = visible(state.nodes["visibility"].to_list(), viewer)
                nodes = state.nodes.filter(pl.Series(mask))
            if not len(scope_rows(nodes, [scope])[scope]):
                raise BadRequest(f"scope {list(scope)}: no node's doc_id is in it", 404)
            _bounded(state.seen, (sid, viewer), True)
        got = state.versions.get(sid)
        if got is None:
            q = _queries([("-", scope)])
            log = precompute.keys_log(self.cfg, state.ds)
            got = recipe.query_keys(self.cfg, state.nodes, q, state.ds.edges, log)
            got = _bounded(state.versions, sid, got["scope_version"][0])
        return got

    def known(self, state: Loaded, scope: tuple | None, viewer: str | None) -> bool:
        """True when :meth:`version` of ``scope`` for ``viewer`` is a dict read in ``state``."""
        sid = keys.scope_id(scope)
        return sid in state.versions and (scope is None or (sid, viewer) in state.seen)

    def lookup(
        self, state: Loaded, text: str, scope: tuple | None, row: dict | None = None
    ) -> dict | None:
        """The entry of ``text`` (with the query fields ``row``) in ``scope`` that is fresh in
        ``state``: the disk cache's when its scope version and recipe match, else one computed in
        memory; None (a miss)."""
        version = self.version(state, scope, (row or {}).get("viewer"))
        sid, tk = keys.scope_id(scope), keys.query_key(text, row)
        entry = self.cache.get_key(sid, tk)
        if entry is None or entry["scope_version"] != version or entry["recipe"] != self.recipe:
            entry = state.computed.get((sid, tk))
        return entry

    def recall(self, text: str, scope=None, k: int | None = None, format: str = "rows", *,
               compute: bool = True, fields: dict | None = None) -> dict | None:  # fmt: skip
        """The response body {rows, injection, cache, scope_version} of one lookup; with
        ``compute=False`` (the event loop), None instead of computing a miss, a scope's version
        (a 100,000-entry scope took 0.7 s) or reading a file (the store's stat, the cache's
        pointer): the caller asks again in a worker thread.
        ``fields``: the query's other columns (:func:`request_fields`), part of its key and of a
        miss's query."""
        text, scope_t, k, fmt = check_request(text, scope, k, format)
        row = request_fields(fields)
        if not compute and self.cache.due():  # the pointer is read in a worker thread
            return None
        state = self.current(wait=compute)  # (it reads the cache's generation: not due now)
        if state is None:
            return None
        if not compute and not self.known(state, scope_t, row.get("viewer")):
            return None  # a scope not seen in this load: its version is hashed in a worker thread
        entry, cache = self.lookup(state, text, scope_t, row), "hit"
        if entry is None:
            if not compute:
                return None
            item = (state, text, scope_t, keys.query_key(text, row), row)
            entry, cache = self.batcher.submit(item).result(), "miss"
        self.counts[cache] += 1
        inj = render.injection(self.cfg, state.ds, state.nodes, entry, fmt)
        return render.body(entry, k, inj, cache)

    def render(self, text: str, rows: list[dict], format: str) -> str | None:
        """The ``format`` block of ``rows`` (e.g. the first k rows of a :meth:`recall` answer,
        whose injection is the whole entry's) for the query ``text``; None for ``rows``."""
        _text, _scope, _k, fmt = check_request(text, None, None, format)
        state = self.current()
        return render.rendered(self.cfg, state.ds, state.nodes, rows, text, fmt)

    def prefetch(self, text: str, scope=None) -> Future | None:
        """Start computing ``text``'s entry in the background (Hermes' ``queue_prefetch``): a
        future of the entry, kept in memory so the next :meth:`recall` of it is a hit; None when
        it is a hit already."""
        text, scope_t, _k, _fmt = check_request(text, scope, None, "rows")
        state = self.current()
        if self.lookup(state, text, scope_t) is not None:
            return None
        return self.batcher.submit((state, text, scope_t, keys.text_key(text), {}))

    def _compute(self, items: list) -> list[dict]:
        """Entries of (state, text, scope, text key, fields) items, one query-path batch per
        loaded state (an item the query path refuses: its UserError)."""
        out: list = [None] * len(items)
        by_state: dict = {}
        for i, (state, *_rest) in enumerate(items):
            by_state.setdefault(id(state), (state, []))[1].append(i)
        for state, idx in by_state.values():
            uniq = {(items[i][2], items[i][3]): items[i][1:] for i in idx}
            got = self._apart(state, list(uniq.values()))
            for i in idx:
                out[i] = got[(items[i][2], items[i][3])]
        return out

    def _apart(self, state: Loaded, items: list) -> dict:
        """:meth:`_entries` of ``items`` computed together; when that fails with a UserError (one
        request's field the query path refuses), each item alone, so the error (the item's
        result, an exception) reaches only the request that sent it, never its batch mates."""
        try:
            return self._entries(state, items)
        except UserError as exc:
            if len(items) == 1:
                return {(items[0][1], items[0][2]): exc}
        out: dict = {}
        for item in items:
            try:
                out |= self._entries(state, [item])
            except UserError as exc:
                out[(item[1], item[2])] = exc
        return out

    def _entries(self, state: Loaded, items: list) -> dict:
        """{(scope, text key): entry} of (text, scope, text key, fields) computed together by the
        batch's query path."""
        pairs = [(t, s) for t, s, _tk, _f in items]
        q = _queries(pairs, [f for _t, _s, _tk, f in items])
        rows, _sec = precompute.recall_rows(self.cfg, state.ds, state.nodes, q, state.memo)
        inj = render.blocks(self.cfg, state.ds, state.nodes, rows, q, self.cfg.inject.format)
        cols = [c for c in rows.columns if c != "query_id"]
        by_q = {qid: g for (qid,), g in rows.group_by("query_id", maintain_order=True)}
        out = {}
        for qid, (text, scope, tk, f) in zip(q["query_id"].to_list(), items, strict=True):
            sid, viewer = keys.scope_id(scope), (f or {}).get("viewer")
            g = by_q.get(qid)
            entry = {
                "query_id": None, "query_text": text, "text_key": tk, "scope": sid,
                "rows": g.sort("rank").select(cols).to_dicts() if g is not None else [],
                "injection": inj.get(qid), "scope_version": self.version(state, scope, viewer),
                "recipe": self.recipe, "namespace": self.namespace, "generation": None,
            }  # fmt: skip
            state.computed[(sid, tk)] = out[(scope, tk)] = entry
        while len(state.computed) > self.memory_entries:
            state.computed.popitem(last=False)
        if sum(len(v) for v in state.memo.values()) > 64:  # one node subset per scope mix
            state.memo.clear()
        return out

    def health(self) -> dict:
        """Status: namespace, live generation, cached entries, dataset, counts."""
        state = self.current()
        return {
            "status": "ok",
            "namespace": self.namespace,
            "generation": self.cache.generation,
            "entries": len(self.cache),
            "dataset": state.ds.name,
            "nodes": state.nodes.height,
            "recipe": self.recipe,
            "inject_format": self.cfg.inject.format,
            "batches": self.batcher.batches,
            **self.counts,
        }

    def close(self) -> None:
        """Stop the miss batcher."""
        self.batcher.close()


def _bounded(memo: OrderedDict, key, value):
    """``memo[key] = value``, the oldest keys dropped past :data:`SCOPE_VERSIONS`; ``value``."""
    memo[key] = value
    while len(memo) > SCOPE_VERSIONS:
        try:
            memo.popitem(last=False)
        except KeyError:  # emptied by another thread
            break
    return value


def _roots(cfg: DictConfig) -> list[Path]:
    """The store's folders and files, absolute (``data.path`` as given and every path the data
    config names, resolved): what an error names relative to the store."""
    given = [Path(os.path.abspath(str(cfg.data.path)))] if cfg.data.get("path") else []
    return [*given, *(p for p in data_paths(cfg) if p not in given)]


def _queries(pairs: list, fields: list[dict] | None = None) -> pl.DataFrame:
    """A queries table of (text, scope tuple) pairs; ``doc_scope`` only when a scope is set; the
    query fields of each (:func:`request_fields`) as columns when any is set."""
    data = {"query_id": [f"serve-{i}" for i in range(len(pairs))], "text": [t for t, _s in pairs]}
    schema = {"query_id": pl.String, "text": pl.String}
    if any(s is not None for _t, s in pairs):
        data["doc_scope"] = [list(s) if s is not None else None for _t, s in pairs]
        schema["doc_scope"] = pl.List(pl.String)
    frame = pl.DataFrame(data, schema=schema)
    if not any(fields or []):
        return frame
    from pipeline.contract.schema import conform

    extra = pl.DataFrame([f or {} for f in fields], infer_schema_length=None)
    return conform(pl.concat([frame, extra], how="horizontal"), "queries", "request")
