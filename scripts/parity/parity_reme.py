"""Parity of preset=reme data=reme with ReMe's own code (``../shared/oracles/reme_search.py``): the
``reme`` subcommand of ``scripts/parity/parity.py``:

    python scripts/parity/parity.py reme [--cases 57f827a0 681a1674 ...] [--ws DIR ...]
        [--modes keyword hybrid] [--keyword-index rebuild|load] [--mirror M] [--oracles O]
        [--oracle-venv V] [--oracle-src S] [--work W]

Workspaces ReMe wrote: ``--cases``, LongMemEval cases of ReMe's own benchmark
(agentscope-ai/ReMe @ b2e51d73, ``reme_workspace.tar.gz``; queries: the case's question, its qrels
the answer sessions' files, and the front-matter ``description`` of up to 12 indexed files, its
qrels that file), and ``--ws``, folders of ``scripts/parity/reme_workspaces.py`` (``workspace/`` indexed by
ReMe's own code, ``queries.jsonl`` with ``relevant``). Each is searched by ReMe's real
``search_step`` (``reme_search.py``, limit 5) and by ``recall run data=reme preset=reme`` (no other
flag: k is ReMe's limit 5), in two modes: ``keyword`` (ReMe with vector_weight 0: BM25 only; ours
as a user runs it: the queries carry no vector and no local copy of the store's API model exists,
so each query is searched by keyword, preset reme's ReMe fallback) and ``hybrid`` (ReMe with the
oracle's ``hash_embed`` 256-d stand-in embedding; ours with the same vectors brought as stored
vectors: each chunk's ``_embedding_f16_b64`` replaced by float16(hash_embed(ReMe's truncation of
its text)) in a copy of the store, and each query's ``embedding`` = float16(hash_embed(truncated
query)): ReMe truncates every text it embeds, queries included, to 8,192 characters, or a 92%
budget of 2·8,192 width units when the text is not ASCII). Prints, per mode, how many queries give
the same top-5 (path, lines) in the same order, the mean overlap of the top-5 sets, the largest
score difference on agreeing ranks and how many of those scores are the very same float, and
document R@5 of both sides; lists each differing query. ``--keyword-index load`` lets ReMe load
the workspace's persisted BM25 pickle (the oracle scans it first) and runs ours with
``data.keyword_slots=true`` (its slot layout, read from the opcodes). Every input is copied first; nothing
under the mirror or a store is modified.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import shutil
import subprocess
import sys
import tarfile
import unicodedata
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
import oracle_dir  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
CASES = "benchmark/longmemeval/meta-workspace/evaluations/init/043d23be72c9c181c9362817ffae85c7e4cb4df6/initial/cases"
DATASET = "benchmark/longmemeval/meta-workspace/dataset/cases"
DATA_COMMIT = "b2e51d73"


def _git(mirror: str, *args: str) -> bytes:
    return subprocess.run(["git", "-C", mirror, *args], capture_output=True, check=True).stdout


def _oracle_module(oracles: Path):
    spec = importlib.util.spec_from_file_location("reme_search", oracles / "reme_search.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _truncate(text: str, limit: int = 8192) -> str:
    """ReMe's ``BaseEmbeddingStore._truncate`` (base_embedding_store.py @ c8e12487)."""
    if text.isascii():
        return text[:limit]
    budget, used = limit * 2 * 92 // 100, 0
    for i, ch in enumerate(text):
        used += 3 if unicodedata.east_asian_width(ch) in {"W", "F"} else 2
        if used > budget:
            return text[:i]
    return text


def _questions(mirror: str) -> dict[str, tuple[str, list[str]]]:
    """case id → (its LongMemEval question, its answer sessions' paths: the question's qrels)."""
    out = {}
    for name in _git(mirror, "ls-tree", "--name-only", f"{DATA_COMMIT}:{DATASET}").decode().split():
        doc = json.loads(_git(mirror, "show", f"{DATA_COMMIT}:{DATASET}/{name}"))
        q = doc["queries"]
        q = json.loads(q) if isinstance(q, str) and q.startswith('[{"') else q
        if isinstance(q, str):
            import ast

            q = ast.literal_eval(q)
        sessions = (q[0].get("metadata") or {}).get("answer_session_ids") or []
        out[doc["case_id"]] = (q[0]["question"], [f"session/dialog/{s}.jsonl" for s in sessions])
    return out


