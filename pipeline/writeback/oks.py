"""OKS's write-back: a *use* raises ``.oks/access.json`` by one, exactly as ``oks wiki use <slug>``
does (open-agent-power/open-knowledge-studio @ 6a281b47, ``cli.py::wiki_use`` →
``store.py::record_access``); a recall is never a use ("a search does NOT count as a use",
``recall.py``; ``docs/algorithms/recall-engine.md``).

So ``recall feedback RUN --format oks`` writes nothing from the run's recall (or injected) rows.
Given ``--use-events FILE`` (the pages the agent actually used: one slug per line, ``#`` comments
and blank lines ignored, or JSON lines ``{"slug": ...}``), each line is one ``oks wiki use``:
every slug must be a page of the store (``oks wiki use`` refuses others), else nothing is
written. The file is OKS's own format (``json.dumps(counts, indent=2)``, keys in their order,
new slugs appended) and is replaced atomically (temp file + rename); pages are never touched.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import polars as pl

from pipeline.adapters.oks import access_counts
from pipeline.adapters.oks_pages import split_page
from pipeline.contract.errors import DataError, UserError
from pipeline.contract.io import atomic_write_bytes
from pipeline.writeback.common import store_root

ACCESS = ".oks/access.json"
NOT_USE = "wrote nothing: for OKS a recall is not a use; pass --use-events FILE of the slugs used"


def read_events(path: Path) -> list[str]:
    """The slugs of a use-events file, one per use, in order."""
    if not path.is_file():
        raise UserError(f"{path}: use-events file not found")
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("{"):
            try:
                s = json.loads(s).get("slug")
            except (json.JSONDecodeError, AttributeError):
                s = None
            if not isinstance(s, str) or not s.strip():
                raise DataError(
                    str(path), 'not a {"slug": ...} object', "write one slug", row=f"line {i}"
                )
        out.append(s.strip())
    return out


def pages(root: Path) -> set[str]:
    """Slugs ``oks wiki use`` accepts: stems of ``wiki/**/*.md`` files OKS reads as pages."""
    found = set()
    for f in (root / "wiki").rglob("*.md"):
        if split_page(f.read_text(encoding="utf-8"), str(f)) is not None:
            found.add(f.stem)
    return found


def apply(counts: dict[str, int], slugs: list[str]) -> dict[str, int]:
    """``record_access`` once per slug: +1 each (a pure function of its inputs)."""
    out = dict(counts)
    for s in slugs:
        out[s] = out.get(s, 0) + 1
    return out


def write_back(
    run_dir: Path,
    cfg: dict,
    rows: pl.DataFrame,
    now: dt.datetime,
    out: str | None,
    use_events: str | None = None,
) -> Path | None:
    """Raise the store's use counts by the use events; None (nothing written) without them."""
    if not use_events:
        return None
    root = store_root(run_dir, cfg, "oks", "an OKS instance", "pass --out <instance root>", out)
    if not (root / "wiki").is_dir():
        raise UserError(f"{root}: not an OKS instance (no wiki/); pass --out <instance root>")
    events = Path(use_events)
    slugs = read_events(events)
    unknown = sorted(set(slugs) - pages(root))
    if unknown:
        raise DataError(
            str(events),
            f"slugs {unknown} are not pages of {root / 'wiki'} (oks wiki use refuses them)",
            "list only slugs of existing pages",
        )
    if not slugs:
        return None
    dst = root / ACCESS
    data = json.dumps(apply(access_counts(root), slugs), indent=2)
    atomic_write_bytes(dst, data.encode("utf-8"))
    return dst
