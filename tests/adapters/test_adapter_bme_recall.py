"""``preset=bme data=bme`` on a ten-node ST-BME export with a knowledge gate and a summary
hierarchy: what is recalled, with which weights, and what is injected, all written out by hand
from ST-BME @ 590da3b6 (``retrieval/retriever.js::retrieve`` scoring loop,
``graph/knowledge-state.js::computeKnowledgeGateForSingleOwner``,
``retrieval/retriever.js::buildScopedInjectionBuckets``).

Every node is created at ``now`` (time decay 1), importance 5 (term 0.5), undated (story 0.88), no
active region (objective nodes are global: 0.75, gate threshold 0.56). Vectors: the hashing
embedder on each node's text (its one field word), so the query "apple" has cosine 1 with an
"apple" node and 0 with the others. Owner ``character:aria`` (no nodeId) is active (char_name Aria).

    n0 event "apple"   known                     → anchored, knowledge 1.18
    n1 event "plum"    visibility 0.6, edge n0─n1 → diffusion only: soft-visible, 0.55 + 0.6·0.6 = 0.91
                                                 (with vector 1 it would be rescued: 0.92)
    n2 event "apple"   no entry                  → vector 1 ≥ 0.82: rescued, 0.92
    n3 event "grape"   no entry, edge n0─n3 0.5  → diffusion only (0.51), 0 < 0.56: suppressed
    n4 event "kiwi"    known, edge n0─n4 0.5     → diffusion only (0.51), anchored 1.18
    n5 synopsis "pear" (level 1, childIds [n6]), known
    n6 event "apple"   child of n5, archived     → never recalled nor injected
    n7 event "apple"   mistaken (objective)      → dropped
    n8 event "apple"   manual-hidden             → dropped
    n9 pov_memory "apple" (Aria's POV)           → own POV: anchored 1.18, characterPov 1.25

PEDSA: anchors n0 n2 n7 n8 (title "apple" in the text) seed 2.0; n1, n3 and n4 get
2.0·0.5·0.6·(1 − 0.15) = 0.51; n9 keeps its vector seed 1.0. Hybrid = (0.6·clip(g/2) + 0.3·v +
0.18·lexical + 0.1·0.5) / 1.18: n0, n2 (1, 1, lexical 1): 1.13/1.18; n1, n4: (0.6·0.255 + 0.05)/1.18;
n9 (g 0.5, v 1, lexical = 0.82·0.82 from the summary's exact match): (0.3 + 0.3 + 0.18·0.6724 +
0.05)/1.18.
"""

from __future__ import annotations

import json

import polars as pl
import pytest

from pipeline.adapters import bme
from pipeline.run import runner
from tests.adapters.test_adapter_bme import T0, edge, node, scope

HYB = 1.13 / 1.18
HYB_N4 = (0.6 * 0.255 + 0.05) / 1.18
HYB_N9 = (0.3 + 0.3 + 0.18 * 0.82 * 0.82 + 0.05) / 1.18
GLOBAL, UNDATED = 0.75, 0.88


def ten_node_graph() -> dict:
    """The graph of the module docstring, in exportGraph's layout."""
    word = ["apple", "plum", "apple", "grape", "kiwi", "pear", "apple", "apple", "apple"]
    nodes = [node(f"n{i}", "event", {"title": w}, i, createdTime=T0) for i, w in enumerate(word)]
    nodes[5].update(type="synopsis", level=1, childIds=["n6"], seqRange=[0, 9])
    nodes[6].update(parentId="n5", archived=True)
    nodes.append(
        node("n9", "pov_memory", {"summary": "apple"}, 9, createdTime=T0,
             scope=scope("pov", "character", "Aria"))
    )  # fmt: skip
    owner = {
        "ownerType": "character", "ownerKey": "character:aria", "ownerName": "Aria", "nodeId": "",
        "aliases": ["Aria"], "knownNodeIds": ["n0", "n4", "n5"], "mistakenNodeIds": ["n7"],
        "visibilityScores": {"n1": 0.6}, "manualKnownNodeIds": [], "manualHiddenNodeIds": ["n8"],
        "updatedAt": T0, "lastSource": "extract",
    }  # fmt: skip
    return {
        "version": 9,
        "nodes": nodes,
        "edges": [
            edge("e1", "n0", "n3", strength=0.5),
            edge("e2", "n4", "n0", strength=0.5),
            edge("e3", "n0", "n1", strength=0.5),
        ],
        "knowledgeState": {"version": 1, "owners": {"character:aria": owner}},
        "timelineState": {"version": 1, "segments": [], "manualActiveSegmentId": ""},
        "summaryState": {"version": 1, "enabled": True, "entries": []},
    }


