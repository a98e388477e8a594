"""No preset ever returns a node that the query's viewer may not see, that is archived, or that lies
outside the query's doc_scope — including nodes reached only through graph diffusion."""

import random
import re

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.contract.dataset import Dataset
from pipeline.ops.scope import in_scope
from pipeline.run import runner
from tests.helpers.paths import REPO

PRESETS = sorted(p.stem for p in (REPO / "conf" / "preset").glob("*.yaml"))
WORDS = "memory graph recall cache budget farm alice bob ship deploy night query node edge".split()


def _dataset(seed: int) -> Dataset:
    rng = random.Random(seed)
    n = rng.randint(4, 25)
    nodes = pl.DataFrame(
        {
            "node_id": [f"n{i}" for i in range(n)],
            "text": [" ".join(rng.choices(WORDS, k=rng.randint(1, 8))) for _ in range(n)],
            "doc_id": [rng.choice(["c1/s1", "c1/s2", "c2/s1"]) for _ in range(n)],
            "seq": list(range(n)),
            "visibility": [
                rng.choice([None, None, ["ann"], ["bob"], ["*"], ["ann", "bob"]]) for _ in range(n)
            ],
            "archived": [rng.random() < 0.2 for _ in range(n)],
        }
    )
    m = rng.randint(0, 3 * n)
    edges = pl.DataFrame(
        {
            "src": [f"n{rng.randrange(n)}" for _ in range(m)],
            "dst": [f"n{rng.randrange(n)}" for _ in range(m)],
            "inhibit": [rng.random() < 0.1 for _ in range(m)],
        },
        schema={"src": pl.String, "dst": pl.String, "inhibit": pl.Boolean},
    )
    q = rng.randint(1, 6)
    queries = pl.DataFrame(
        {
            "query_id": [f"q{i}" for i in range(q)],
            "text": [" ".join(rng.choices(WORDS, k=3)) for _ in range(q)],
            "viewer": [rng.choice([None, "ann", "bob"]) for _ in range(q)],
            "doc_scope": [rng.choice([None, ["c1"], ["c2"], ["c1/s2"]]) for _ in range(q)],
        }
    )
    return Dataset("random", nodes, queries, edges)


@pytest.mark.parametrize("preset", PRESETS)
@settings(
    max_examples=5,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    seed=st.integers(0, 10**6),
    diffuse=st.sampled_from(["none", "pedsa", "ppr", "expand"]),
    novelty=st.booleans(),
)
def test_no_invisible_archived_or_out_of_scope_node(
    compose, tmp_path, preset, seed, diffuse, novelty
):
    ds = _dataset(seed)
    extra = (
        [
            "novelty=bme",
            "novelty.require_title=false",
            "novelty.exclude_types=[]",
            "novelty.basis_min=1",
            "novelty.basis_max=2",
            "score.terms.residual=1.0",
        ]
        if novelty and preset not in ("bm25", "oks", "oks_team")  # no dense channel: no novelty
        else []
    )
    cfg = compose(
        [
            f"preset={preset}",
            f"diffuse={diffuse}",
            "embed=hashing",
            "k=10",
            "report=false",
            "inject.format=oks",
            *extra,
        ]
    )
    out = tmp_path / f"{preset}-{seed}-{diffuse}-{novelty}"
    runner.run(cfg, out, dataset=ds)
    if extra:
        nov = pl.read_parquet(out / "novelty.parquet").join(ds.queries, on="query_id")
        nodes = {r["node_id"]: r for r in ds.nodes.iter_rows(named=True)}
        for q in nov.iter_rows(named=True):
            for nid in q["residual_hits"]:
                vis, n = nodes[nid]["visibility"], nodes[nid]
                assert (
                    vis is None or "*" in vis or (q["viewer"] is not None and q["viewer"] in vis)
                ), (q, nid)
                assert not n["archived"] and (
                    q["doc_scope"] is None
                    or in_scope(pl.Series([n["doc_id"]]).to_numpy(), tuple(q["doc_scope"]))[0]
                ), (q, nid)
    rec = (
        pl.read_parquet(out / "recall.parquet")
        .drop("text", "title")  # the node's, joined again from ds.nodes below
        .join(ds.queries, on="query_id")
        .join(ds.nodes, on="node_id")
    )
    inj = pl.read_parquet(out / "injection.parquet")
    for qid, text, ids in inj.select(
        "query_id", "text", "node_ids"
    ).iter_rows():  # the injection text shows recalled nodes only (OKS's hook: by page slug)
        got = rec.filter(pl.col("query_id") == qid)
        assert ids and set(ids) <= set(got["node_id"]), (qid, text)
        slugs = {d.rsplit("/", 1)[-1] for d in got.filter(pl.col("node_id").is_in(ids))["doc_id"]}
        assert set(re.findall(r"\((\S+)\) rel=", text)) == slugs, (qid, text)
    for r in rec.iter_rows(named=True):
        vis = r["visibility"]
        assert vis is None or "*" in vis or (r["viewer"] is not None and r["viewer"] in vis), r
        assert not r["archived"] or cfg.include_archived, r  # preset oks: OKS's fts5 recalls them
        if r["doc_scope"] is not None:
            assert in_scope(pl.Series([r["doc_id"]]).to_numpy(), tuple(r["doc_scope"]))[0], r
