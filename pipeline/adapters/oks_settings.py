"""An OKS instance's own recall settings and page identity (open-knowledge-studio @ 6a281b47).

- :func:`recall_params`: ``settings/recall.yaml`` read as ``recall.py::load_recall_params`` reads
  it (code defaults, then the file; the ``OKS_*`` environment variables are deprecated there: OKS
  only warns about them, so they change nothing here either). A value of the wrong type is a
  DataError naming the key (OKS's ``except Exception: pass`` would silently drop the whole file).
- :func:`one_per_slug`: OKS's ``pages`` table is keyed by slug (the file stem): of two pages with
  one stem, ``FTS5Backend.index`` keeps the one indexed last, in ``list_wiki_pages()`` order
  (memory-curve score descending, then slug), i.e. the lower ``store.py::compute_score``.
"""

from __future__ import annotations

import datetime as dt
import math
from collections import Counter
from pathlib import Path

from pipeline.adapters.common import inside, read_text
from pipeline.contract.errors import DataError
from pipeline.ops.oks_native import DECAY_LAMBDA, OTHER_LAMBDA, memory_scores

# load_recall_params()'s code defaults (the keys this project uses)
DEFAULTS = {
    "search_backend": "native",
    "recall_floor": 0.7,
    "recall_topn": 3,
    "recall_minlen": 6,
    "recall_cooldown": 10,
    "inject_per_page_chars": 200,
    "inject_budget_chars": 4000,
    "inject_title_only_floor": 0.5,
}
# (section, key in the file) → (param, type)
KEYS = {
    (None, "search_backend"): ("search_backend", str),
    ("recall", "floor"): ("recall_floor", float),
    ("recall", "topn"): ("recall_topn", int),
    ("recall", "minlen"): ("recall_minlen", int),
    ("recall", "cooldown"): ("recall_cooldown", int),
    ("inject", "per_page_chars"): ("inject_per_page_chars", int),
    ("inject", "budget_chars"): ("inject_budget_chars", int),
    ("inject", "title_only_floor"): ("inject_title_only_floor", float),
}
REPRODUCED = ("fts5", "native", "legacy", "fusion")  # stages.oks_backend; legacy = native


def _coerce(value, kind: type, where: str, key: str):
    if isinstance(value, bool) or value is None:
        ok = False
    else:
        try:
            value = kind(value)
            ok = not (kind is float and not math.isfinite(value))
        except (TypeError, ValueError):
            ok = False
    if not ok:
        raise DataError(
            where, f"{key} is {value!r}, not a {kind.__name__}", "fix the value", field=key
        )
    return value


def recall_params(root: Path) -> tuple[dict, str]:
    """(params, where they came from): ``settings/recall.yaml`` over OKS's code defaults."""
    import yaml

    params = dict(DEFAULTS)
    path = inside(root, root / "settings" / "recall.yaml")  # a link could read /etc into errors
    if not path.is_file():
        return params, "OKS code defaults (no settings/recall.yaml)"
    try:
        data = yaml.safe_load(read_text(path)) or {}
    except yaml.YAMLError as exc:
        raise DataError(str(path), f"invalid YAML ({str(exc)[:120]})", "fix the file") from None
    if not isinstance(data, dict):
        raise DataError(str(path), "is not a mapping", "write `search_backend: fts5` etc.")
    for (section, key), (param, kind) in KEYS.items():
        block = data if section is None else (data.get(section) or {})
        name = key if section is None else f"{section}.{key}"
        if not isinstance(block, dict):
            raise DataError(str(path), f"{section} is not a mapping", "fix the file", field=section)
        if key in block:
            params[param] = _coerce(block[key], kind, str(path), name)
    params["search_backend"] = params["search_backend"].lower()
    return params, str(path)


def memory_score(row: dict, now: dt.datetime) -> float:
    """``store.py::compute_score`` of a page row (importance 0–1 as written, default 0.5; no type:
    a concept), by ``ops.oks_native.memory_scores``."""
    imp = row.get("importance")
    status = row.get("status") or "active"
    created = row.get("created_at") or now
    return float(
        memory_scores(
            [0.5 if imp is None else float(imp)],
            [DECAY_LAMBDA.get(row.get("type") or "concept", OTHER_LAMBDA)],
            [max(0, (now - created).days)],
            [row.get("access_count") or 0],
            [bool(row.get("pinned"))],
            [status == "active"],
            [bool(row.get("archived")) or status == "dropped"],
        )[0]
    )


def one_per_slug(rows: list[dict], now: dt.datetime, skipped: Counter) -> list[dict]:
    """The rows of one page per slug: of pages sharing a stem, the one OKS's index keeps (the
    last in (−memory score, slug) order; equal scores: the last path); the others are counted."""
    pages: dict[str, dict[str, dict]] = {}
    for r in rows:
        pages.setdefault(r["slug"], {}).setdefault(r["doc_id"], r)
    keep = set()
    for docs in pages.values():
        order = sorted(docs.values(), key=lambda r: (-memory_score(r, now), r["doc_id"]))
        keep.add(order[-1]["doc_id"])
        skipped["duplicate_slug"] += len(order) - 1
    return [r for r in rows if r["doc_id"] in keep]


def backend_note(settings: dict, lexical_tokenizer: str) -> str | None:
    """The manifest ``fallbacks`` line when an OKS recipe (the fts5 tokenizer) runs on an instance
    whose ``search_backend`` is none of the backends reproduced (``fts5``, ``native`` or its other
    name ``legacy``, ``fusion``: ``stages.oks_backend``), e.g. a connector's: its answer is fts5's;
    None otherwise."""
    backend = settings.get("search_backend")
    if backend is None or backend in REPRODUCED or lexical_tokenizer != "fts5":
        return None
    return (
        f"data=oks: the instance's search_backend is {backend!r} (settings/recall.yaml), which "
        "preset oks does not reproduce (fts5, native and fusion are), so its ranking is fts5's"
    )
