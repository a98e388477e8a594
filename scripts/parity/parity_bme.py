"""Parity of preset=bme data=bme with ST-BME's own code (the oracle in ../shared/oracles/bme): the
``bme`` subcommand of ``scripts/parity/parity.py``.

    python scripts/parity/parity.py bme GRAPH_DIR [GRAPH_DIR ...] [--bme SRC] [--out DIR] [--drop-visibility]

``bme``: each GRAPH_DIR holds ``graph.json`` + ``queries.jsonl`` (``oracles/bme/make_graph.py``
writes them). Runs ST-BME's own ``retrieve()`` (``oracles/bme/run_bme.mjs``, char name Aria, its
FNV token-hash query embedding, the graph's stored node vectors) and ``recall run data=bme
preset=bme`` with the same vectors (``embed=bme_oracle_hash``: the oracle's hash for every query
text; the nodes' stored ``embedding``), the oracle's clock (``now``) and the scene state BME resolved
(``active_owner_keys`` / owner names from ``retrievalMeta``: our adapter does not reproduce BME's
owner heuristics), and nothing else: the preset's own defaults are BME's settings defaults with
LLM recall off, as the oracle runs (cross recall on, the DPP target recallTopK 20, k 20). Compared per query:

- ``scored``: BME's ``scoredNodes`` order (scope bucket, story bucket, weighted score) against
  ours with ``select=topk`` (the same sort, no DPP), position by position over the first 20;
- ``scored_all``: the same lists whole, as sets (which nodes reach scoring at all);
- ``pool``: BME's DPP selection (``poolSelected``, greedy order) against our ranks 1–20 with DPP;
- ``first12``: BME's first 12 of the DPP order (``preSceneSelected``, before scene
  reconstruction) against our ranks 1–12, as sets;
- ``selected``: BME's final ``selectedNodeIds`` (owner-POV augmentation and scene reconstruction
  of the first 12) against ours (``injection.parquet``'s ``selected``, ``inject.format=bme``), as
  sets.

With ``--writeback``, also ``writeback``: the graph ``recall feedback RUN --format bme --now <the
oracle's clock>`` writes from our DPP run against ST-BME's own ``retrieval/dynamics.js::
reinforceAccessBatch`` applied, query after query on one graph (BME reinforces after each recall),
to BME's ``selectedNodeIds`` (a small Node script importing that module from ``--bme``): the nodes
whose ``importance``, ``accessCount`` and ``lastAccessTime`` are the very same values, of all nodes.

Prints per-graph and overall figures as JSON (differences listed per query); ``--out`` keeps the
outputs.
"""

from __future__ import annotations

import argparse
import datetime as dt
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


def _run(cmd: list[str], **kw) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if done.returncode:
        sys.exit(f"{' '.join(cmd[:4])} ... failed:\n{done.stderr[-3000:]}")


def _bme_oracle(gdir: Path, out: Path, src: str) -> list[dict]:
    cmd = ["node", str(ORACLES / "bme" / "run_bme.mjs"), "--bme", src, str(gdir / "graph.json")]
    _run([*cmd, str(gdir / "queries.jsonl"), str(out), "--char-name", "Aria"])
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]


def _bme_queries(theirs: list[dict], path: Path) -> None:
    """Our queries: the oracle's texts and context, its clock and the scene state it resolved."""
    with path.open("w", encoding="utf-8") as fh:
        for r in theirs:
            m = r["retrievalMeta"]
            keys = list(m.get("activeRecallOwnerKeys") or [])
            names = [
                c["ownerName"] for c in m.get("sceneOwnerCandidates") or [] if c["ownerKey"] in keys
            ]
            text, lines = r["recallInput"]["userMessage"], list(r["recallInput"]["recentMessages"])
            if lines and lines[-1].startswith("[user]") and lines[-1].endswith(text):
                lines = lines[:-1]  # the adapter's context is the lines before the current message
            row = {
                "query_id": r["query_id"],
                "text": text,
                "context": lines,
                "char_name": "Aria",
                "user_name": m.get("activeUserPovOwner") or None,
                "now": r["now"],
                "active_owner_keys": keys,
                "active_owners": [
                    n for n in dict.fromkeys([m.get("activeCharacterPovOwner"), *names]) if n
                ],
            }
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")


