"""Offline replay of a team workload: queries in time order, each query's injection (its top 3)
appended to the injection log before the next query runs; collab off vs on, with 95% intervals.

    python scripts/replay_team.py --workload planted
    python scripts/replay_team.py --workload null
    python scripts/replay_team.py --workload null --noise 3

Workload (seeded): 3 teams, 48 pages each (6 words each from a 600-word team vocabulary), 12
tasks of 4 lexically unrelated pages; 60 sessions per team, each by one of 5 agents, 4 queries per
session. ``planted``: a session works one task, each query names 3 words of one of the task's
pages, relevant = the task's 4 pages (co-use carries signal). ``null``: each query names a random
page of the team, relevant = that page (co-use carries none). Arms (each with its own log):

- ``off``: fts5-style BM25 (the lexical channel) alone;
- ``collab``: BM25 + the collab channel (Swing over sessions), Snake Merge (recall layer);
- ``boost_recall``: BM25 candidates re-ranked by score × (1 + ItemCF + UserCF) in the recall layer;
- ``boost_inject``: recall = BM25 unchanged, the injected top 3 ordered by that boost (A8).

Prints per arm: recall@5 of the recall list and the share of relevant pages among the 3 injected,
each with its bootstrap 95% interval, and the paired difference to ``off``.
"""

from __future__ import annotations

import argparse

import numpy as np
import polars as pl

from pipeline.channels import collab as collab_channel
from pipeline.channels.candidates import generate
from pipeline.ops.scope import scope_groups
from pipeline.report.bootstrap import bootstrap_ci
from pipeline.stages.channels import LexicalParams
from pipeline.stages.fuse import fuse
from pipeline.stages.inject_team import cf_boosts

TEAMS, PAGES, TASK, SESSIONS, AGENTS, PER_SESSION, VOCAB = 3, 48, 4, 60, 5, 4, 600


