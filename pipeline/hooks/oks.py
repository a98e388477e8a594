"""An OKS search backend answering from the recall cache: ``search_backend: recall`` in an
instance's ``settings/recall.yaml`` makes ``oks recall`` and OKS's auto-recall hook use it.

OKS (open-agent-power/open-knowledge-studio, ``cli/knowledge_studio/search/__init__.py``) loads a
backend it does not ship from ``entry_points(group="oks_search_backend")`` as
``ep.load()(root=root, **kwargs)`` and calls ``search(query, *, limit, scope, **kwargs)`` for a
ranked ``list[SearchHit]`` (``slug``, ``title``, ``score``; higher = more relevant) and
``index(pages)``. ``recall.py::_recall_knowledge_via_backend`` then keeps each hit whose ``slug``
is a current wiki page and prints ``score`` as its ``relevance`` (the hook's floor is 0.7).

The backend's settings are the ``recall_pipeline:`` mapping of the same ``settings/recall.yaml``
(OKS ignores keys it does not know): ``endpoint`` (a running ``recall serve``: hits from its
cache, misses computed) and/or ``cache_dir`` + ``namespace`` (read in process, misses give no
hits), ``scope``, ``k``, ``timeout``. A row becomes a hit of its page: the slug is the file stem of its
``doc_id`` (else of its ``node_id`` before ``#``), the first row of a page wins (pages dedupe as
OKS's fts5 does), and OKS's ``scope`` (comma-separated areas) keeps the pages of those areas.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pipeline.contract.errors import ConfigError, UserError
from pipeline.hooks.source import Source

SECTION = "recall_pipeline"
BACKEND = "recall"


@dataclass
class Hit:
    """OKS's ``SearchHit`` fields, for callers outside an OKS process (inside one, the backend
    returns OKS's own class)."""

    slug: str
    title: str
    score: float
    backend: str = "native"
    extra: dict[str, Any] = field(default_factory=dict)


def hit_class():
    """OKS's ``knowledge_studio.search.SearchHit`` when OKS is importable, else ``Hit``."""
    try:
        from knowledge_studio.search import SearchHit
    except ImportError:
        return Hit
    return SearchHit


def slug_of(row: dict) -> str:
    """OKS's slug of a row's page: the file stem of ``doc_id``, else of ``node_id`` before ``#``."""
    ref = row.get("doc_id") or str(row["node_id"]).split("#", 1)[0]
    return PurePosixPath(str(ref)).stem


def read_settings(root: str | Path) -> dict:
    """The ``recall_pipeline:`` mapping of ``<root>/settings/recall.yaml``."""
    import yaml

    path = Path(root) / "settings" / "recall.yaml"
    if not path.is_file():
        raise ConfigError(f"{path}: not found; write search_backend: recall and a {SECTION}: map")
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    settings = data.get(SECTION)
    if not isinstance(settings, dict):
        raise ConfigError(
            f"{path}: no {SECTION}: mapping; add {SECTION}: {{endpoint: http://127.0.0.1:8765}} "
            "or {cache_dir: DIR}"
        )
    return settings


def hits_from_rows(rows: list[dict], limit: int, areas: dict[str, str] | None, scope: str | None):
    """Per page, its first row as a hit (rank order), areas in ``scope`` only, at most ``limit``."""
    keep = {a.strip().lower() for a in scope.split(",") if a.strip()} if scope else None
    make, seen, hits = hit_class(), set(), []
    for row in sorted(rows, key=lambda r: r["rank"]):
        slug = slug_of(row)
        if slug in seen or (keep is not None and (areas or {}).get(slug, "") not in keep):
            continue
        seen.add(slug)
        extra = {"best_node": row["node_id"], "doc_id": row.get("doc_id"), "rank": row["rank"]}
        hits.append(
            make(slug=slug, title="", score=float(row["score"]), backend=BACKEND, extra=extra)
        )
        if len(hits) >= limit:
            break
    return hits


class RecallSearchBackend:
    """OKS's ``SearchBackend`` protocol over a ``Source``; ``root`` is the OKS instance root."""

    def __init__(self, root: str | None = None, source: Source | None = None, **kwargs: Any):
        if source is None and root is None:
            raise ConfigError("the recall OKS backend needs the instance root (OKS passes it)")
        self.root, self._source, self._areas = root, source, None

    @property
    def source(self) -> Source:
        """The settings' Source, opened on first use: OKS's ``get_backend`` turns an error raised
        while constructing a backend into "unknown search backend", so settings errors wait for
        ``search``, where ``oks recall`` shows them."""
        if self._source is None:
            where = f"{self.root}/settings/recall.yaml"
            self._source = Source.from_settings(read_settings(self.root), where=where, format="oks")
        return self._source

    def index(self, pages: list[dict[str, Any]]) -> None:
        """Remember each page's area (for ``scope``); the recall cache is built by precompute."""
        self._areas = {str(p.get("slug")): str(p.get("area", "")).lower().strip() for p in pages}

    def _area_map(self) -> dict[str, str]:
        if self._areas is None:  # as OKS's fts5 backend: the areas of the current wiki pages
            from knowledge_studio.recall import list_wiki_pages

            self.index(list_wiki_pages())
        return self._areas

    def search(
        self, query: str, *, limit: int = 10, scope: str | None = None, **kwargs: Any
    ) -> list:
        """Ranked hits of ``query`` from the cache (or ``recall serve``); [] for a miss. A bad
        setting or an unreachable service raises ``ValueError`` with one line: what ``oks recall``
        prints (in red, exit 2) instead of a traceback; OKS's hook treats it as a failed recall."""
        try:
            entry = self.source.recall(query)
        except UserError as exc:
            raise ValueError(f"recall backend: {str(exc).splitlines()[0]}") from None
        if not entry or not entry.get("rows"):
            return []
        return hits_from_rows(entry["rows"], limit, self._area_map() if scope else None, scope)
