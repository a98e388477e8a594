"""``RecallCache``: in-process lookups in the recall cache that ``recall precompute`` writes.

One generation at a time is held in memory as a dict {(scope id, text key): entry}; a lookup is a
dict access. The ``CURRENT`` pointer (``pipeline.recallcache.layout``) is re-read at most every
``check_interval`` seconds; when it names another generation, that generation is loaded whole and
swapped in as one reference, so a reader never mixes two builds.

An entry is a dict: ``query_text`` (as the batch had it), ``scope`` (scope id), ``text_key``,
``query_id`` (the first batch query with this key), ``rows`` (recall rows in rank order, every
column but ``query_id``: node_id, doc_id, rank, score, every score component, channel; [] when
the query recalled nothing), ``injection`` (the block of the recipe's ``inject.format``, or None),
``scope_version``, ``recipe``, ``namespace`` and ``generation``. Treat it as read-only.

A namespace keeps its name across code upgrades; its entries are those of the last precompute,
whose code version is in ``recipe`` (``recipe.recipe_hash``). ``Service`` and ``recall lookup``
treat an entry of another recipe, or of another scope version than the store's, as absent;
``RecallCache`` alone reads what is there.
"""

from __future__ import annotations

import threading
import time
import warnings
from pathlib import Path

import polars as pl

from pipeline.contract.errors import ConfigError
from pipeline.recallcache import keys, layout, partitions

ENTRY_FIELDS = ("query_id", "query_text", "text_key", "scope_version", "recipe", "injection")
RETRIES = 5


def partition_entries(path: Path, namespace: str) -> dict:
    """{(scope id, text key): entry} of one partition file (first query_id wins a shared key)."""
    sid = path.parent.name.split("=", 1)[1]
    frame = pl.read_parquet(path)
    row_cols = [c for c in frame.columns if c not in ENTRY_FIELDS]
    entries: dict = {}
    for r in frame.iter_rows(named=True):
        e = entries.get(r["query_id"])
        if e is None:
            e = entries[r["query_id"]] = {f: r[f] for f in ENTRY_FIELDS}
            e |= {"scope": sid, "rows": [], "namespace": namespace}
            e["generation"] = path.parent.parent.name
        if r["rank"] is not None:
            e["rows"].append({c: r[c] for c in row_cols})
    index: dict = {}
    for e in entries.values():
        index.setdefault((sid, e["text_key"]), e)
    return index


def load_generation(gen_dir: Path, namespace: str) -> dict:
    """{(scope id, text key): entry} of one generation folder. A partition that does not read
    (truncated, damaged, columns missing) or is not the file the manifest records (its bytes and
    sha256: rewritten with other columns or types, added by hand, not a regular file) is left out
    with a warning: its entries are misses, computed as a run would, until the next precompute
    rewrites it. A FileNotFoundError when the folder is gone (pruned by a newer build, or a
    ``CURRENT`` naming a generation that is not there)."""
    parts = partitions.listed_partitions(gen_dir)
    if parts is None and not gen_dir.is_dir():
        raise FileNotFoundError(gen_dir)
    bad = set(partitions.not_as_listed(gen_dir, parts)) if parts is not None else set()
    index: dict = {}
    for path in sorted(gen_dir.glob("scope=*/data.parquet")):
        why = "not the file its manifest records" if path.parent.name[6:] in bad else None
        try:
            index |= partition_entries(path, namespace) if why is None else {}
        except FileNotFoundError:  # pruned by a newer build: the caller reads CURRENT again
            raise
        except (OSError, KeyError, pl.exceptions.PolarsError) as exc:
            why = type(exc).__name__
        if why is not None:
            where = f"{gen_dir.name}/{path.parent.name}/{path.name}"
            warnings.warn(
                f"recall cache {where} does not read ({why}); its entries are computed as "
                "misses until recall precompute runs again",
                stacklevel=2,
            )
    return index


class RecallCache:
    """Read entries of one namespace of ``<cache_dir>/recall`` (None: the only namespace there)."""

    def __init__(
        self, cache_dir: str | Path, namespace: str | None = None, check_interval: float = 0.05
    ) -> None:
        self.cache_dir = Path(cache_dir)
        self._namespace = namespace
        self.check_interval = check_interval
        self._live: tuple[str | None, dict] = (None, {})
        self._checked = -float("inf")
        self._lock = threading.Lock()

    def namespaces(self) -> list[str]:
        """Every namespace with a published generation under ``cache_dir``."""
        return layout.namespaces(self.cache_dir)

    @property
    def namespace(self) -> str | None:
        """The namespace read: the one given, else the only one there (None while there is none)."""
        if self._namespace is not None:
            return self._namespace
        names = self.namespaces()
        if len(names) > 1:
            raise ConfigError(
                f"{layout.recall_root(self.cache_dir)} holds several namespaces {names}; "
                "pass namespace=<one of them>"
            )
        return names[0] if names else None

    @property
    def generation(self) -> str | None:
        """The generation held in memory (after the last pointer check)."""
        self._refresh()
        return self._live[0]

    def __len__(self) -> int:
        """Entries of the generation held (distinct (scope, text key) pairs)."""
        self._refresh()
        return len(self._live[1])

    def entries(self) -> list[dict]:
        """Every entry of the generation held, in partition order (read-only)."""
        self._refresh()
        return list(self._live[1].values())

    def get(self, text: str, scope=None, fields: dict | None = None) -> dict | None:
        """The entry of ``text`` in ``scope`` (None, a doc_scope string or a list of them), or
        None; ``fields``: the query's other columns (context, viewer, now, …) when it has any
        (``keys.query_key``)."""
        key = keys.query_key(text, fields) if fields else keys.text_key(text)
        return self.get_key(keys.scope_id(keys.scope_tuple(scope)), key)

    def get_key(self, scope_id: str, text_key: str) -> dict | None:
        """The entry under (scope id, text key) in the live generation, or None."""
        self._refresh()
        return self._live[1].get((scope_id, text_key))

    def due(self) -> bool:
        """True when the next lookup re-reads ``CURRENT`` (and may load a generation)."""
        return time.monotonic() - self._checked >= self.check_interval

    def _refresh(self) -> None:
        """Re-read ``CURRENT`` when ``check_interval`` has passed; while one thread loads a new
        generation the others keep answering from the one held (the first load is waited for)."""
        if not self.due():
            return
        if not self._lock.acquire(blocking=self._checked == -float("inf")):
            return
        try:
            self._load_current()
        finally:
            self._lock.release()

    def _load_current(self) -> None:
        """Swap in the generation ``CURRENT`` names, if it is not the one held."""
        ns = self.namespace
        ns_dir = layout.namespace_dir(self.cache_dir, ns) if ns else None
        for _ in range(RETRIES):  # the generation read may be pruned by a newer build
            gen = layout.current(ns_dir) if ns_dir else None
            if gen == self._live[0]:
                break
            if gen is None:  # CURRENT removed or garbled: no cache (every lookup a miss)
                self._live = (None, {})
                break
            try:
                self._live = (gen, load_generation(ns_dir / gen, ns))
                break
            except FileNotFoundError:
                continue
        else:  # CURRENT names a folder that is not there: no cache, as without CURRENT
            self._live = (None, {})
        self._checked = time.monotonic()