def _bme_ours(gdir: Path, queries: Path, run_dir: Path, select: str) -> dict[str, list[str]]:
    cmd = [sys.executable, "-m", "pipeline", "run", "preset=bme", "data=bme"]
    cmd += [f"data.path={gdir / 'graph.json'}", f"data.queries={queries}"]
    cmd += ["embed=bme_oracle_hash", "data.vector_model=oracle_hash-16"]  # the oracle's vectors
    cmd += ["report=false", f"out_dir={run_dir}", f"cache_dir={run_dir / 'cache'}"]
    # the preset's own defaults (BME's: cross recall on, DPP 20 of 60, k 20); the score-order
    # comparison alone reads the whole scored list (BME scores ≤ 100 nodes) without the DPP
    cmd += ["select=topk", "k=100"] if select == "topk" else ["inject.format=bme"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    _run(cmd, cwd=REPO, env=env)
    rec = pl.read_parquet(run_dir / "recall.parquet").sort("query_id", "rank")
    out = {q: g["node_id"].to_list() for (q,), g in rec.group_by("query_id", maintain_order=True)}
    if select != "topk":  # BME's selectedNodeIds: the injection's scene-reconstructed selection
        inj = pl.read_parquet(run_dir / "injection.parquet")
        out |= {f"{q}#selected": s for q, s in zip(inj["query_id"], inj["selected"].to_list())}
    return out


def _without_visibility(gdir: Path, out: Path) -> Path:
    """A copy of the graph folder with every node's ``fields.visibility`` removed."""
    out.mkdir(parents=True, exist_ok=True)
    g = json.loads((gdir / "graph.json").read_text(encoding="utf-8"))
    for n in g["nodes"]:
        (n.get("fields") or {}).pop("visibility", None)
    (out / "graph.json").write_text(json.dumps(g, ensure_ascii=False), encoding="utf-8")
    (out / "queries.jsonl").write_bytes((gdir / "queries.jsonl").read_bytes())
    return out


REINFORCE_JS = """
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
const [bme, graphPath, oraclePath, outPath] = process.argv.slice(2);
const dyn = await import(pathToFileURL(path.join(bme, "retrieval", "dynamics.js")).href);
const graph = JSON.parse(fs.readFileSync(graphPath, "utf8"));
const byId = new Map(graph.nodes.map((n) => [n.id, n]));
for (const line of fs.readFileSync(oraclePath, "utf8").split("\\n").filter(Boolean)) {
  const r = JSON.parse(line);
  Date.now = () => r.now;
  dyn.reinforceAccessBatch((r.selectedNodeIds || []).map((id) => byId.get(id)).filter(Boolean));
}
const pick = (n) => [n.id, n.importance, n.accessCount, n.lastAccessTime];
fs.writeFileSync(outPath, JSON.stringify(graph.nodes.map(pick)));
"""
FIELDS = ("importance", "accessCount", "lastAccessTime")


def _writeback(gdir: Path, oracle: Path, run_dir: Path, now_ms: int, src: str) -> tuple[int, int]:
    """(nodes with the same reinforced fields, nodes): our ``recall feedback --format bme`` graph
    against ST-BME's ``reinforceAccessBatch`` on its own selections (see the docstring)."""
    now = dt.datetime.fromtimestamp(now_ms / 1000, dt.timezone.utc).isoformat()
    ours_path = run_dir / "feedback-graph.json"
    ours_path.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "pipeline", "feedback", str(run_dir), "--format", "bme"]
    _run([*cmd, "--now", now, "--out", str(ours_path)], cwd=REPO)
    js, theirs_path = run_dir / "reinforce.mjs", run_dir / "bme-reinforced.json"
    js.write_text(REINFORCE_JS, encoding="utf-8")
    _run(["node", str(js), src, str(gdir / "graph.json"), str(oracle), str(theirs_path)])
    theirs = {n[0]: n[1:] for n in json.loads(theirs_path.read_text(encoding="utf-8"))}
    ours = json.loads(ours_path.read_text(encoding="utf-8"))["nodes"]
    same = sum([n.get(f) for f in FIELDS] == list(theirs.get(n["id"], [])) for n in ours)
    return same, len(theirs)


