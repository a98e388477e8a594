"""The reference time of a query that has no ``now`` of its own (``default_now``).

A query's reference time (the memory curve's "today", ``ops.scope.run_groups``) is, first to last:
the config's ``now`` (it overrides every query's), the query's own ``now``, then ``default_now``:

- ``null`` — the newest timestamp among the nodes the query may see (a run reads its inputs only);
- ``start`` — the run's start by the wall clock, as OKS reads its memory curve (``preset=oks``);
- an ISO time — that time.

``start`` is resolved once, when ``recall run`` or ``recall precompute`` starts (:func:`resolve`),
into the ISO time (UTC, whole seconds) that the run's ``manifest.json`` (``config.default_now``) and
a precompute generation's ``_manifest.json`` (``default_now``) record; ``default_now=<that time>``
reproduces the run (``now=<that time>`` too, for queries without their own ``now``). ``recall serve``
and ``recall lookup`` take the time of the live generation they serve (:func:`served_time`), so a
miss computed by the service has the precompute's reference time, never a new clock reading.
The resolved time is part of the entries' recipe (a new one recomputes them) but not of the
cache's namespace, so every precompute of one recipe lands in the same namespace.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path

from omegaconf import DictConfig, open_dict

from pipeline.recallcache import layout

START = "start"
MANIFEST = "_manifest.json"


def wall_clock() -> str:
    """The current time, UTC, whole seconds, ISO."""
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


def resolve(cfg: DictConfig, at: str | None = None) -> DictConfig:
    """``cfg`` with ``default_now: start`` replaced by ``at`` (default: :func:`wall_clock`); any
    other value, and a config without the key, is returned as it is."""
    if cfg.get("default_now") != START:
        return cfg
    out = copy.deepcopy(cfg)  # flags and resolver caches too (``${now:…}`` in out_dir)
    with open_dict(out):
        out.default_now = at or wall_clock()
    return out


def default_time(cfg) -> dt.datetime | None:
    """``default_now`` as a time (None: the newest-timestamp rule). An unresolved ``start`` (an
    API caller that did not :func:`resolve`) reads the clock now."""
    value = cfg.get("default_now")
    if not value:
        return None
    from pipeline.contract.schema import parse_timestamp

    return parse_timestamp(wall_clock() if value == START else value, "config", None, "default_now")


def served_time(cache_dir, namespace: str, generation: str | None = None) -> str | None:
    """The ``default_now`` recorded by ``generation`` (default: the live one) of ``namespace``;
    None when there is none."""
    ns_dir = layout.namespace_dir(cache_dir, namespace)
    gen = generation or layout.current(ns_dir)
    path = Path(ns_dir) / gen / MANIFEST if gen else None
    try:
        return json.loads(path.read_text()).get("default_now") if path else None
    except (OSError, ValueError):
        return None
