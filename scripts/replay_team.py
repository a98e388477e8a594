"""Offline replay of a team workload: queries in time order, each query's injection (its top 3)
appended to the injection log before the next query runs; collab off vs on, with 95% intervals.

    python scripts/replay_team.py --workload planted
    python scripts/replay_team.py --workload null
    python scripts/replay_team.py --workload null --noise 3
    python scripts/replay_team.py --workload locomo [--locomo PATH]

Workload (seeded): 3 teams, 48 pages each (6 words each from a 600-word team vocabulary), 12
tasks of 4 lexically unrelated pages; 60 sessions per team, each by one of 5 agents, 4 queries per
session. ``planted``: a session works one task, each query names 3 words of one of the task's
pages, relevant = the task's 4 pages (co-use carries signal). ``null``: each query names a random
page of the team, relevant = that page (co-use carries none).

``locomo`` (:func:`locomo_teams`): LoCoMo conversations read as teams, through the LoCoMo adapter
(default ``$RECALL_DATA_DIR/locomo/locomo_dev5.json.gz``, the 5 conversations stored here). Each
conversation is a team; its dialog turns (the adapter's nodes) are the team's pages, slug = the
turn's ``dia_id``; its two speakers are the agents. Its QA questions are the queries, in time
order: by the session of the question's latest evidence turn (largest ``seq``), ties by the
adapter's question order (conversation, then ``qa`` index). A query's agent is the speaker of
most of its evidence turns, a tie going to the speaker of the latest evidence turn (so the rule
reads only the qrels, never the question's wording); its relevant pages are its evidence turns;
its log session is ``<conversation>/session_<n>`` of that latest evidence turn. Questions whose
evidence names no turn of the conversation are left out (counted in the header line). Every turn
stays visible to every query (as in ``data=locomo``); the order shapes only the log. The BM25
channel uses ``preset=oks``'s lexical settings (fts5) there, and 10 candidates.

Arms (each with its own log):

- ``off``: fts5-style BM25 (the lexical channel) alone;
- ``collab``: BM25 + the collab channel (Swing over sessions), Snake Merge (recall layer);
- ``boost_recall``: BM25 candidates re-ranked by score × (1 + ItemCF + UserCF) in the recall layer;
- ``boost_inject``: recall = BM25 unchanged, the injected top 3 ordered by that boost (A8).

Prints per arm: recall@5 of the recall list and the share of relevant pages among the 3 injected,
each with its bootstrap 95% interval, and the paired difference to ``off``.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import polars as pl

from pipeline.adapters import locomo
from pipeline.channels import collab as collab_channel
from pipeline.channels.candidates import ChannelSettings, generate
from pipeline.contract.dataset import Dataset
from pipeline.core.stage import group_yaml
from pipeline.inject.team import cf_boosts
from pipeline.ops.scope import scope_groups
from pipeline.report.bootstrap import bootstrap_ci
from pipeline.stages.channels import LexicalParams
from pipeline.stages.fuse import fuse

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


def locomo_teams(ds: Dataset) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """(nodes, queries in time order, {query_id: relevant slugs}) of a LoCoMo dataset (the
    adapter's tables) read as teams, by the rules of the module docstring."""
    team = pl.col("doc_id").str.split("/").list.first()
    nodes = ds.nodes.with_columns(
        team=team,
        session=pl.col("doc_id").str.extract(r"session_(\d+)$").cast(pl.Int64),
        dia=pl.col("node_id").str.slice(team.str.len_chars() + 1),
    )
    ev = ds.qrels.join(
        nodes.select("node_id", "speaker", "seq", "session", "dia"), on="node_id", how="inner"
    )
    agent = (
        ev.group_by("query_id", "speaker")
        .agg(n=pl.len(), last=pl.col("seq").max())
        .sort(["query_id", "n", "last"], descending=[False, True, True])
        .unique("query_id", keep="first")
        .select("query_id", agent_id="speaker")
    )
    when = ev.group_by("query_id").agg(
        session=pl.col("session").sort_by("seq").last(), rel=pl.col("dia").unique()
    )
    q = (
        ds.queries.with_row_index("_pos")
        .with_columns(team=pl.col("doc_scope").list.first())
        .join(when, on="query_id", how="inner")
        .join(agent, on="query_id", how="inner")
        .sort("session", "_pos")
    )
    queries = q.select(
        "query_id",
        "text",
        "team",
        doc_scope=pl.concat_list("team"),
        agent_id="agent_id",
        group=pl.format("{}/session_{}", "team", "session"),
        now=pl.int_range(pl.len(), dtype=pl.Int64),
    )
    rel = {k: set(v) for k, v in zip(q["query_id"].to_list(), q["rel"].to_list())}
    out = nodes.select("node_id", doc_id=pl.format("{}/{}", "team", "dia"), text="text")
    return out, queries, rel


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
    ap.add_argument("--workload", choices=["planted", "null", "locomo"], default="planted")
    ap.add_argument(
        "--locomo",
        default=os.path.join(
            os.environ.get("RECALL_DATA_DIR", "../shared/data"), "locomo", "locomo_dev5.json.gz"
        ),
        help="LoCoMo file (--workload locomo)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--noise", type=int, default=0, help="random team words added to each query")
    args = ap.parse_args()
    if args.workload == "locomo":
        ds = locomo.load(args.locomo)
        nodes, queries, rel = locomo_teams(ds)
        lex = LexicalParams.defaults(**{**group_yaml("preset", "oks")["lexical"], "candidates": 10})
        left_out = f" (of {ds.queries.height}; without evidence turns left out)"
    else:
        nodes, queries, rel = workload(args.workload, args.seed, args.noise)
        lex = LexicalParams.defaults(stopwords=None, candidates=10)
        left_out = ""
    first = generate(nodes, queries, ChannelSettings(("lexical",), lexical=lex))
    parts = scope_groups(nodes, queries)
    slug = np.array(collab_channel.slugs(nodes), dtype=object)
    qids = queries["query_id"].to_list()
    rows = {}
    for arm in ("off", "collab", "boost_recall", "boost_inject"):
        got = replay(arm, nodes, queries, first, parts, slug)
        r5 = np.array([len(set(r) & rel[q]) / len(rel[q]) for q, (r, _) in zip(qids, got)])
        inj = np.array([len(set(i) & rel[q]) / 3 for q, (_, i) in zip(qids, got)])
        rows[arm] = (r5, inj)
    print(
        f"workload={args.workload} seed={args.seed} noise={args.noise} "
        f"queries={len(qids)}{left_out} pages={nodes.height}"
    )
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