def _workspace(mirror: str, case: str, work: Path) -> Path:
    """The case's reme_workspace.tar.gz unpacked under ``work`` (the mirror is only read)."""
    ws = work / "ws" / case
    if not ws.is_dir():
        ws.mkdir(parents=True)
        tgz = work / f"{case}.tar.gz"
        tgz.write_bytes(
            _git(
                mirror,
                "show",
                f"{DATA_COMMIT}:{CASES}/{case}/memory_construction/reme_workspace.tar.gz",
            )
        )
        with tarfile.open(tgz) as tf:
            tf.extractall(ws, filter="data")
    return ws


def _queries(ws: Path, question: tuple | None, case: str) -> list[dict]:
    """The case's question (its qrels: the answer sessions) and the front-matter ``description``
    of up to 12 indexed files (its qrels: that file)."""
    from pipeline.adapters import reme_index

    graph = reme_index.file_nodes(ws / "metadata", "default")
    rows = []
    if question:
        rows.append({"query_id": f"{case}/question", "text": question[0], "relevant": question[1]})
    for path in sorted(graph):
        desc = (graph[path].get("front_matter") or {}).get("description")
        if desc and len(rows) < 13:
            rows.append({"query_id": f"{case}/{path}", "text": desc, "relevant": [path]})
    return rows


def _byo_store(ws: Path, dst: Path, embed) -> None:
    """A copy of ``ws`` whose chunk vectors are float16(embed(truncated text)) (no npz cache)."""
    from pipeline.adapters import reme_index
    from pipeline.synth.reme_store import write_jsonl_zst

    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(ws, dst, ignore=shutil.ignore_patterns(".git", "*.pkl", "*.npz"))
    path = reme_index.chunks_file(dst / "metadata", "default", "v1")
    rows = reme_index.chunks(dst / "metadata", "default", "v1")
    for r in rows:
        v = np.asarray(embed(_truncate(r["text"])), np.float16)
        r["_embedding_f16_b64"] = base64.b64encode(v.tobytes()).decode("ascii")
    write_jsonl_zst(path, rows)


def _ours(ws: Path, queries: Path, out: Path, extra: list[str]) -> list[dict]:
    cmd = [
        sys.executable,
        "-m",
        "pipeline",
        "run",
        "data=reme",
        f"data.path={ws}",
        f"data.queries={queries}",
        "preset=reme",
        "report=false",
        "device=cpu",
        f"out_dir={out}",
        f"cache_dir={out.parent / 'cache'}",
        *extra,
    ]
    subprocess.run(cmd, cwd=REPO, check=True, capture_output=True)
    return pl.read_parquet(out / "recall.parquet").sort("query_id", "rank").to_dicts()


