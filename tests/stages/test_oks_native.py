"""OKS's native and fusion search backends (``preset=oks`` on an instance whose
``settings/recall.yaml`` selects them), worked out by hand from OKS's formulas
(open-agent-power/open-knowledge-studio @ 6a281b47: ``recall.py::_compute_relevance_components``,
``estimate_idf``, ``compute_term_overlap``, ``store.py::compute_score``, ``search/fusion.py``).
``scripts/parity/parity.py oks`` compares the same code with OKS's own on larger instances."""

import json
import math
from pathlib import Path

import polars as pl
import pytest

from pipeline.adapters import oks_settings
from pipeline.run import runner
from pipeline.stages import oks_backend

PAGES = {
    # slug: (folder, front matter, body)
    "a": ("ops", "title: Cache tips\ntype: strategy\narea: ops\nimportance: 0.5\ncreated: '2026-01-01'",
          "cache eviction policy"),
    "b": ("ops", "title: Overview\ntype: concept\nimportance: 1.0\ncreated: '2026-01-11'\n"
          "review:\n  decision_correct: false", "cache basics"),
    "c": ("ops", "title: Queue\ntype: anti-pattern\narchived: true\ncreated: '2026-01-05'",
          "cache queue"),
    "d": ("ops", "title: Deploy\ntype: concept\ncreated: '2026-01-11'", "deploy steps"),
    # equal relevance: OKS orders them by slug (aaa first), the node order is zzz first (a/ < z/)
    "aaa": ("z", "title: Policy notes\ntype: concept\nimportance: 0.5\ncreated: '2026-01-11'",
            "policy"),
    "zzz": ("a", "title: Policy notes\ntype: concept\nimportance: 0.5\ncreated: '2026-01-11'",
            "policy"),
}  # fmt: skip
GOAL = "---\ntitle: G\ntype: goal\nstatus: active\ndomains: [ops]\nkeywords: [eviction]\n---\n"

# Query "cache policy": OKS's tokens {cache, policy}. N = 6 pages (the archived c counts in the
# IDF), df(cache) = 3 (a, b, c), df(policy) = 3 (a, aaa, zzz): both idf = ln(7/4) + 1.
IDF = math.log(7 / 4) + 1
# a: overlap 2 (×0.3), idf_overlap 1, title term "cache" (0.3); strategy ×0.8; memory: importance
#    0.5, λ 0.014, 10 days before the reference time 2026-01-11 (the newest created), active ×1.2,
#    added ×0.5; goal area ops +0.8, goal keyword "eviction" +0.4.
A = (2 * 0.3 + 1.0 + 0.3) * 0.8 + 0.5 * (0.5 * math.exp(-0.014 * 10) * 1.2) + 0.8 + 0.4
# b: overlap 1, idf_overlap IDF/(2·IDF) = 0.5, no title term; concept ×0.6, generic title "Overview"
#    ×0.5; review decision_correct false +2.0; memory 1.0 × 1.2 (concept: no decay) × 0.5.
B = (1 * 0.3 + 0.5) * 0.6 * 0.5 + 2.0 + 0.5 * 1.2
# aaa, zzz: overlap 1, idf_overlap 0.5, title term "policy" 0.3; concept ×0.6; memory 0.5·1.2·0.5.
E = (1 * 0.3 + 0.5 + 0.3) * 0.6 + 0.5 * (0.5 * 1.2)
# c is archived, d matches nothing: neither is a hit.


def _instance(root: Path, backend: str | None) -> Path:
    for slug, (folder, meta, body) in PAGES.items():
        (root / "wiki" / folder).mkdir(parents=True, exist_ok=True)
        (root / "wiki" / folder / f"{slug}.md").write_text(f"---\n{meta}\n---\n\n{body}\n")
    (root / "profiles" / "goals").mkdir(parents=True)
    (root / "profiles" / "goals" / "g.md").write_text(GOAL)
    (root / "settings").mkdir()
    key = "" if backend is None else f"search_backend: {backend}\n"
    (root / "settings" / "recall.yaml").write_text("recall: {floor: 0.7}\n" + key)
    (root / "q.jsonl").write_text(json.dumps({"query_id": "q", "text": "Cache policy"}) + "\n")
    return root


def _run(compose, root: Path, out: Path, extra=()) -> pl.DataFrame:
    over = ["data=oks", f"data.path={root}", f"data.queries={root / 'q.jsonl'}", "preset=oks"]
    # OKS reads the memory curve at the wall clock (preset oks: default_now=start); the hand
    # values are worked out at the newest page's date, pinned here
    over.append("default_now=2026-01-11")
    runner.run(compose([*over, "report=false", *extra]), out)
    return pl.read_parquet(out / "recall.parquet").sort("rank")


