"""A small multi-scope corpus for the one-answer and sealed-scope properties (tests/system/test_sealed.py):
three conversations of notes sharing capitalised names (entity hubs), titles (anchors), events
(cross recall), private notes with a visibility list, explicit edges with validity windows (some
across scopes), queries per scope, per viewer, with and without ``now``, and over the whole corpus.
Edits are plain tuples so hypothesis can draw them."""

from __future__ import annotations

import datetime as dt

import polars as pl

from pipeline.contract import schema
from pipeline.contract.dataset import Dataset

T0 = dt.datetime(2025, 3, 1, tzinfo=dt.timezone.utc)
NAMES = ["Alice Moreau", "Bruno Keller", "Paris", "Lisbon", "Project Falcon", "Dana Ruiz"]
WORDS = (
    "garden budget train concert recipe hiking invoice piano museum harbor bakery lecture".split()
)
SCOPES = ["a", "b", "c"]


def note(scope: str, i: int, salt: int = 0, private: bool = False) -> dict:
    k = i + salt
    text = (
        f"{NAMES[k % len(NAMES)]} talked about the {WORDS[k % len(WORDS)]} and the "
        f"{WORDS[(3 * k + 1) % len(WORDS)]} with {NAMES[(k + 2) % len(NAMES)]} in {scope}"
    )
    return {
        "node_id": f"{scope}-{'p' if private else 'n'}{i:02d}-{salt}",
        "text": text,
        "title": NAMES[k % len(NAMES)] if i % 3 == 0 else None,
        "doc_id": f"{scope}/s{i // 4}",
        "type": "event" if i % 2 else "fact",
        "seq": i,
        "importance": float(3 + k % 7),
        "created_at": T0
        + dt.timedelta(hours=7 * k + 24 * SCOPES.index(scope[0]) if scope[0] in SCOPES else k),
        "visibility": ["u1"] if private else None,
    }


def base() -> dict:
    """{"nodes": [...], "edges": [...], "queries": [...]} as row dicts."""
    nodes = [note(s, i) for s in SCOPES for i in range(6)] + [note("a", 6, private=True)]
    edges = [
        ("a-n00-0", "a-n01-0", None, None),
        ("a-n01-0", "a-n03-0", T0, T0 + dt.timedelta(days=2)),
        ("b-n00-0", "b-n05-0", T0 + dt.timedelta(days=30), None),
        ("a-n02-0", "b-n02-0", None, None),
        ("c-n01-0", "c-n04-0", None, T0 + dt.timedelta(days=1)),
        ("a-p06-0", "a-n04-0", None, None),
    ]
    queries = []
    for s in SCOPES:
        for j, name in enumerate(NAMES[:2]):
            queries.append(
                {
                    "query_id": f"q-{s}-{j}",
                    "text": f"what did {name} say about the {WORDS[j + 3]}",
                    "doc_scope": [s],
                    "viewer": "u1" if j else None,
                    "now": T0 + dt.timedelta(days=3) if s == "b" and j else None,
                }
            )
    queries.append(
        {
            "query_id": "q-all",
            "text": "Paris concert with Dana Ruiz",
            "doc_scope": None,
            "viewer": None,
            "now": None,
        }
    )
    return {
        "nodes": nodes,
        "edges": [dict(zip(("src", "dst", "valid_from", "valid_to"), e)) for e in edges],
        "queries": queries,
    }


def apply(data: dict, edit: tuple) -> dict:
    """One edit: ("change", i, salt) rewrites node i's text; ("add", scope, salt, private) adds a
    note; ("remove", i) drops node i (and its edges); ("scope", name) adds a scope with two notes
    and one query."""
    nodes, edges, queries = list(data["nodes"]), list(data["edges"]), list(data["queries"])
    kind = edit[0]
    if kind == "change" and nodes:
        i = edit[1] % len(nodes)
        nodes[i] = {
            **nodes[i],
            "text": nodes[i]["text"] + f" and {NAMES[edit[2] % len(NAMES)]} {WORDS[edit[2] % 12]}",
        }
    elif kind == "add":
        scope, salt, private = edit[1], edit[2], edit[3]
        nodes.append(note(scope, 10 + salt, salt + 1, private))
    elif kind == "remove" and len(nodes) > 1:
        gone = nodes.pop(edit[1] % len(nodes))["node_id"]
        edges = [e for e in edges if gone not in (e["src"], e["dst"])]
    elif kind == "scope" and not any(n["doc_id"].startswith(f"{edit[1]}/") for n in nodes):
        nodes += [note(edit[1], i, 5) for i in range(2)]
        queries.append(
            {
                "query_id": f"q-{edit[1]}",
                "text": "Lisbon budget with Alice Moreau",
                "doc_scope": [edit[1]],
                "viewer": None,
                "now": None,
            }
        )
    return {"nodes": nodes, "edges": edges, "queries": queries}


def dataset(data: dict) -> Dataset:
    ts = pl.Datetime("us", "UTC")
    nodes = schema.conform(
        pl.DataFrame(
            data["nodes"],
            schema_overrides={
                "visibility": pl.List(pl.String),
                "title": pl.String,
                "created_at": ts,
            },
        ),
        "nodes",
        "sealed-corpus",
    )
    edges = schema.conform(
        pl.DataFrame(data["edges"], schema_overrides={"valid_from": ts, "valid_to": ts}),
        "edges",
        "sealed-corpus",
    )
    queries = schema.conform(
        pl.DataFrame(
            data["queries"],
            schema_overrides={"doc_scope": pl.List(pl.String), "viewer": pl.String, "now": ts},
        ),
        "queries",
        "sealed-corpus",
    )
    return Dataset("sealed", nodes, queries, edges)