def _oracle(args, ws: Path, queries: Path, out: Path, mode: str) -> dict[str, list]:
    cmd = [
        "python3",
        str(Path(args.oracles) / "reme_search.py"),
        "--venv",
        args.oracle_venv,
        "--src",
        args.oracle_src,
        str(ws),
        str(queries),
        str(out),
        "--limit",
        "5",
        "--mode",
        mode,
        "--keyword-index",
        args.keyword_index,
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    hits = {}
    for line in out.read_text().splitlines():
        r = json.loads(line)
        hits[r["query_id"]] = [
            (h["path"], h["start_line"], h["end_line"], h["score"]) for h in r["hits"]
        ]
    return hits


def _recall5(hits: list, relevant: list[str]) -> float | None:
    """Document recall at 5: the share of ``relevant`` paths among the top-5 hits' paths."""
    if not relevant:
        return None
    return len({h[0] for h in hits[:5]} & set(relevant)) / len(set(relevant))


def _compare(ours: list[dict], oracle: dict[str, list], relevant: dict[str, list]) -> dict:
    """Same top-5 (path, lines) in the same order, the top-5 overlap, the largest score
    difference on agreeing queries and how many agreeing hits carry the very same score, and
    each side's document R@5."""
    mine: dict[str, list] = {}
    for r in ours:
        path, lines = r["node_id"].rsplit("#L", 1)
        a, b = lines.split("-L")
        mine.setdefault(r["query_id"], []).append((path, int(a), int(b), r["score"]))
    same, overlap, diff, bits, hits, differ = 0, [], 0.0, 0, 0, []
    r5 = {"ours": [], "reme": []}
    for qid, want in oracle.items():
        got = mine.get(qid, [])
        key = lambda h: h[:3]  # noqa: E731
        if [key(h) for h in got] == [key(h) for h in want]:
            same += 1
            diff = max([diff, *(abs(g[3] - w[3]) for g, w in zip(got, want))])
            bits += sum(g[3] == w[3] for g, w in zip(got, want))
            hits += len(want)
        else:
            differ.append((qid, [h[:4] for h in got], [h[:4] for h in want]))
        both = {key(h) for h in got} & {key(h) for h in want}
        overlap.append(len(both) / len(want) if want else float(not got))
        for side, h in (("ours", got), ("reme", want)):
            v = _recall5(h, relevant.get(qid) or [])
            if v is not None:
                r5[side].append(v)
    return {
        "queries": len(oracle),
        "same_top5": same,
        "mean_overlap@5": float(np.mean(overlap)) if overlap else 1.0,
        "max_score_diff": diff,
        "same_bits": bits,
        "agreeing_hits": hits,
        "r5": r5,
        "differ": differ,
    }


def _inputs(args, work: Path) -> list[tuple[str, Path, list[dict]]]:
    """(name, workspace, query rows with ``relevant``) of every LongMemEval case (``--cases``)
    and every folder of ``--ws`` (``DIR/workspace`` and ``DIR/queries.jsonl``, as
    ``scripts/reme_workspaces.py`` writes them)."""
    out = []
    if args.cases:
        questions = _questions(args.mirror)
        for case in args.cases:
            ws = _workspace(args.mirror, case, work)
            out.append((case, ws, _queries(ws, questions.get(case), case)))
    for d in map(Path, args.ws or []):
        rows = [json.loads(x) for x in (d / "queries.jsonl").read_text().splitlines() if x]
        out.append((d.name, d / "workspace", rows))
    return out


def _hybrid_queries(rows: list[dict], path: Path, hash_embed) -> Path:
    """The queries with their ``embedding``: float16(hash_embed(truncated text)), as ReMe embeds
    a query with the oracle's stand-in model."""
    vecs = [
        np.asarray(hash_embed(_truncate(r["text"]), 256), np.float16).astype(np.float32).tolist()
        for r in rows
    ]
    pl.DataFrame(
        {
            "query_id": [r["query_id"] for r in rows],
            "text": [r["text"] for r in rows],
            "embedding": vecs,
        },
        schema_overrides={"embedding": pl.List(pl.Float32)},
    ).write_parquet(path)
    return path


def _runs(args, name: str, ws: Path, rows: list[dict], work: Path, hash_embed) -> dict:
    """mode → (our rows, ReMe's hits) for one workspace."""
    qj = work / f"{name}.queries.jsonl"
    qj.write_text(
        "".join(json.dumps({"query_id": r["query_id"], "text": r["text"]}) + "\n" for r in rows)
    )
    runs = {}
    slots = ["data.keyword_slots=true"] if args.keyword_index == "load" else []
    if "keyword" in args.modes:
        runs["keyword"] = (
            _ours(ws, qj, work / "ours" / name / "keyword", slots),
            _oracle(args, ws, qj, work / f"{name}.oracle.keyword.jsonl", "keyword"),
        )
    if "hybrid" in args.modes:
        byo = work / "byo" / name
        _byo_store(ws, byo, lambda t: hash_embed(t, 256))
        qp = _hybrid_queries(rows, work / f"{name}.queries.parquet", hash_embed)
        runs["hybrid"] = (
            _ours(byo, qp, work / "ours" / name / "hybrid", ["data.vector_model=oracle_hash-256"]),
            _oracle(args, ws, qj, work / f"{name}.oracle.hybrid.jsonl", "hybrid-local"),
        )
    return runs


SUMS = ("queries", "same_top5", "same_bits", "agreeing_hits")


def _report(totals: dict) -> None:
    for mode, t in totals.items():
        r5 = {k: float(np.mean(v)) if v else float("nan") for k, v in t["r5"].items()}
        print(
            f"ALL {mode}: {t['same_top5']}/{t['queries']} queries with the same top-5 in the same "
            f"order; mean overlap@5 {sum(t['overlap']) / t['queries']:.3f}; max |score diff| on "
            f"agreeing queries {t['max_score_diff']:.2e}; identical scores {t['same_bits']}/"
            f"{t['agreeing_hits']}; doc R@5 ours {r5['ours']:.3f}, ReMe {r5['reme']:.3f} "
            f"({len(t['r5']['ours'])} queries with qrels)"
        )
        for qid, got, want in t["differ"]:
            print(f"  differs {mode} {qid}:\n    ours   {got}\n    oracle {want}")


def reme(args) -> int:
    """The ``reme`` subcommand (see the module docstring)."""
    sys.path.insert(0, str(REPO))
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    hash_embed = _oracle_module(Path(args.oracles)).hash_embed
    totals: dict[str, dict] = {}
    for name, ws, rows in _inputs(args, work):
        relevant = {r["query_id"]: r.get("relevant") or [] for r in rows}
        for mode, (ours, oracle) in _runs(args, name, ws, rows, work, hash_embed).items():
            c = _compare(ours, oracle, relevant)
            t = totals.setdefault(
                mode,
                {
                    **dict.fromkeys(SUMS, 0),
                    "overlap": [],
                    "max_score_diff": 0.0,
                    "differ": [],
                    "r5": {"ours": [], "reme": []},
                },
            )
            for k in SUMS:
                t[k] += c[k]
            t["overlap"].append(c["mean_overlap@5"] * c["queries"])
            t["max_score_diff"] = max(t["max_score_diff"], c["max_score_diff"])
            t["differ"] += c["differ"]
            for side in ("ours", "reme"):
                t["r5"][side] += c["r5"][side]
            print(
                f"{name} {mode}: {c['same_top5']}/{c['queries']} same top-5, mean overlap@5 "
                f"{c['mean_overlap@5']:.3f}, max |score diff| {c['max_score_diff']:.2e}, "
                f"identical scores {c['same_bits']}/{c['agreeing_hits']}",
                flush=True,
            )
    _report(totals)
    return 0


def add_parser(sub) -> None:
    """The ``reme`` subcommand of ``scripts/parity/parity.py``."""
    r = sub.add_parser("reme", help="preset=reme data=reme vs ReMe's search_step")
    r.add_argument("--cases", nargs="*", default=["57f827a0", "681a1674", "71017277", "2a1811e2"])
    r.add_argument(
        "--ws", nargs="*", help="folders holding workspace/ and queries.jsonl (reme_workspaces.py)"
    )
    r.add_argument(
        "--modes", nargs="+", default=["keyword", "hybrid"], choices=["keyword", "hybrid"]
    )
    r.add_argument(
        "--keyword-index",
        default="rebuild",
        choices=["rebuild", "load"],
        help="ReMe rebuilds BM25 from the chunks (default) or loads its bm25_*.pkl; load runs "
        "ours with data.keyword_slots=true",
    )
    r.add_argument("--mirror", default="/work/.mirror/agentscope-ai+ReMe/repo")
    r.add_argument("--oracles", default=str(oracle_dir.oracles()))
    r.add_argument("--oracle-venv", default="/tmp/oracles/reme_venv")
    r.add_argument("--oracle-src", default="/tmp/oracles/reme_src")
    r.add_argument("--work", default="/tmp/parity-reme")
    r.set_defaults(run=reme)
