"""Many small workspaces: W users, each with ``notes`` notes of its own and ``queries`` queries scoped
to it (issue #16's nightly-precompute shape).

Workspace ``k`` owns documents ``u<k>/d<j>`` (``per_doc`` notes each), so ``doc_scope: ["u<k>"]``
covers exactly its notes. A note has a name (``title``: a person, a place or a project, drawn from a
shared pool so names repeat across workspaces and entity hubs are non-trivial inside one), a text that
mentions its own name and the next note's, and an explicit ``next`` edge to the next note of the same
workspace (a chain). Queries ask about one of the workspace's names. ``make`` is deterministic per
seed; ``write`` stores the tables as the Parquet folder ``data=parquet`` reads.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import polars as pl

from pipeline.contract import io, schema
from pipeline.contract.dataset import Dataset

T0 = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
FIRST = [
    "Alice",
    "Bruno",
    "Chen",
    "Dana",
    "Emil",
    "Farah",
    "Goran",
    "Hana",
    "Ivo",
    "Jun",
    "Kira",
    "Luis",
]
LAST = ["Moreau", "Keller", "Ruiz", "Novak", "Sato", "Okafor", "Berg", "Silva"]
PLACES = ["Paris", "Lisbon", "Oslo", "Kyoto", "Lagos", "Quito", "Tunis", "Riga", "Perth", "Hanoi"]
WORDS = (
    "garden budget train concert recipe hiking invoice piano museum harbor bakery lecture "
    "contract dentist flight birthday meeting report laptop bicycle"
).split()


def _names(rng: np.random.Generator, n: int) -> np.ndarray:
    people = [f"{f} {l}" for f in FIRST for l in LAST]
    pool = np.array(people + PLACES + [f"Project {p}" for p in PLACES])
    return pool[rng.integers(0, len(pool), n)]


def make(
    workspaces: int, notes: int = 40, queries: int = 5, *, per_doc: int = 8, seed: int = 16
) -> Dataset:
    """A Dataset of ``workspaces`` × ``notes`` nodes, a ``next`` chain per workspace and
    ``workspaces`` × ``queries`` queries, each scoped to its own workspace."""
    rng = np.random.default_rng(seed)
    n = workspaces * notes
    ws, i = np.divmod(np.arange(n), notes)
    names = _names(rng, n)
    nxt = np.where(i + 1 < notes, np.arange(n) + 1, np.arange(n))  # the last note mentions itself
    w = np.array(WORDS)[rng.integers(0, len(WORDS), (n, 2))]
    texts = [
        f"{names[k]} and the {w[k, 0]}: talked about the {w[k, 1]} with {names[nxt[k]]}"
        for k in range(n)
    ]
    node_id = np.char.add(np.char.add(np.char.add("u", ws.astype(str)), "-n"), i.astype(str))
    nodes = pl.DataFrame(
        {
            "node_id": node_id,
            "text": texts,
            "title": names,
            "doc_id": np.char.add(
                np.char.add(np.char.add("u", ws.astype(str)), "/d"), (i // per_doc).astype(str)
            ),
            "type": np.where(i % 2 == 0, "fact", "event"),
            "seq": i.astype(np.int64),
            "importance": rng.uniform(1, 10, n).astype(np.float32),
            "created_at": [T0 + dt.timedelta(hours=int(h)) for h in ws * 24 * 7 + i * 3],
        }
    )
    chain = i + 1 < notes
    edges = pl.DataFrame(
        {
            "src": node_id[chain],
            "dst": node_id[np.flatnonzero(chain) + 1],
            "relation": "next",
            "weight": np.ones(int(chain.sum()), np.float32),
        }
    )
    qw = np.repeat(np.arange(workspaces), queries)
    about = names[qw * notes + rng.integers(0, notes, len(qw))]
    topic = np.array(WORDS)[rng.integers(0, len(WORDS), len(qw))]
    qs = pl.DataFrame(
        {
            "query_id": [f"u{k}-q{j}" for k in range(workspaces) for j in range(queries)],
            "text": [f"what did {a} say about the {t}" for a, t in zip(about, topic)],
            "doc_scope": [[f"u{k}"] for k in qw],
        },
        schema_overrides={"doc_scope": pl.List(pl.String)},
    )
    where = f"synth-workspaces-{workspaces}"
    return Dataset(
        where,
        schema.conform(nodes, "nodes", where),
        schema.conform(qs, "queries", where),
        schema.conform(edges, "edges", where),
    )


def write(ds: Dataset, path: str | Path) -> Path:
    """The dataset as nodes/edges/queries.parquet under ``path`` (``data=parquet data.path=<path>``)."""
    root = Path(path)
    root.mkdir(parents=True, exist_ok=True)
    for name, frame in (("nodes", ds.nodes), ("edges", ds.edges), ("queries", ds.queries)):
        io.write_parquet(root / f"{name}.parquet", frame)
    return root
