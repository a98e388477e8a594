"""ReMe workspaces written by ReMe's own indexing code, for ``scripts/parity/parity.py reme --ws``:

    python scripts/parity/reme_workspaces.py OUT --reme-venv V --reme-src S [--only NAME ...]

Each ``OUT/<name>/`` gets ``workspace/`` (source files, then ReMe's ``metadata/``) and
``queries.jsonl`` (``query_id``, ``text``, ``relevant``: the workspace paths that answer it).
The source files are laid out as ReMe's LongMemEval workspaces are (``session/dialog/*.jsonl``
messages, ``daily/<date>.md`` day pages, ``daily/<date>/<note>.md`` notes with ``name`` /
``description`` front matter and ``[[session/dialog/x.jsonl#L1-L2]]`` links, ``digest/`` topic
notes linking daily notes, ``resource/`` documents); their text comes from the benchmark data
(``$RECALL_DATA_DIR``, default ``/work/shared/data``: LoCoMo conversations, MuSiQue paragraphs)
and, for Chinese text, ReMe's own Chinese docs (``<reme-src>/docs/zh``, ``README_ZH.md``). Nothing
is written under the data folder and nothing of it is committed.

ReMe then indexes each workspace itself: the script reruns itself under the ReMe venv
(``--_inner``), builds ``reme.ReMe`` with the components of ``reme/config/lme.yaml`` (regex
tokenizer, bm25, local file graph, local file store, its markdown / jsonl chunkers) and runs an
``index_update`` job (``init_changes_step`` → ``update_index_step``) over ``daily``, ``digest``,
``session/dialog`` and ``resource``. The embedding model is the oracle's ``hash_embed`` stand-in
(``../shared/oracles/reme_search.py``); a spec with two dimensions indexes twice, so ReMe
re-embeds every chunk and keeps two ``embedding_store`` caches, as a store ReMe rewrote after a
model change does; a spec without one has no vectors (ReMe's default keyword-only config).
``PYTHONHASHSEED`` differs per spec: ReMe adds changed files in set order, so the chunk store's
order (ReMe's order of equal scores) differs from the path order. No network is used.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import oracle_dir  # noqa: E402

DATA = Path(os.environ.get("RECALL_DATA_DIR", "/work/shared/data"))

# name → what it holds: LoCoMo conversation (index, sessions), MuSiQue questions (first, count,
# notes per paragraph or one long note), Chinese docs, near-copies, hash dims, hash seed
SPECS = {
    "locomo0-small": {"locomo": (0, 3), "dims": [256], "seed": 1},
    "locomo1-two-caches": {"locomo": (1, 6), "dims": [128, 256], "seed": 2},
    "locomo2-keyword-only": {"locomo": (2, 5), "dims": [], "seed": 3},
    "musique-resources": {"musique": (0, 4, "notes"), "dims": [256], "seed": 4},
    "musique-long-sections": {"musique": (4, 3, "long"), "dims": [256], "seed": 5},
    "zh-docs": {"zh": 6, "dims": [256], "seed": 6},
    "zh-en-mixed": {"zh": 3, "locomo": (3, 3), "dims": [128, 256], "seed": 7},
    "near-copies": {"locomo": (4, 3), "copies": True, "dims": [256], "seed": 8},
    "mixed-all": {"locomo": (0, 2), "musique": (8, 2, "notes"), "zh": 2, "dims": [256], "seed": 9},
}


def _slug(text: str, n: int = 6) -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())[:n]
    return "-".join(words) or "note"


def _front(name: str, description: str, extra: dict | None = None) -> str:
    lines = [f"name: {name}", f"description: {json.dumps(description, ensure_ascii=False)}"]
    lines += [f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in (extra or {}).items()]
    return "---\n" + "\n".join(lines) + "\n---\n\n"


def _write(ws: Path, rel: str, text: str) -> None:
    p = ws / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text, encoding="utf-8")


def _session_lines(turns: list[dict], date: str) -> str:
    """One LongMemEval-style message per line (``session/dialog/*.jsonl``)."""
    out = []
    for i, t in enumerate(turns):
        role = "user" if i % 2 == 0 else "assistant"
        msg = {
            "name": t["speaker"],
            "content": [{"type": "text", "text": t["text"]}],
            "role": role,
            "id": t["dia_id"],
            "metadata": {},
            "created_at": f"{date}T10:{i % 60:02d}:00",
        }
        out.append(json.dumps(msg, ensure_ascii=False))
    return "\n".join(out) + "\n"


def _locomo(ws: Path, conv: int, sessions: int, copies: bool) -> list[dict]:
    """A LoCoMo conversation's first sessions as session files, daily notes, a day page and a
    digest; queries: the notes' descriptions and the questions whose evidence lies there."""
    sample = json.load(gzip.open(DATA / "locomo" / "locomo_dev5.json.gz"))[conv]
    c, queries, where = sample["conversation"], [], {}
    for s in range(1, sessions + 1):
        turns = c[f"session_{s}"]
        date = f"2023-05-{10 + s:02d}"
        sid = f"{sample['sample_id']}_s{s}"
        _write(ws, f"session/dialog/{sid}.jsonl", _session_lines(turns, date))
        for t in turns:
            where[t["dia_id"]] = f"session/dialog/{sid}.jsonl"
        summary = (sample.get("session_summary") or {}).get(f"session_{s}_summary") or turns[0][
            "text"
        ]
        slug = _slug(summary)
        body = [f"# Session {s} with {c['speaker_a']} and {c['speaker_b']}", ""]
        for i, t in enumerate(turns[:24]):
            body.append(f"- {t['speaker']}: {t['text']}")
            if i % 6 == 5:
                body.append(f"[[session/dialog/{sid}.jsonl#L{i - 4}-L{i + 1}]]")
        rel = f"daily/{date}/{slug}.md"
        note = _front(slug, summary[:300], {"session_id": sid}) + "\n".join(body) + "\n"
        _write(ws, rel, note)
        _write(ws, f"daily/{date}.md", f"# {date}\n\n- [[{rel}]] {summary[:120]}\n")
        queries.append({"text": summary[:300], "relevant": [rel]})
        if copies:  # two near-copies of the note under other names (ReMe wrote such triples)
            for k, tail in enumerate(("", "\n- (revised)\n")):
                _write(ws, f"daily/{date}/{slug}-copy{k}.md", note + tail)
    digest = ["# Conversation digest", ""] + [
        f"- [[daily/2023-05-{10 + s:02d}.md]]" for s in range(1, sessions + 1)
    ]
    _write(ws, f"digest/{sample['sample_id']}.md", _front("digest", "digest") + "\n".join(digest))
    for qa in sample["qa"]:
        rel = sorted({where[e] for e in qa.get("evidence", []) if e in where})
        if rel and len(queries) < 12 and qa.get("question"):
            queries.append({"text": qa["question"], "relevant": rel})
    return queries


def _musique(ws: Path, first: int, count: int, layout: str) -> list[dict]:
    """MuSiQue questions' paragraphs as ``resource/`` notes (one per paragraph), or (``long``)
    one long ``digest/`` note per question, one heading per paragraph; queries: the questions
    (their supporting paragraphs' notes) and some paragraph titles (their note)."""
    rows = json.load(gzip.open(DATA / "hipporag" / "musique_train.json.gz"))[first : first + count]
    queries = []
    for qi, r in enumerate(rows):
        paras = r["paragraphs"]
        if layout == "long":
            rel = f"digest/musique-{first + qi}.md"
            secs = [f"## {p['title']}\n\n{p['paragraph_text']}\n" for p in paras]
            _write(ws, rel, _front(f"musique-{first + qi}", paras[0]["title"]) + "\n".join(secs))
            queries.append({"text": r["question"], "relevant": [rel]})
            queries += [{"text": p["title"], "relevant": [rel]} for p in paras[1:4]]
            continue
        rel_of = {}
        for p in paras:
            rel = f"resource/{first + qi}/{p['idx']:02d}-{_slug(p['title'], 4)}.md"
            _write(ws, rel, _front(_slug(p["title"], 4), p["title"]) + p["paragraph_text"] + "\n")
            rel_of[p["idx"]] = rel
        sup = [rel_of[p["idx"]] for p in paras if p.get("is_supporting")]
        queries.append({"text": r["question"], "relevant": sup})
        queries += [{"text": p["title"], "relevant": [rel_of[p["idx"]]]} for p in paras[:2]]
    return queries


def _zh(ws: Path, src: Path, files: int) -> list[dict]:
    """ReMe's Chinese docs as ``digest/zh/`` notes; queries: each note's first heading."""
    docs = [src / "README_ZH.md", *sorted((src / "docs" / "zh").glob("*.md"))][:files]
    queries = []
    for d in docs:
        text = d.read_text(encoding="utf-8")
        rel = f"digest/zh/{d.stem.lower()}.md"
        heads = [h.strip("# ").strip() for h in re.findall(r"^#{1,3} .+$", text, re.M)]
        desc = heads[0] if heads else d.stem
        _write(ws, rel, _front(d.stem.lower(), desc) + text)
        for h in heads[1:3]:
            queries.append({"text": h, "relevant": [rel]})
    return queries


def build_sources(out: Path, name: str, spec: dict, src: Path) -> None:
    """``out/name/workspace`` source files and ``out/name/queries.jsonl``."""
    ws = out / name / "workspace"
    ws.mkdir(parents=True, exist_ok=True)
    queries = []
    if "locomo" in spec:
        queries += _locomo(ws, *spec["locomo"], spec.get("copies", False))
    if "musique" in spec:
        queries += _musique(ws, *spec["musique"])
    if "zh" in spec:
        queries += _zh(ws, src, spec["zh"])
    lines = [
        json.dumps({"query_id": f"{name}/{i}", **q}, ensure_ascii=False)
        for i, q in enumerate(queries[:15])
    ]
    (out / name / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _config(ws: Path, dim: int | None) -> dict:
    """ReMe's app config: lme.yaml's indexing components, an ``index_update`` job."""
    store = {"backend": "local", "store_name": "local", "keyword_index": "default"}
    store |= {"file_graph": "default", "embedding_store": "default" if dim else ""}
    comps = {
        "tokenizer": {"default": {"backend": "regex"}},
        "keyword_index": {"default": {"backend": "bm25", "tokenizer": "default"}},
        "file_graph": {"default": {"backend": "local"}},
        "file_chunker": {
            "markdown": {
                "backend": "markdown",
                "supported_extensions": ["md"],
                "embed_toc": True,
                "max_ast_sections": 100,
            },
            "jsonl": {"backend": "jsonl", "supported_extensions": ["jsonl"], "max_chars": 1500},
        },
        "file_store": {"default": store},
    }
    if dim:
        comps["as_embedding"] = {"default": {"backend": "oracle_hash", "dimensions": dim}}
        comps["embedding_store"] = {"default": {"backend": "local", "as_embedding": "default"}}
    step = {
        "backend": "init_changes_step",
        "monitor_type": "file_store",
        "monitor_name": "default",
        "dispatch_steps": ["update_index_step"],
    }
    job = {
        "backend": "base",
        "watch_dirs": ["daily", "digest", "session/dialog", "resource"],
        "watch_suffixes": ["md", "jsonl"],
        "steps": [step],
    }
    return {
        "app_name": "ReMe",
        "workspace_dir": str(ws),
        "enable_logo": False,
        "log_to_console": True,
        "log_to_file": False,
        "service": {"backend": "http"},
        "jobs": {"index_update": job},
        "components": comps,
    }


async def _index(ws: Path, dim: int | None, oracles: Path) -> None:
    """Run ReMe's index_update job once (inside the ReMe venv)."""
    import reme
    import reme.application as A
    from reme.components.as_embedding import BaseAsEmbedding

    sys.path.insert(0, str(oracles))
    from reme_search import hash_embed

    class OracleHash(BaseAsEmbedding):
        """The oracle's local stand-in embedding (no network)."""

        @property
        def dimensions(self) -> int:
            return int(self.kwargs.get("dimensions", 256))

        @property
        def vector_space(self) -> tuple[str, ...]:
            return ("oracle_hash", "sha256-feature-hash-v1", str(self.dimensions), "local")

        def initialize_model(self) -> None:
            return None

        def _ensure_model(self) -> None:
            return None

        async def __call__(self, inputs, **kwargs):
            return [hash_embed(str(t), self.dimensions) for t in inputs]

    if not getattr(A, "_oracle_hash", False):  # once per process (a second pass re-embeds)
        orig = A.create_application_registry

        def _registry():
            reg = orig()
            reg.add("oracle_hash", OracleHash, owner="oracle")
            return reg

        A.create_application_registry = _registry
        A._oracle_hash = True
    app = reme.ReMe(**_config(ws, dim))
    await app.start()
    try:
        fs = app.context.components["file_store"]["default"]
        task = getattr(fs, "_embedding_backfill_task", None)
        if task is not None:
            await task
        resp = await app.run_job("index_update")
        task = getattr(fs, "_embedding_backfill_task", None)
        if task is not None:
            await task
        print("indexed", ws, dim, (resp.metadata or {}).get("counts"), len(fs.file_chunks))
    finally:
        await app.close()


def _inner(args) -> int:
    import socket

    def _refuse(self, address, *a, **k):
        raise OSError(f"reme_workspaces: network disabled ({address!r})")

    socket.socket.connect = _refuse  # offline guarantee
    dims = [int(d) for d in args.dims.split(",") if d] or [None]
    for dim in dims:
        asyncio.run(_index(Path(args.out), dim, Path(args.oracles)))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Write every spec's sources, then let ReMe index each."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--reme-venv", default="/tmp/oracles/reme_venv")
    ap.add_argument("--reme-src", default="/tmp/oracles/reme_src")
    ap.add_argument("--oracles", default=str(oracle_dir.oracles()))
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--_inner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--dims", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._inner:
        return _inner(args)
    out = Path(args.out)
    for name, spec in SPECS.items():
        if args.only and name not in args.only:
            continue
        build_sources(out, name, spec, Path(args.reme_src))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("EMBEDDING_", "LLM_"))}
        env |= {
            "PYTHONPATH": str(Path(args.reme_src).resolve()),
            "PYTHONHASHSEED": str(spec["seed"]),
        }
        env |= {"HOME": str(out / name)}
        cmd = [
            str(Path(args.reme_venv) / "bin" / "python"),
            __file__,
            str(out / name / "workspace"),
        ]
        cmd += ["--_inner", "--dims", ",".join(map(str, spec["dims"])), "--oracles", args.oracles]
        log = out / name / "reme_index.log"
        with open(log, "w") as fh:
            rc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
        print(f"{name}: rc={rc} ({log})", flush=True)
        if rc:
            return rc
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
