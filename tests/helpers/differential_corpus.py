"""The differential harness's data (tests/system/test_differential.py): workspaces (``doc_scope`` groups)
of very different sizes, so that every size threshold of ``pipeline.core.thresholds`` has a group,
pool, block or pack on each side of it.

- ``tiny``: 3 notes, 2 queries (a single-threaded FAISS scan, a DPP pool below its target);
- ``s0`` … ``s{W-1}``: small workspaces (8–60 notes, chains shorter than ``DENSE_MIN``) that run
  in packs;
- ``many``: 1,500 notes in 38 documents whose names are their own (38 small graph components),
  360 queries: thousands of (query, component) pairs, more than ``PAIR_NNZ`` operator entries;
- ``big``: 9,600 notes in one chained document (one component of more than 8,192 nodes, so a
  PPR column block is narrowed by ``BLOCK_BYTES``), 150 queries that see it all (the BLAS scan,
  two column blocks, DPP pools over ``GRAM_MAX_P``), 19 queries of viewer ``u1`` (fewer than
  FAISS's BLAS threshold, more than ``TINY`` pairs) and 7 at another reference time (a component
  of ≥ ``DENSE_MIN`` nodes whose work is below ``DENSE_WORK``).

Notes carry titles, types, importance, timestamps, ``visibility`` lists (private notes of ``u1``)
and a few archived ones; explicit edges link notes inside a workspace. ``edit`` applies one random
edit (change / add / delete a note) for the precompute path. Everything is deterministic per seed.

``duplicated`` (the tie-heavy data, issue 45) adds exact copies of a share of each workspace's
notes under their own ids, placed among the others: under the hashing embedder a copy's cosine
equals its original's bit for bit, so exact ties cross the dense channel's candidate cut.

``with_teams`` (the ``oks_team`` recipe, issue 28) cuts each workspace into pages of ``PAGE``
notes (``doc_id`` ``<ws>/<ws>-p<k>``: the collab channel's slug is its stem), gives each query a
``team`` and an ``agent_id`` and adds an injection log (``access_log``: session_id, turn, agent_id, team, slugs) with sessions
of every team over the workspaces' pages; ``edit`` then
also appends or deletes a log row.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import polars as pl

from pipeline.contract import schema
from pipeline.contract.dataset import Dataset

T0 = dt.datetime(2025, 2, 1, tzinfo=dt.timezone.utc)
SYL = "ka lo mi ra ze tu vo ni sa pe ro du fi ga he ju ma ko li ba".split()
WORDS = (
    "garden budget train concert recipe hiking invoice piano museum harbor bakery lecture "
    "contract dentist flight birthday meeting report laptop bicycle"
).split()
SMALL_SIZES = (8, 12, 20, 30, 45, 60)  # the small workspaces' note counts, cycled
TS = pl.Datetime("us", "UTC")


def name(i: int) -> str:
    """A capitalised two-word name, distinct for every ``i`` < 20**4 (an entity hub)."""
    a, b, c, d = i % 20, (i // 20) % 20, (i // 400) % 20, (i // 8000) % 20
    return f"{SYL[a].capitalize()}{SYL[b]} {SYL[c].capitalize()}{SYL[d]}"


def _notes(ws: str, n: int, per_doc: int, names, rng, start: int) -> list[dict]:
    """``n`` notes of workspace ``ws`` in documents of ``per_doc``; each mentions two or three names
    drawn from ``names(doc) -> list[str]``."""
    out = []
    for j in range(n):
        doc = j // per_doc
        pool = names(doc)
        who = [pool[int(x)] for x in rng.integers(0, len(pool), 3)]
        w = [WORDS[int(x)] for x in rng.integers(0, len(WORDS), 2)]
        out.append(
            {
                "node_id": f"{ws}-n{j:04d}",
                "text": f"{who[0]} and the {w[0]}: talked about the {w[1]} with {who[1]}"
                + (f" near {who[2]}" if j % 3 else ""),
                "title": who[0] if j % 4 == 0 else None,
                "doc_id": f"{ws}/d{doc}",
                "type": "event" if j % 2 else "fact",
                "seq": j,
                "importance": float(rng.uniform(0, 10)),
                "created_at": T0 + dt.timedelta(hours=start + 5 * j),
                "visibility": ["u1"] if j % 17 == 5 else None,
                "archived": j % 23 == 11,
            }
        )
    return out


def _queries(ws: str, n: int, notes: list[dict], rng, viewer=None, now=None, tag="q") -> list:
    out = []
    for j in range(n):
        src = notes[int(rng.integers(0, len(notes)))]["text"].split()
        words = [src[int(x)] for x in rng.integers(0, len(src), 4)]
        out.append(
            {
                "query_id": f"{ws}-{tag}{j:03d}",
                "text": "what about " + " ".join(words),
                "doc_scope": [ws],
                "viewer": viewer,
                "now": now,
            }
        )
    return out


def _edges(notes: list[dict], rng, n: int) -> list[dict]:
    """``n`` random explicit edges, each between two notes of the same document (documents of a
    workspace stay separate graph components unless their names link them)."""
    out = []
    for k in range(n):
        x = notes[int(rng.integers(0, len(notes)))]
        same = [y for y in notes if y["doc_id"] == x["doc_id"] and y is not x]
        if same:
            y = same[int(rng.integers(0, len(same)))]
            out.append(
                {
                    "src": x["node_id"],
                    "dst": y["node_id"],
                    "relation": "related",
                    "weight": 0.5 + k % 3,
                }
            )
    return out


def base(
    seed: int = 26,
    small: int = 12,
    big: int = 9600,
    many: int = 1500,
    big_q: int = 150,
    many_q: int = 360,
) -> dict:
    """{"nodes", "edges", "queries"} as row dicts (see the module docstring)."""
    rng = np.random.default_rng(seed)
    nodes, edges, queries = [], [], []
    shared = [name(i) for i in range(200)]  # big: one pool (each name in ~1.5% of the notes)

    def add(ws, n, per_doc, names, nq, extra=()):
        got = _notes(ws, n, per_doc, names, rng, start=len(nodes))
        nodes.extend(got)
        edges.extend(_edges(got, rng, max(1, n // 10)))
        queries.extend(_queries(ws, nq, got, rng))
        for kw in extra:
            queries.extend(_queries(ws, notes=got, rng=rng, **kw))

    add("tiny", 3, 3, lambda d: shared[:4], 2)
    for w in range(small):
        n = SMALL_SIZES[w % len(SMALL_SIZES)]
        own = [name(1000 + 40 * w + i) for i in range(6)]
        add(f"s{w}", n, 10, lambda d, own=own: own, 1 + w % 3)
    add("many", many, 40, lambda d: [name(5000 + 8 * d + i) for i in range(8)], many_q)
    later = T0 + dt.timedelta(days=400)
    add(
        "big",
        big,
        big,
        lambda d: shared,
        big_q,
        extra=({"n": 19, "viewer": "u1", "tag": "v"}, {"n": 7, "now": later, "tag": "t"}),
    )
    queries.append(
        {
            "query_id": "multi-q000",
            "text": f"what did {shared[1]} say about the garden",
            "doc_scope": ["tiny", "s0", "s1"],
            "viewer": "u1",
            "now": None,
        }
    )
    return {"nodes": nodes, "edges": edges, "queries": queries}


def duplicated(data: dict, share: float = 0.3, seed: int = 45) -> dict:
    """``data`` with ``share`` of each workspace's notes copied (module docstring): each copy has
    the note's text, title, document and visibility under the id ``<id>-c``, its own sequence,
    importance and time, and sits at a random place among the notes; edges and queries as they
    were."""
    rng = np.random.default_rng(seed)
    notes = list(data["nodes"])
    for j in np.flatnonzero(rng.random(len(notes)) < share):
        src = data["nodes"][int(j)]
        copy = {**src, "node_id": src["node_id"] + "-c", "seq": 20_000 + int(j)}
        copy["importance"] = float(rng.uniform(0, 10))
        copy["created_at"] = src["created_at"] + dt.timedelta(minutes=int(rng.integers(1, 600)))
        notes.insert(int(rng.integers(0, len(notes) + 1)), copy)
    return {**data, "nodes": notes}


TEAMS = ("red", "green", "blue")
PAGE = 5  # notes per page of the team variant
LOG_SCHEMA = {
    "session_id": pl.String,
    "turn": pl.Int64,
    "agent_id": pl.String,
    "team": pl.String,
    "slugs": pl.List(pl.String),
}


def pages(data: dict) -> dict[str, list[str]]:
    """Workspace → its page slugs (the stems of its notes' documents), in note order."""
    out: dict[str, dict] = {}
    for n in data["nodes"]:
        ws, doc = n["doc_id"].split("/")
        out.setdefault(ws, {})[doc] = None
    return {ws: list(d) for ws, d in out.items()}


def log_row(team: str, session: int, turn: int, slugs: list[str]) -> dict:
    """One injection-log row of ``team`` (its agent: the session's parity)."""
    return {
        "session_id": f"{team}-s{session:03d}",
        "turn": turn,
        "agent_id": f"{team}-a{session % 2}",
        "team": team,
        "slugs": slugs,
    }


def _session(team: str, k: int, data: dict, rng) -> list[dict]:
    """Session ``k`` of ``team``: 1–3 turns, each injecting 1–4 pages of the workspace of a
    random query."""
    qs = data["queries"]
    own = pages(data)[qs[int(rng.integers(0, len(qs)))]["doc_scope"][0]]
    rows = []
    for turn in range(int(rng.integers(1, 4))):
        pick = rng.choice(len(own), size=min(len(own), int(rng.integers(1, 5))), replace=False)
        rows.append(log_row(team, k, turn, [own[int(i)] for i in sorted(pick)]))
    return rows


def with_teams(data: dict, seed: int = 28, sessions: int = 60) -> dict:
    """``data`` with a team and an agent on every query (the teams in turn) and ``sessions``
    sessions per team in an injection log (module docstring)."""
    rng = np.random.default_rng(seed)
    ws = [n["doc_id"].split("/")[0] for n in data["nodes"]]
    nodes = [{**n, "doc_id": f"{w}/{w}-p{n['seq'] // PAGE}"} for w, n in zip(ws, data["nodes"])]
    data = {**data, "nodes": nodes}
    queries = [
        {**q, "team": TEAMS[j % len(TEAMS)], "agent_id": f"{TEAMS[j % len(TEAMS)]}-a{j % 2}"}
        for j, q in enumerate(data["queries"])
    ]
    log = [r for t in TEAMS for k in range(sessions) for r in _session(t, k, data, rng)]
    return {**data, "queries": queries, "log": log}


def perturb_log(data: dict, teams, rng: np.random.Generator) -> dict:
    """``data`` with the log rows of ``teams`` changed (each: up to 3 of its rows deleted, 1–3 new
    sessions appended) and then the whole log in a random order."""
    log = list(data["log"])
    for t in teams:
        own = [i for i, r in enumerate(log) if r["team"] == t]
        gone = set(rng.choice(own, size=int(rng.integers(0, 4)), replace=False).tolist())
        log = [r for i, r in enumerate(log) if i not in gone]
        for k in range(int(rng.integers(1, 4))):
            log.extend(_session(t, 500 + k, data, rng))
    return {**data, "log": [log[int(i)] for i in rng.permutation(len(log))]}


def edit(data: dict, rng: np.random.Generator) -> dict:
    """One random edit: change a note's text, add a note to a workspace, or delete a note (and its
    edges); with a log (``with_teams``), also append a session turn or delete a log row."""
    nodes, edges = list(data["nodes"]), list(data["edges"])
    kind = rng.choice(["change", "add", "delete", *(["append", "drop"] if "log" in data else [])])
    if kind in ("append", "drop"):
        log = list(data["log"])
        if kind == "append":
            team = TEAMS[int(rng.integers(0, len(TEAMS)))]
            log.extend(_session(team, 900 + len(log), data, rng)[:1])
        else:
            log.pop(int(rng.integers(0, len(log))))
        return {**data, "log": log}
    i = int(rng.integers(0, len(nodes)))
    if kind == "change":
        nodes[i] = {**nodes[i], "text": nodes[i]["text"] + f" and the {WORDS[i % len(WORDS)]}"}
    elif kind == "add":
        new = {**nodes[i], "node_id": nodes[i]["node_id"] + f"-x{len(nodes)}", "seq": 10_000 + i}
        nodes.append({**new, "text": "a new note about " + nodes[i]["text"]})
    else:
        gone = nodes.pop(i)["node_id"]
        edges = [e for e in edges if gone not in (e["src"], e["dst"])]
    return {**data, "nodes": nodes, "edges": edges}


def log_frame(rows: list[dict]) -> pl.DataFrame:
    """Injection-log rows as the ``access_log`` table."""
    return pl.DataFrame(rows, schema=LOG_SCHEMA)


def dataset(data: dict, shuffle: np.random.Generator | None = None) -> Dataset:
    """The tables of ``data``, in the contract (with ``log``: an ``access_log`` table);
    ``shuffle`` permutes the node, query and log rows."""
    nodes = pl.DataFrame(
        data["nodes"],
        schema_overrides={"visibility": pl.List(pl.String), "title": pl.String, "created_at": TS},
    )
    queries = pl.DataFrame(
        data["queries"],
        schema_overrides={"doc_scope": pl.List(pl.String), "viewer": pl.String, "now": TS},
    )
    edges = pl.DataFrame(data["edges"], schema_overrides={"weight": pl.Float32})
    log = log_frame(data["log"]) if "log" in data else None
    if shuffle is not None:
        nodes = nodes[shuffle.permutation(nodes.height)]
        queries = queries[shuffle.permutation(queries.height)]
        log = None if log is None else log[shuffle.permutation(log.height)]
    where = "differential-corpus"
    return Dataset(
        where,
        schema.conform(nodes, "nodes", where),
        schema.conform(queries, "queries", where),
        schema.conform(edges, "edges", where),
        tables={} if log is None else {"access_log": log},
    )