def _agree(ours: list[str], theirs: list[str], n: int, ordered: bool) -> tuple[int, int]:
    a, b = ours[:n], theirs[:n]
    if ordered:
        return sum(i < len(a) and a[i] == x for i, x in enumerate(b)), len(b)
    return len(set(a) & set(b)), len(b)


def bme(a: argparse.Namespace) -> dict:
    """Agreement of ``preset=bme data=bme`` with ST-BME's own ``retrieve()`` (see the docstring)."""
    tmp = Path(a.out or tempfile.mkdtemp(prefix="parity_bme_"))
    tmp.mkdir(parents=True, exist_ok=True)
    checks = {
        "scored": (20, True),
        "scored_all": (100, False),
        "pool": (20, True),
        "first12": (12, False),
        "selected": (12, False),
    }
    report, tot = {}, {c: [0, 0] for c in checks}
    for i, gdir in enumerate(Path(g).resolve() for g in a.graphs):
        gdir = _without_visibility(gdir, tmp / f"novis-{i}") if a.drop_visibility else gdir
        theirs = _bme_oracle(gdir, tmp / f"oracle-{i}.jsonl", a.bme)
        _bme_queries(theirs, tmp / f"queries-{i}.jsonl")
        ours = {
            s: _bme_ours(gdir, tmp / f"queries-{i}.jsonl", tmp / f"run-{i}-{s}", s)
            for s in ("topk", "dpp")
        }
        per, diffs = {c: [0, 0] for c in checks}, []
        for r in theirs:
            q = r["query_id"]
            scored = [s["id"] for s in r["scored"]]
            want = {"scored": scored, "scored_all": scored, "pool": r["poolSelected"],
                    "first12": r["preSceneSelected"], "selected": r["selectedNodeIds"]}  # fmt: skip
            for c, (n, ordered) in checks.items():
                run = ours["topk" if c.startswith("scored") else "dpp"]
                got = run.get(f"{q}#selected" if c == "selected" else q, [])
                ok, m = _agree(got, want[c], n, ordered)
                per[c] = [per[c][0] + ok, per[c][1] + m]
                if ok < m and c != "scored_all":
                    diffs.append({"query_id": q, "check": c, "ours": got[:n], "bme": want[c][:n]})
        if a.writeback:
            wb = _writeback(
                gdir, tmp / f"oracle-{i}.jsonl", tmp / f"run-{i}-dpp", theirs[0]["now"], a.bme
            )
            per["writeback"] = list(wb)
            tot.setdefault("writeback", [0, 0])
        for c in per:
            tot[c] = [tot[c][0] + per[c][0], tot[c][1] + per[c][1]]
        report[str(gdir)] = {c: round(x / max(m, 1), 4) for c, (x, m) in per.items()} | {
            "differences": diffs
        }
    report["overall"] = {
        c: {"agree": x, "of": m, "share": round(x / max(m, 1), 4)} for c, (x, m) in tot.items()
    }
    return report


def _run_bme(a: argparse.Namespace) -> int:
    print(json.dumps(bme(a), indent=1, ensure_ascii=False))
    return 0


def add_parser(sub) -> None:
    """The ``bme`` subcommand of ``scripts/parity/parity.py``."""
    b = sub.add_parser("bme", help="ST-BME retrieve() vs preset=bme data=bme")
    b.add_argument("graphs", nargs="+", help="folders with graph.json + queries.jsonl")
    b.add_argument("--bme", default="/tmp/oracles/stbme", help="git archive of ST-BME 590da3b")
    b.add_argument("--out", default=None)
    b.add_argument(
        "--drop-visibility",
        action="store_true",
        help="remove fields.visibility first (isolates the sealed-visibility deviation)",
    )
    b.add_argument(
        "--writeback",
        action="store_true",
        help="also compare recall feedback --format bme with ST-BME's reinforceAccessBatch",
    )
    b.set_defaults(run=_run_bme)