@pytest.mark.parametrize("backend", ["native", "legacy", None])
def test_native_relevance_by_hand(compose, tmp_path, backend):
    """Every factor of the 6+1 scorer, the archived filter, IDF over every page and the slug
    order of equal scores; ``legacy`` and a missing key are native too."""
    rec = _run(compose, _instance(tmp_path / "i", backend), tmp_path / "run")
    assert [Path(d).stem for d in rec["doc_id"]] == ["a", "b", "aaa", "zzz"]
    assert rec["score"].to_list() == pytest.approx([A, B, E, E], rel=1e-12)
    assert rec["node_id"].n_unique() == 4  # one row a page
    man = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert not any("search_backend" in f for f in man["fallbacks"])


def test_goals_none_removes_the_goal_boosts(compose, tmp_path):
    """``data.goals=none`` (``oks recall --goal none``): a loses its 0.8 + 0.4."""
    rec = _run(compose, _instance(tmp_path / "i", "native"), tmp_path / "run", ["data.goals=none"])
    assert rec["score"].to_list() == pytest.approx([B, A - 1.2, E, E], rel=1e-12)


def test_fusion_end_to_end(compose, tmp_path):
    """fusion: fts5's pages (a, b, c, aaa, zzz: c is archived but fts5 finds it) each
    0.7·fts5/max + 0.3·native/max, native rounded to 3 places as OKS hands it over."""
    root = _instance(tmp_path / "i", "fusion")
    rec = _run(compose, root, tmp_path / "run")
    fts = _run(compose, root, tmp_path / "fts", ["oks_backend.search_backend=fts5"])
    f = dict(fts.group_by("doc_id").agg(pl.col("lexical").max()).iter_rows())
    n = {"ops/a.md": round(A, 3), "ops/b.md": round(B, 3), "z/aaa.md": 0.96, "a/zzz.md": 0.96}
    want = {d: 0.7 * f[d] / max(f.values()) + 0.3 * n.get(d, 0) / round(A, 3) for d in f}
    assert set(f) == {"ops/a.md", "ops/b.md", "ops/c.md", "z/aaa.md", "a/zzz.md"}
    got = dict(rec.select("doc_id", "score").iter_rows())
    assert got == pytest.approx(want, rel=1e-6)
    assert rec["score"].to_list() == sorted(got.values(), reverse=True)


def test_fusion_arithmetic_and_ties_by_hand():
    """``FusionBackend.search`` on given lists: f 4, 2, 2 (fts5 order A, B, C); native B 3.14159
    (→ 3.142) and D (not in fts5's list: ignored). A 0.7·4/4 = 0.7; B 0.7·2/4 + 0.3 = 0.65;
    C 0.35. Equal fused scores keep fts5's order (``tie``). A query fts5 finds nothing for gets
    native's top k, rounded."""
    fts = pl.DataFrame(
        {
            "query_idx": [0, 0, 0],
            "node_idx": [10, 20, 30],
            "lexical": [4.0, 2.0, 2.0],
            "lexical_rank": [1, 2, 3],
            "fts5_pos": [0, 1, 2],
            "_doc": [1, 2, 3],
        },
        schema_overrides={"lexical": pl.Float32},
    )
    nat = pl.DataFrame(
        {"query_idx": [0, 0, 1, 1], "node_idx": [20, 40, 20, 40], "_doc": [2, 4, 2, 4]}
    ).with_columns(relevance=pl.Series([3.14159, 1.0, 2.0004, 1.0]))
    out = oks_backend.fusion(fts, nat, k=2)
    q0 = out.filter(pl.col("query_idx") == 0)
    assert q0["node_idx"].to_list() == [10, 20]
    assert q0["fused"].to_list() == pytest.approx([0.7, 0.35 + 0.3])
    q1 = out.filter(pl.col("query_idx") == 1)
    assert q1["node_idx"].to_list() == [20, 40] and q1["fused"].to_list() == [2.0, 1.0]
    same = fts.with_columns(lexical=pl.lit(2.0, pl.Float32))
    tied = oks_backend.fusion(same, nat.filter(pl.col("query_idx") == 9), k=3)
    assert tied["fused"].to_list() == pytest.approx([0.7] * 3)
    assert tied["tie"].to_list() == [0, 1, 2] and tied["node_idx"].to_list() == [10, 20, 30]


