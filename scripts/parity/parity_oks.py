"""Parity of preset=oks data=oks with OKS's own code: the ``oks`` subcommand of
``scripts/parity/parity.py``.

    python scripts/parity/parity.py oks STORE [STORE ...] [--limit 5] [--venv V] [--src S] [--out DIR] [--hook]

``oks``: for each OKS instance (``scripts/parity/oks_store.py`` writes them; each holds
``queries.jsonl``) runs OKS's real ``recall()`` at limit 5 with the search backend the instance's
``settings/recall.yaml`` selects (OKS's code default ``native`` without one), and
``recall run data=oks preset=oks`` (no other flag), then compares the page lists position by
position. fts5: ``../shared/oracles/oks_recall.py`` (``--goal none``); native and fusion:
``scripts/parity/oks_backend_oracle.py`` under OKS's venv (``oks recall Q --knowledge-only`` with the
backend from the settings; native with ``--goal active``, the default, whose goal boosts are part
of the score; fusion with ``--goal none``, because OKS's goal reorder after a backend is an
injection step here, as for fts5; OKS's clock set to the newest page ``created``, the run's
reference time). Ours is made page-level as OKS makes its own: the first ``4·limit`` node rows,
the best row per page (first occurrence), then ``limit`` pages (native and fusion give one row a
page). A position agrees *exactly* when the slugs match and *tie-aware* when they match or both
systems give that position the same score (relative 1e-5: OKS breaks exact bm25 ties by its FTS5
insertion order, which follows the memory curve on today's date). Also reported: top-1 agreement
(exact, tie-aware) and the mean top-``limit`` overlap (shared pages / OKS's pages). ``--hook``
also runs OKS's own auto-recall hook (``assets/hooks/user-prompt-recall.py``,
``OKS_SEARCH_BACKEND`` = the instance's backend: the hook reads that variable, not the settings,
and defaults to native) over every query in file order as one session, on a copy of the store,
and compares its knowledge section with ``inject.format=oks`` (the queries in one ``group``), text
for text. Prints the per-store and overall figures as JSON;
``--out`` keeps the outputs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
import oracle_dir  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
ORACLES = oracle_dir.oracles()
TOL = 1e-5


def pages(rows: pl.DataFrame, limit: int) -> dict[str, list[tuple[str, float]]]:
    """query_id → [(slug, score)]: OKS's page list from node rows (first 4·limit rows, best row
    per page in row order, ``limit`` pages)."""
    out: dict[str, list[tuple[str, float]]] = {}
    for (qid,), g in rows.sort("query_id", "rank").group_by("query_id", maintain_order=True):
        seen: dict[str, float] = {}
        for doc, score in g.head(4 * limit).select("doc_id", "score").iter_rows():
            seen.setdefault(Path(doc).stem, float(score))
        out[qid] = list(seen.items())[:limit]
    return out


def agreement(ours: list[tuple[str, float]], theirs: list[tuple[str, float]]) -> tuple:
    """(exact, tie-aware, positions, max relative score gap over shared slugs) for one query."""
    n = max(len(ours), len(theirs))
    exact = sum(i < len(ours) and i < len(theirs) and ours[i][0] == theirs[i][0] for i in range(n))
    tie = 0
    for i in range(min(len(ours), len(theirs))):
        a, b = ours[i][1], theirs[i][1]
        tie += ours[i][0] == theirs[i][0] or abs(a - b) <= TOL * max(abs(a), abs(b), 1e-12)
    t = dict(theirs)
    gap = max(
        (abs(s - t[k]) / max(abs(t[k]), 1e-12) for k, s in ours if k in t),
        default=0.0,
    )
    return exact, tie, n, gap


def head(ours: list[tuple[str, float]], theirs: list[tuple[str, float]]) -> tuple[int, int, float]:
    """(top-1 exact, top-1 tie-aware, top-``limit`` overlap) for one query; two empty lists agree."""
    if not ours or not theirs:
        same = int(not ours and not theirs)
        return same, same, float(same)
    ex, tie, _n, _g = agreement(ours[:1], theirs[:1])
    overlap = len({s for s, _ in ours} & {s for s, _ in theirs}) / len(theirs)
    return ex, tie, overlap


def _run(cmd: list[str], **kw) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode:
        sys.exit(f"{' '.join(cmd[:4])} ... failed:\n{done.stderr[-3000:]}")


def settings_backend(store: Path) -> str:
    """The search backend OKS's ``load_recall_params`` reads from the instance (code default
    ``native``; ``legacy`` is native)."""
    import yaml

    path = store / "settings" / "recall.yaml"
    data = yaml.safe_load(path.read_text("utf-8")) if path.is_file() else None
    backend = str((data or {}).get("search_backend", "native")).lower()
    return "native" if backend == "legacy" else backend


def _backend_oracle(store: Path, out: Path, limit: int, venv: str, src: str, backend: str) -> None:
    """``scripts/parity/oks_backend_oracle.py`` on a copy of ``store`` (OKS writes ``.oks/fts5.db``)."""
    import shutil

    work = Path(tempfile.mkdtemp(prefix="oks_backend_"))
    inst, home = work / "instance", work / "home"
    shutil.copytree(store, inst, ignore=shutil.ignore_patterns("fts5.db*"))
    (inst / ".oks").mkdir(exist_ok=True)
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("OKS_")}
    env.update(
        OKS_ROOT=str(inst), HOME=str(home), PYTHONPATH=str(Path(src) / "cli"), PYTHONHASHSEED="0"
    )
    goal = "active" if backend == "native" else "none"
    script = Path(__file__).resolve().parent / "oks_backend_oracle.py"
    cmd = [str(Path(venv) / "bin" / "python"), str(script), str(store / "queries.jsonl")]
    _run([*cmd, str(out), str(limit), goal], env=env, cwd=str(work))
    shutil.rmtree(work, ignore_errors=True)


def _oracle(store: Path, out: Path, limit: int, venv: str, src: str) -> dict:
    backend = settings_backend(store)
    if backend != "fts5":
        _backend_oracle(store, out, limit, venv, src, backend)
        return _read_oracle(out)
    cmd = [
        sys.executable,
        str(ORACLES / "oks_recall.py"),
        "--venv",
        venv,
        "--src",
        src,
        str(store),
        str(store / "queries.jsonl"),
        str(out),
        "--limit",
        str(limit),
    ]
    _run(cmd)
    return _read_oracle(out)


def cut_ties(out: Path) -> set[str]:
    """The queries whose fusion list rests on an exact fts5 tie at its cut (``fts5_cut_tie``)."""
    lines = out.read_text(encoding="utf-8").splitlines()
    return {r["query_id"] for r in map(json.loads, lines) if r.get("fts5_cut_tie")}


def _read_oracle(out: Path) -> dict:
    res = {}
    for line in out.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        res[r["query_id"]] = [(h["slug"], float(h["raw_score"])) for h in r["hits"]]
    return res


def _hook(store: Path, work: Path, venv: str, src: str) -> dict[str, str]:
    """query_id → the knowledge section OKS's hook prints for it ('' when none), one session."""
    import shutil

    inst, home = work / "instance", work / "home"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(store, inst, ignore=shutil.ignore_patterns("fts5.db*", "recall-state-*"))
    home.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("OKS_")}
    path = f"{Path(src) / 'cli'}:{Path(src) / 'assets' / 'hooks'}"
    backend = settings_backend(store)
    if backend != "fts5":  # native's memory curve: OKS's clock at the run's reference time
        clock = work / "clock"
        clock.mkdir()
        here = Path(__file__).resolve().parent
        (clock / "sitecustomize.py").write_text(
            f"import sys\nsys.path.insert(0, {str(here)!r})\n"
            "import oks_backend_oracle\noks_backend_oracle.freeze_clock()\n"
        )
        path = f"{clock}:{path}"
    env.update(
        OKS_ROOT=str(inst),
        HOME=str(home),
        OKS_SEARCH_BACKEND=backend,
        PYTHONPATH=path,
        PYTHONHASHSEED="0",
    )
    hook = str(Path(src) / "assets" / "hooks" / "user-prompt-recall.py")
    out = {}
    for line in (store / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        q = json.loads(line)
        payload = json.dumps({"prompt": q["text"], "session_id": "parity", "cwd": str(home)})
        done = subprocess.run(
            [str(Path(venv) / "bin" / "python"), hook],
            input=payload,
            capture_output=True,
            text=True,
            env=env,
            cwd=str(home),
        )
        lines = done.stdout.splitlines()
        keep = []
        if "## 相关记忆" in lines:
            i = lines.index("## 相关记忆")
            keep = lines[i : i + 2]
            for ln in lines[i + 2 :]:
                if not (ln.startswith("- [") or ln.startswith("    ")):
                    break
                keep.append(ln)
        out[q["query_id"]] = "\n".join(keep)
    return out


def _hook_ours(store: Path, run_dir: Path) -> dict[str, str]:
    """query_id → our inject.format=oks text, every query in one group in file order."""
    qfile = run_dir.parent / f"{run_dir.name}-queries.jsonl"
    rows = [json.loads(x) for x in (store / "queries.jsonl").read_text("utf-8").splitlines()]
    qfile.write_text(
        "".join(json.dumps({**r, "group": "parity"}, ensure_ascii=False) + "\n" for r in rows),
        encoding="utf-8",
    )
    _run_ours(store, run_dir, qfile, ["inject.format=oks"])
    inj = pl.read_parquet(run_dir / "injection.parquet")
    got = dict(inj.select("query_id", "text").iter_rows())
    return {r["query_id"]: got.get(r["query_id"], "") for r in rows}


def _run_ours(store: Path, run_dir: Path, queries: Path, extra: list[str]) -> None:
    cmd = [
        sys.executable,
        "-m",
        "pipeline",
        "run",
        "data=oks",
        f"data.path={store}",
        f"data.queries={queries}",
        "preset=oks",
        "report=false",
        f"out_dir={run_dir}",
        f"cache_dir={run_dir / 'cache'}",
        # OKS's clock is frozen at the newest page `created` (oks_backend_oracle.freeze_clock);
        # ours reads the memory curve at the same time (the preset's default: the run's start)
        "default_now=null",
        *extra,
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    _run(cmd, cwd=REPO, env=env)


def _ours(store: Path, run_dir: Path, limit: int) -> dict:
    _run_ours(store, run_dir, store / "queries.jsonl", [])
    return pages(pl.read_parquet(run_dir / "recall.parquet"), limit)


def _compare(theirs: dict, ours: dict, cut: set[str] = frozenset()) -> dict:
    """Position, top-1 and overlap figures of one store, and its differences. A query in ``cut``
    (fusion over an fts5 list cut inside an exact tie) counts as tie-aware agreement."""
    per, top, diffs, gap = [0, 0, 0], [0, 0, 0.0], [], 0.0
    for qid, b in theirs.items():
        a = ours.get(qid, [])
        ex, tie, n, g = agreement(a, b)
        if qid in cut:
            tie = n
        per = [per[0] + ex, per[1] + tie, per[2] + n]
        h = head(a, b)
        top = [x + y for x, y in zip(top, (h[0], 1 if qid in cut else h[1], h[2]))]
        gap = max(gap, g)
        if tie < n:
            diffs.append({"query_id": qid, "ours": a, "oks": b})
    return {
        "queries": len(theirs),
        "positions": per[2],
        "exact": round(per[0] / max(per[2], 1), 4),
        "tie_aware": round(per[1] / max(per[2], 1), 4),
        "only_as_ties": per[1] - per[0],
        "fts5_cut_tie_queries": len(cut & set(theirs)),
        "fts5_cut_tie_differing": sum(
            q in cut and [x for x, _ in ours.get(q, [])] != [x for x, _ in b]
            for q, b in theirs.items()
        ),
        "top1_exact": top[0],
        "top1_tie_aware": top[1],
        "topk_overlap": round(top[2] / max(len(theirs), 1), 4),
        "max_rel_score_gap": gap,
        "differences": diffs,
        "_sums": [*per, *top],
    }


def _hook_report(store: Path, tmp: Path, i: int, a: argparse.Namespace) -> dict:
    theirs_h = _hook(store, tmp / f"hook-{i}", a.venv, a.src)
    ours_h = _hook_ours(store, tmp / f"run-hook-{i}")
    same = [q for q in theirs_h if theirs_h[q] == ours_h.get(q)]
    return {
        "queries": len(theirs_h),
        "injecting": sum(bool(t) for t in theirs_h.values()),
        "identical": len(same),
        "differences": [
            {"query_id": q, "ours": ours_h.get(q), "oks": theirs_h[q]}
            for q in theirs_h
            if q not in same
        ],
    }


def oks(a: argparse.Namespace) -> dict:
    """Top-``limit`` agreement of ``preset=oks data=oks`` with OKS's own recall, each instance
    with the backend its settings select."""
    tmp = Path(a.out or tempfile.mkdtemp(prefix="parity_oks_"))
    tmp.mkdir(parents=True, exist_ok=True)
    report, tot, queries = {}, [0, 0, 0, 0, 0, 0.0], 0
    for i, store in enumerate(Path(s).resolve() for s in a.stores):
        theirs = _oracle(store, tmp / f"oracle-{i}.jsonl", a.limit, a.venv, a.src)
        oracle = tmp / f"oracle-{i}.jsonl"
        rep = _compare(theirs, _ours(store, tmp / f"run-{i}", a.limit), cut_ties(oracle))
        tot = [x + y for x, y in zip(tot, rep.pop("_sums"))]
        queries += len(theirs)
        hook = {"hook": _hook_report(store, tmp, i, a)} if a.hook else {}
        report[str(store)] = {"backend": settings_backend(store), **rep, **hook}
    report["overall"] = {
        "queries": queries,
        "positions": tot[2],
        "exact": round(tot[0] / max(tot[2], 1), 4),
        "tie_aware": round(tot[1] / max(tot[2], 1), 4),
        "only_as_ties": tot[1] - tot[0],
        "top1_exact": tot[3],
        "top1_tie_aware": tot[4],
        "topk_overlap": round(tot[5] / max(queries, 1), 4),
    }
    return report


def _run_oks(a: argparse.Namespace) -> int:
    print(json.dumps(oks(a), ensure_ascii=False, indent=1))
    return 0


def add_parser(sub) -> None:
    """The ``oks`` subcommand of ``scripts/parity/parity.py``."""
    o = sub.add_parser("oks", help="OKS recall (the instance's backend) vs preset=oks data=oks")
    o.add_argument("stores", nargs="+")
    o.add_argument("--limit", type=int, default=5)
    o.add_argument("--venv", default="/tmp/oracles/oks_venv")
    o.add_argument("--src", default="/tmp/oracles/oks_src")
    o.add_argument("--out", default=None)
    o.add_argument("--hook", action="store_true", help="also compare the auto-recall hook's output")
    o.set_defaults(run=_run_oks)