@pytest.fixture
def run_dir(compose, tmp_path):
    """One ``preset=bme data=bme`` run (hashing vectors) with ``inject.format=bme``; cross recall
    off (the preset's default is BME's, on), so the PEDSA seeds are the ones written out above."""
    g = tmp_path / "st-bme-graph.json"
    g.write_text(json.dumps(ten_node_graph()), encoding="utf-8")
    q = tmp_path / "queries.jsonl"
    q.write_text(json.dumps({"query_id": "q", "text": "apple", "char_name": "Aria", "now": T0}))
    ds = bme.load(str(g), queries=str(q))
    cfg = compose(
        ["preset=bme", "embed=hashing", "k=10", "report=false", "inject.format=bme"]
        + ["cross_recall.enabled=false"]
    )
    runner.run(cfg, tmp_path / "run", dataset=ds)
    return tmp_path / "run"


def test_recall_order_weights_and_gate(run_dir):
    rec = pl.read_parquet(run_dir / "recall.parquet").sort("rank")
    assert rec["node_id"].to_list() == ["n9", "n0", "n2", "n4", "n1"]  # characterPov first
    got = {r["node_id"]: r for r in rec.iter_rows(named=True)}
    want = {
        "n9": HYB_N9 * 1.25 * UNDATED * 1.18,
        "n0": HYB * GLOBAL * UNDATED * 1.18,
        "n2": HYB * GLOBAL * UNDATED * 0.92,
        "n1": HYB_N4 * GLOBAL * UNDATED * 0.91,
        "n4": HYB_N4 * GLOBAL * UNDATED * 1.18,
    }
    for nid, score in want.items():
        assert got[nid]["score"] == pytest.approx(score, rel=1e-5), nid
    assert got["n4"]["graph"] == pytest.approx(0.51, rel=1e-5)
    assert got["n1"]["graph"] == pytest.approx(0.51, rel=1e-5)
    assert {n: got[n]["bme_knowledge"] for n in want} == pytest.approx(
        {"n9": 1.18, "n0": 1.18, "n2": 0.92, "n1": 0.91, "n4": 1.18}
    )
    assert all(got[n]["bme_owner_coverage"] == 1.0 for n in want)


def test_injection_gates_objective_core_nodes(run_dir):
    inj = pl.read_parquet(run_dir / "injection.parquet")
    (row,) = inj.iter_rows(named=True)
    text = row["text"]
    assert "[Memory - Character POV: Aria]" in text and "[Memory - Objective / Global]" in text
    pov, glob = text.split("[Memory - Objective / Global]")
    assert "| apple |" in pov  # n9's summary
    # global: the visible core (n5 synopsis, n4, n1, n0: seq 9, 4, 1, 0) and nothing gated:
    # n2 is recalled but the injection gate has no vector evidence to rescue it (score 0 < 0.56);
    # n3 suppressed, n7 mistaken, n8 hidden, n6 archived
    shown = [n for n in row["node_ids"] if n != "n9"]
    assert shown == ["n5", "n4", "n1", "n0"]
    assert glob.count("| apple |") == 1 and "| kiwi |" in glob and "| pear |" in glob
    assert "| plum |" in glob