def test_backend_from_settings():
    """``settings``: the instance's search_backend, OKS's code default native without the key,
    legacy = native; fts5 for data that is not an OKS instance and for a connector's backend
    (with a fallbacks line); an explicit choice wins."""
    assert oks_backend.resolve("settings", {"search_backend": "native"}) == "native"
    assert oks_backend.resolve("settings", {"inject_per_page_chars": 200}) == "native"
    assert oks_backend.resolve("settings", {"search_backend": "legacy"}) == "native"
    assert oks_backend.resolve("settings", {"search_backend": "fusion"}) == "fusion"
    assert oks_backend.resolve("settings", {"search_backend": "embedding"}) == "fts5"
    assert oks_backend.resolve("settings", {}) == "fts5"
    assert oks_backend.resolve("fusion", {"search_backend": "fts5"}) == "fusion"
    assert oks_settings.backend_note({"search_backend": "embedding"}, "fts5")
    for b in ("fts5", "native", "legacy", "fusion"):
        assert oks_settings.backend_note({"search_backend": b}, "fts5") is None


def test_settings_file_missing_is_native(compose, tmp_path):
    """No settings/recall.yaml at all: OKS's code default, native."""
    root = _instance(tmp_path / "i", "native")
    (root / "settings" / "recall.yaml").unlink()
    rec = _run(compose, root, tmp_path / "run")
    assert rec["score"].to_list() == pytest.approx([A, B, E, E], rel=1e-12)


def test_an_edit_outside_the_scope_changes_nothing(compose, tmp_path):
    """Sealed scopes: a query scoped to ``ops`` keeps its scores when a page under ``z`` gains the
    query's words (which would change df, N and the ranking of an unscoped query)."""
    root = _instance(tmp_path / "i", "native")
    lines = [
        {"query_id": "scoped", "text": "Cache policy", "doc_scope": ["ops"]},
        {"query_id": "all", "text": "Cache policy"},
    ]
    (root / "q.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    before = _run(compose, root, tmp_path / "r1")
    (root / "wiki" / "z" / "aaa.md").write_text(
        "---\ntitle: Cache policy\ntype: concept\ncreated: '2026-01-11'\n---\n\ncache policy\n"
    )
    after = _run(compose, root, tmp_path / "r2")
    scoped = lambda r: r.filter(pl.col("query_id") == "scoped").select("node_id", "score")  # noqa: E731
    assert scoped(after).equals(scoped(before))
    assert not after.filter(pl.col("query_id") == "all")["score"].equals(
        before.filter(pl.col("query_id") == "all")["score"]
    )


def test_packed_groups_give_each_group_its_own_answer(compose, tmp_path):
    """Queries with disjoint scopes run as one pack (``pipeline.run.packs``: segments of one
    context); each query's rows equal its run alone."""
    root = _instance(tmp_path / "i", "native")
    lines = [
        {"query_id": f"q{i}", "text": t, "doc_scope": [s]}
        for i, (t, s) in enumerate([("Cache policy", "ops"), ("policy", "z"), ("policy", "a")])
    ]
    (root / "q.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    together = _run(compose, root, tmp_path / "all")
    assert together["query_id"].n_unique() == 3
    for i, line in enumerate(lines):
        (root / "q.jsonl").write_text(json.dumps(line) + "\n")
        alone = _run(compose, root, tmp_path / f"q{i}")
        mine = together.filter(pl.col("query_id") == line["query_id"])
        assert mine.select("node_id", "score").equals(alone.select("node_id", "score"))


def test_hook_text_of_native_hits(compose, tmp_path):
    """``inject.format=oks`` on native: OKS's hook shows a native hit's own title and keeps
    native's order (its native path returns before the goal reorder): the goal ``aaa`` does not
    move page aaa first. Floor 0.7, top 3 (E = 0.96 passes)."""
    from pipeline.inject.oks import HEADER

    root = _instance(tmp_path / "i", "native")
    (root / "profiles" / "goals" / "aaa.md").write_text("---\ntitle: A\ntype: goal\n---\n")
    rec = _run(compose, root, tmp_path / "run", ["inject.format=oks"])
    assert set(rec["channel"]) == {"native"}
    text = pl.read_parquet(tmp_path / "run" / "injection.parquet")["text"].to_list()
    assert text == [
        "\n".join(
            [
                HEADER,
                f"- [strategy] Cache tips (a) rel={round(A, 2):.2f}",
                "    cache eviction policy",
                f"- [concept] Overview (b) rel={round(B, 2):.2f}",
                "    cache basics",
                f"- [concept] Policy notes (aaa) rel={round(E, 2):.2f}",
                "    policy",
            ]
        )
    ]
