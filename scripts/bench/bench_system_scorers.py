"""The systems' exact scorers against the generic ones they replace, in one process.

    .venv/bin/python scripts/bench/bench_system_scorers.py [--pages 1500] [--queries 500] [--repeat 2]

- OKS: ``preset=oks`` on a synthetic instance (``scripts/parity/oks_store.py``) whose settings select
  ``native`` (OKS's 6+1-factor scorer, stage ``oks_backend``) and ``fusion``, against the same
  instance under ``fts5`` (the lexical channel alone).
- ReMe: ``preset=reme`` keyword-only (``channels=[lexical]``) on BEIR SciFact (5,183 abstracts, 300
  queries) with ``lexical.order=reme`` (ReMe's float32 arithmetic and top-k order, one pass per
  query) against ``lexical.order=score`` (the blocked BM25 top-k every other preset uses).

Each variant is a ``runner.run`` with its own out_dir and cache_dir (nothing reused across
variants; the embedding step uses the hashing embedder, so only the scorer differs). Prints one row
per variant: the stage seconds that differ (``channels``, ``oks_backend``), the whole run, and the
ratio to its baseline; the best of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hydra import compose, initialize_config_dir

from pipeline.run import runner

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"


def timed(overrides: list[str], work: Path, tag: str, repeat: int) -> dict:
    """Best-of-``repeat`` stage and wall seconds of one ``recall run`` recipe."""
    best: dict = {}
    for i in range(repeat):
        out = work / f"{tag}-{i}"
        with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
            cfg = compose(
                "config",
                [*overrides, "embed=hashing", "report=false", f"cache_dir={out}/cache"],
            )
        t0 = time.perf_counter()
        res = runner.run(cfg, out / "run")
        wall = time.perf_counter() - t0
        t = res["manifest"]["timings_s"]
        got = {"channels": t.get("channels", 0.0), "oks_backend": t.get("oks_backend", 0.0)}
        got["wall"] = wall
        if not best or wall < best["wall"]:
            best = got
    return best


def oks_rows(work: Path, pages: int, queries: int, repeat: int) -> list[tuple]:
    """(name, timings, baseline name) for fts5 / native / fusion on one generated instance each."""
    rows = []
    for backend in ("fts5", "native", "fusion"):
        store = work / f"oks-{backend}"
        subprocess.run(
            [sys.executable, str(REPO / "scripts/parity/oks_store.py"), str(store),
             "--pages", str(pages), "--queries", str(queries), "--seed", "7",
             "--search-backend", backend],
            check=True, capture_output=True,
        )  # fmt: skip
        ov = ["data=oks", f"data.path={store}", f"data.queries={store}/queries.jsonl", "preset=oks"]
        rows.append((f"oks {backend}", timed(ov, work, f"oks-{backend}", repeat), "oks fts5"))
    return rows


def reme_rows(work: Path, repeat: int) -> list[tuple]:
    """(name, timings, baseline name) for ReMe's BM25 order against the generic top-k on SciFact."""
    rows = []
    for order in ("score", "reme"):
        ov = ["data=scifact", "preset=reme", "channels=[lexical]", f"lexical.order={order}"]
        rows.append(
            (f"reme lexical.order={order}", timed(ov, work, f"reme-{order}", repeat), "reme lexical.order=score")
        )  # fmt: skip
    return rows


def main() -> int:
    """Run every variant and print the table."""
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--pages", type=int, default=1500)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--work", default=None, help="scratch folder (default: a temporary one)")
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="bench-scorers-"))
    rows = oks_rows(work, a.pages, a.queries, a.repeat)
    if (DATA / "beir_scifact").exists():
        rows += reme_rows(work, a.repeat)
    by = {name: t for name, t, _ in rows}
    print(
        f"{'variant':28} {'channels s':>10} {'oks_backend s':>13} {'run s':>7} {'run ÷ baseline':>15}"
    )
    for name, t, base in rows:
        ratio = t["wall"] / by[base]["wall"]
        print(
            f"{name:28} {t['channels']:10.2f} {t['oks_backend']:13.2f} {t['wall']:7.2f} {ratio:15.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