def workload(kind: str, seed: int = 0, noise: int = 0) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """(nodes, queries in time order, {query_id: relevant slugs}); ``noise`` random team words
    are added to each query (so BM25 alone is not at its ceiling)."""
    g = np.random.default_rng(seed)
    nodes, queries, rel = [], [], {}
    words = {}
    for t in range(TEAMS):
        for p in range(PAGES):
            words[t, p] = [f"t{t}w{w}" for w in g.choice(VOCAB, 6, replace=False)]
            nodes.append((f"t{t}/p{p}", f"t{t}/p{p}.md", " ".join(words[t, p])))
    now = 0
    for s in range(SESSIONS):
        for t in range(TEAMS):
            agent, task = f"a{g.integers(AGENTS)}", int(g.integers(PAGES // TASK))
            pages = g.permutation(TASK)[:PER_SESSION] + task * TASK
            for k in range(PER_SESSION):
                p = int(pages[k]) if kind == "planted" else int(g.integers(PAGES))
                qid = f"t{t}s{s}q{k}"
                extra = [f"t{t}w{w}" for w in g.choice(VOCAB, noise, replace=False)]
                text = " ".join([*g.choice(words[t, p], 3, replace=False), *extra])
                queries.append((qid, text, f"t{t}", [f"t{t}"], agent, f"t{t}s{s}", now))
                now += 1
                task_pages = range(task * TASK, task * TASK + TASK)
                rel[qid] = {f"p{x}" for x in task_pages} if kind == "planted" else {f"p{p}"}
    n = pl.DataFrame(nodes, schema=["node_id", "doc_id", "text"], orient="row")
    q = pl.DataFrame(
        queries,
        schema=["query_id", "text", "team", "doc_scope", "agent_id", "group", "now"],
        orient="row",
    )
    return n, q, rel


LOG_SCHEMA = {
    "team": pl.String,
    "agent_id": pl.String,
    "session_id": pl.String,
    "turn": pl.Int64,
    "slugs": pl.List(pl.String),
}


def replay(arm: str, nodes, queries, first, parts, slug) -> list[tuple[list, list]]:
    """Per query (time order): (its recall list of slugs, its injected slugs)."""
    cp = collab_channel.CollabParams.defaults()
    log = pl.DataFrame(schema=LOG_SCHEMA)
    out = []
    by_q = first.partition_by("query_idx", as_dict=True)
    for qi, row in enumerate(queries.iter_rows(named=True)):
        cand = by_q.get((qi,), first.clear()).with_columns(collab=pl.lit(0.0))
        if arm == "collab" and log.height:
            extra = collab_channel.candidates(cand.drop("collab"), nodes, queries, parts, log, cp)
            cand = cand.drop("collab").join(
                extra, on=["query_idx", "node_idx"], how="full", coalesce=True
            )
            cand = cand.with_columns(pl.col("collab").fill_null(0.0))
            cand = fuse(cand, ["lexical", "collab"], "snake", top_n=10, order=["lexical", "collab"])
            key = "fused"
        else:
            key = "lexical"
        cand = cand.with_columns(slug=pl.Series(slug[cand["node_idx"].to_numpy()], dtype=pl.String))
        if arm.startswith("boost") and log.height and cand.height:
            ib, ub = cf_boosts(log, cand.with_columns(query_id=pl.lit(row["query_id"])), queries)
            cand = cand.with_columns(boost=pl.col("lexical") * (1 + pl.Series(ib) + pl.Series(ub)))
        else:
            cand = cand.with_columns(boost=pl.col(key).cast(pl.Float64))
        rank_key = "boost" if arm == "boost_recall" else key
        ranked = cand.sort([rank_key, "node_idx"], descending=[True, False])["slug"].to_list()[:5]
        pool = cand.sort([key, "node_idx"], descending=[True, False]).head(10)
        inject_key = "boost" if arm == "boost_inject" else rank_key
        injected = pool.sort([inject_key, "node_idx"], descending=[True, False])["slug"].to_list()[
            :3
        ]
        if arm == "boost_recall":
            injected = ranked[:3]
        out.append((ranked, injected))
        new = {
            "team": [row["team"]],
            "agent_id": [row["agent_id"]],
            "session_id": [row["group"]],
            "turn": [row["now"]],
            "slugs": [injected],
        }
        log = pl.concat([log, pl.DataFrame(new, schema=LOG_SCHEMA)])
    return out


def main() -> None:
    """Run every arm on the chosen workload and print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=["planted", "null"], default="planted")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--noise", type=int, default=0, help="random team words added to each query")
    args = ap.parse_args()
    nodes, queries, rel = workload(args.workload, args.seed, args.noise)
    lex = LexicalParams.defaults(stopwords=None, candidates=10)
    first = generate(nodes, queries, ["lexical"], None, None, None, lex)
    parts = scope_groups(nodes, queries)
    slug = np.array(collab_channel.slugs(nodes), dtype=object)
    qids = queries["query_id"].to_list()
    rows = {}
    for arm in ("off", "collab", "boost_recall", "boost_inject"):
        got = replay(arm, nodes, queries, first, parts, slug)
        r5 = np.array([len(set(r) & rel[q]) / len(rel[q]) for q, (r, _) in zip(qids, got)])
        inj = np.array([len(set(i) & rel[q]) / 3 for q, (_, i) in zip(qids, got)])
        rows[arm] = (r5, inj)
    print(f"workload={args.workload} seed={args.seed} noise={args.noise} queries={len(qids)}")
    print(
        "| arm | recall@5 [95%] | Δ vs off [95%] | injected relevant share [95%] | Δ vs off [95%] |"
    )
    print("|---|---|---|---|---|")
    for arm, (r5, inj) in rows.items():
        cells = []
        for vals, base in ((r5, rows["off"][0]), (inj, rows["off"][1])):
            ci, d = bootstrap_ci(vals), bootstrap_ci(vals - base)
            cells += [
                f"{ci.mean:.3f} [{ci.low:.3f}, {ci.high:.3f}]",
                f"{d.mean:+.3f} [{d.low:+.3f}, {d.high:+.3f}]",
            ]
        print(f"| {arm} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
