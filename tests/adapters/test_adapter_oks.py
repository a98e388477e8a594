"""``data=oks`` on a store in OKS's own format, checked by hand and against OKS's own index.

``tests/data/oks_store`` is an OKS instance written by hand with the fields of
open-agent-power/open-knowledge-studio @ 6a281b47 (v0.6.5): the wiki page example of
``assets/_meta/frontmatter-schema.md`` (title, type, area, status, source_type, importance,
confidence, created, pinned, archived, tags, fingerprint, traces, review {decision_correct,
outcome, lesson}, relates_to, relationship, superseded_by), the legacy ``category``
(``cli/knowledge_studio/store.py::compute_score``), the goal profile of the same schema file,
``.oks/access.json`` (``store.py::_save_access_counts``), ``.oks/recall-state-<session>.json`` and
``records/inject.jsonl`` (``assets/hooks/user-prompt-recall.py``). ``.oks/fts5.db`` and
``oracle-fts5.jsonl`` were written by OKS's own code (``search/fts5.py`` through
``../shared/oracles/oks_recall.py --limit 5 --keep-copy``, the database copied back): the rows,
terms and bm25 scores of OKS itself. ``oracle-hook.jsonl`` is the stdout of OKS's own hook
(``assets/hooks/user-prompt-recall.py``, ``OKS_SEARCH_BACKEND=fts5``) for each query on a copy of
the store, its session the query's ``group`` (else its id), in file order.
"""

import datetime as dt
import hashlib
import json
import math
import shutil
import sqlite3
from pathlib import Path

import polars as pl
import pytest

from pipeline.adapters import oks
from pipeline.contract.errors import DataError
from pipeline.inject.formats import soul_boost
from pipeline.ops.tokenize import fts5_document
from pipeline.run import runner
from pipeline.stages import signals
from tests.helpers.paths import TESTS_DATA

STORE = TESTS_DATA / "oks_store"
NOW = dt.datetime(2026, 8, 1, tzinfo=dt.timezone.utc)
COLS = {"title": "title", "body": "text", "tags": "tags", "code_blocks": "code"}


def _ds():
    return oks.load(str(STORE), queries=str(STORE / "queries.jsonl"))


def _node(ds, node_id):
    return ds.nodes.filter(pl.col("node_id") == node_id).row(0, named=True)


def test_units_are_oks_fts5_rows_with_every_front_matter_field():
    ds = _ds()
    texts = dict(ds.nodes.select("node_id", "text").iter_rows())
    r = "computing/retry-with-backoff.md"
    # "# {title}" + the title again (OKS indexes title + "\n\n" + body) + the intro; the fenced
    # code leaves the body, its "# not a heading" is no heading
    assert texts[f"{r}#0"] == (
        "# Retry with backoff\n\nRetry with backoff\n\nRetry failed calls with exponential backoff."
    )
    assert texts[f"{r}#1"] == "## Jitter\n\nAdd random jitter so clients do not retry in lockstep."
    assert texts[f"{r}#2"] == "## Limits\nStop after five attempts."
    assert texts["ops/title-only.md#0"] == "# Rollback plan\n\nRollback plan"  # no body: a row
    assert texts["ops/deploy-checklist.md#0"] == "# Deploy checklist\n\nDeploy checklist"
    assert texts["ops/deploy-checklist.md#1"] == "### Before\nRun the tests and tag the release."
    assert ds.nodes.height == 10 and not any(d.endswith("INDEX.md") for d in ds.nodes["doc_id"])
    assert ds.skipped == {"index_md": 1, "no_front_matter": 1}  # scratch.md: OKS skips it too
    a = _node(ds, f"{r}#2")
    assert (a["doc_id"], a["slug"], a["seq"], a["title"], a["type"], a["area"]) == (
        r,
        "retry-with-backoff",
        2,
        "Retry with backoff",
        "strategy",
        "computing",
    )
    assert a["code"] == "# not a heading\nsleep(base * 2**attempt)"  # on every row of the page
    assert a["tags"] == ["python", "cli"] and a["access_count"] == 3
    assert a["importance"] == pytest.approx(7.0) and a["confidence"] == pytest.approx(0.8)
    assert (a["lesson"], a["decision_correct"], a["outcome"], a["traces"]) == (
        "Cap the retries",
        True,
        "success",
        1,
    )
    assert a["created_at"] == dt.datetime(2026, 7, 27, 12, tzinfo=dt.timezone.utc)
    zh = _node(ds, "computing/缓存失效.md#1")
    assert (zh["type"], zh["status"], zh["tags"], zh["access_count"]) == (
        "anti-pattern",  # the legacy category
        "provisional",
        ["缓存", "性能"],
        0,
    )
    d = _node(ds, "ops/deploy-checklist.md#2")
    assert (d["status"], d["importance"], d["pinned"], d["access_count"]) == ("active", None, 1, 1)
    old = _node(ds, "research/old-notes.md#0")
    assert (old["type"], old["archived"], old["status"], old["superseded_by"]) == (
        "concept",  # neither type nor category: OKS's default
        True,
        "superseded",
        "retry-with-backoff",
    )
    assert (old["relates_to"], old["relationship"]) == ("retry-with-backoff", "supersedes")


def test_memory_curve_and_soul_boost_written_out_by_hand():
    ds = _ds()
    score = dict(zip(ds.nodes["doc_id"], signals.memory_score(ds.nodes, NOW)))
    # strategy λ 0.014, 4 whole days (4.5), 3 uses, active ×1.2
    retry = (0.7 * math.exp(-0.014 * 4) + 0.5 * math.log(4)) * 1.2
    # category anti-pattern λ 0.010, 61 days, provisional (no ×1.2)
    cache = 0.9 * math.exp(-0.010 * 61)
    # concept λ 0, importance missing = 0.5, 1 use, pinned +0.5, no status = active ×1.2
    deploy = (0.5 + 0.5 * math.log(2) + 0.5) * 1.2
    assert score["computing/retry-with-backoff.md"] == pytest.approx(1.626030, abs=1e-6)
    assert score["computing/retry-with-backoff.md"] == pytest.approx(retry, rel=1e-6)
    assert score["computing/缓存失效.md"] == pytest.approx(cache, rel=1e-6)
    assert score["ops/deploy-checklist.md"] == pytest.approx(deploy, rel=1e-6)
    assert score["ops/title-only.md"] == 0.0 and score["research/old-notes.md"] == 0.0
    boost = {
        n["doc_id"]: soul_boost(n["type"], n["title"], n["lesson"])
        for n in ds.nodes.iter_rows(named=True)
    }
    assert boost["computing/retry-with-backoff.md"] == 0.96  # strategy 0.8 × lesson 1.2
    assert boost["computing/缓存失效.md"] == 1.5 and boost["research/old-notes.md"] == 0.6


def test_goals_recall_state_and_inject_log():
    ds = _ds()
    assert ds.queries["goals"].to_list() == [["ship-recall"]] * 5  # data.goals=active
    g = ds.tables["goals"].sort("slug")
    assert g["slug"].to_list() == ["old-goal", "ship-recall"]
    assert g["keywords"].to_list() == [["deploy", "rollback"], ["evaluation", "recall", "trace"]]
    assert ds.tables["recall_state"].rows() == [("sess1", 4, "deploy-checklist", 3)]
    assert ds.queries["hook_n"].to_list() == [None, None, 4, 4, None]  # q3, q4: group sess1
    assert ds.queries["hook_seen"][2].to_list() == [{"slug": "deploy-checklist", "turn": 3}]
    log = ds.tables["inject_log"].row(0, named=True)
    assert (log["session_id"], log["turn"], log["slugs"], log["rels"]) == (
        "sess1",
        3,
        ["deploy-checklist"],
        [1.23],
    )
    none = oks.load(str(STORE), queries=str(STORE / "queries.jsonl"), goals="none")
    assert "goals" not in none.queries.columns
    one = oks.load(str(STORE), queries=str(STORE / "queries.jsonl"), goals="old-goal")
    assert one.queries["goals"][0].to_list() == ["old-goal"]


def _db():
    return sqlite3.connect(f"file:{STORE / '.oks' / 'fts5.db'}?immutable=1", uri=True)


def test_terms_are_the_terms_of_the_stores_own_fts5_index():
    """Per row and column, the terms OKS's index holds (SQLite's fts5vocab) = ours."""
    db = _db()
    db.execute("CREATE VIRTUAL TABLE temp.v USING fts5vocab(main, wiki_fts, instance)")
    theirs: dict = {}
    for term, rowid, col in db.execute("SELECT term, doc, col FROM temp.v"):
        theirs.setdefault((rowid, col), []).append(term)
    key = {r: (s, i) for r, s, i in db.execute("SELECT rowid, slug, node_idx FROM wiki_fts")}
    ds = _ds()
    rows = {(n["slug"], n["seq"]): n for n in ds.nodes.iter_rows(named=True)}
    assert set(rows) == set(key.values())
    for (rowid, col), terms in theirs.items():
        n = rows[key[rowid]]
        v = n[COLS[col]]
        text = " ".join(v) if isinstance(v, list) else (v or "")
        assert sorted(fts5_document(text)) == sorted(terms), (key[rowid], col)


def _hashes(root: Path) -> dict:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_preset_oks_scores_ranking_and_hook_are_oks_own(compose, tmp_path):
    """Row by row: our lexical score = bm25 of the store's fts5.db for OKS's own MATCH string; the
    page order = OKS's recall; the injection = the knowledge section OKS's hook printed."""
    cfg = compose(
        ["data=oks", f"data.path={STORE}", f"data.queries={STORE / 'queries.jsonl'}"]
        + ["preset=oks", "report=false", "signals=default", f"now={NOW.isoformat()}"]
        + ["inject.format=oks"]
    )
    before = _hashes(STORE)
    runner.run(cfg, tmp_path / "run")
    assert _hashes(STORE) == before
    rec = pl.read_parquet(tmp_path / "run" / "recall.parquet")
    recs = {json.loads(x)["query_id"]: json.loads(x) for x in open(STORE / "oracle-fts5.jsonl")}
    db = _db()
    sql = "SELECT slug, node_idx, bm25(wiki_fts, 0, 0, 5.0, 1.0, 3.0, 0.5) FROM wiki_fts "
    for qid, o in recs.items():
        want = {
            f"{s}#{i}": -b
            for s, i, b in db.execute(sql + "WHERE wiki_fts MATCH ?", [o["match_expr"]])
        }
        q = rec.filter(pl.col("query_id") == qid)
        got = {
            f"{Path(d).stem}#{n.rsplit('#', 1)[1]}": s
            for d, n, s in q.select("doc_id", "node_id", "lexical").iter_rows()
        }
        assert got == pytest.approx(want, rel=1e-5), qid
        pages = list(dict.fromkeys(Path(d).stem for d in q.sort("rank")["doc_id"]))
        assert pages[: len(o["hits"])] == [h["slug"] for h in o["hits"]], qid
    inj = pl.read_parquet(tmp_path / "run" / "injection.parquet")
    ours = dict(inj.select("query_id", "text").iter_rows())
    for line in open(STORE / "oracle-hook.jsonl", encoding="utf-8"):
        h = json.loads(line)
        assert ours.get(h["query_id"], "") == _knowledge_section(h["stdout"]), h["query_id"]
    assert "q4" not in ours  # sess1 showed deploy-checklist at turn 3; q4 is turn 6 (< 10)


def _knowledge_section(stdout: str) -> str:
    lines = stdout.splitlines()
    if "## 相关记忆" not in lines:
        return ""
    i = lines.index("## 相关记忆")
    keep = lines[i : i + 2]
    for ln in lines[i + 2 :]:
        if not ln.startswith(("- [", "    ")):
            break
        keep.append(ln)
    return "\n".join(keep)


def test_run_and_precompute_never_touch_the_store(compose, tmp_path):
    from pipeline.run.precompute import precompute

    store = tmp_path / "store"
    shutil.copytree(STORE, store)
    before = _hashes(store)
    over = ["data=oks", f"data.path={store}", f"data.queries={store / 'queries.jsonl'}"]
    over += ["preset=oks", "report=false", "signals=default", "inject.format=oks"]
    runner.run(compose(over), tmp_path / "run")
    precompute(compose(over + [f"cache_dir={tmp_path / 'cache'}"]))
    assert _hashes(store) == before and sorted(before) == sorted(_hashes(STORE))


@pytest.mark.parametrize(
    "path, content, needle",
    [
        (".oks/access.json", "[1, 2]", "access.json: is a JSON list, not a mapping"),
        (".oks/access.json", '{"a": -1}', "uses of 'a' is -1"),
        (
            "wiki/bad.md",
            "---\ntitle: [unclosed\n---\nbody\n",
            "bad.md, row line 2, field 'front matter': front matter is not valid",
        ),
        ("wiki/list.md", "---\n- a\n---\nbody\n", "front matter is a list, not a mapping"),
    ],
)
def test_bad_input_is_one_line_naming_the_file(tmp_path, path, content, needle):
    store = tmp_path / "store"
    shutil.copytree(STORE, store)
    (store / path).write_text(content, encoding="utf-8")
    with pytest.raises(DataError) as e:
        oks.load(str(store))
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_a_folder_without_wiki_is_refused(tmp_path):
    with pytest.raises(DataError, match="no wiki/ folder"):
        oks.load(str(tmp_path))


def _copy(tmp_path) -> Path:
    root = tmp_path / "inst"
    shutil.copytree(STORE, root)
    return root


def test_settings_recall_yaml_and_its_code_defaults(tmp_path):
    """``load_recall_params``: code defaults (search_backend native, per_page_chars 200), then the
    file's keys; a value of the wrong type is one error naming the key."""
    from pipeline.adapters import oks_settings

    root = _copy(tmp_path)
    params, _ = oks_settings.recall_params(root)  # the file `oks init` copies: fts5
    assert params["search_backend"] == "fts5" and params["inject_per_page_chars"] == 200
    shutil.rmtree(root / "settings")
    params, source = oks_settings.recall_params(root)
    assert params["search_backend"] == "native" and params["inject_per_page_chars"] == 200
    assert "no settings/recall.yaml" in source
    (root / "settings").mkdir()
    (root / "settings" / "recall.yaml").write_text(
        "recall: {floor: 0.9, topn: 2}\nsearch_backend: FTS5\ninject: {per_page_chars: 12}\n"
    )
    params, _ = oks_settings.recall_params(root)
    assert (params["search_backend"], params["recall_floor"], params["recall_topn"]) == (
        "fts5",
        0.9,
        2,
    )
    assert params["inject_per_page_chars"] == 12 and params["recall_cooldown"] == 10
    (root / "settings" / "recall.yaml").write_text("inject: {per_page_chars: lots}\n")
    with pytest.raises(DataError, match="inject.per_page_chars is 'lots', not a int"):
        oks_settings.recall_params(root)


def test_preset_oks_follows_the_instance_settings(compose, tmp_path):
    """No flag: an instance without settings runs OKS's code default backend, native (one row a
    page, no fallback); a backend OKS would load from a connector is not reproduced (fts5's
    ranking, and the manifest's fallbacks say so); with ``search_backend: fts5`` nothing is said.
    ``inject.per_page_chars`` cuts the hook's preview; k = 5 pages (10 with the hook)."""
    root = _copy(tmp_path)
    shutil.rmtree(root / "settings")
    base = ["data=oks", f"data.path={root}", f"data.queries={root / 'queries.jsonl'}"]
    base += ["preset=oks", "report=false", f"now={NOW.isoformat()}"]
    runner.run(compose(base), tmp_path / "a")
    man = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert not any("search_backend" in f for f in man["fallbacks"])
    assert "search_backend=native" in man["data_notes"]["oks_settings"]
    rec = pl.read_parquet(tmp_path / "a" / "recall.parquet")
    assert rec.group_by("query_id").agg(pl.col("doc_id").n_unique())["doc_id"].max() <= 5
    assert rec.group_by("query_id").len()["len"].max() <= 5  # native: one row a page
    (root / "settings").mkdir()
    (root / "settings" / "recall.yaml").write_text("search_backend: embedding\n")
    runner.run(compose(base), tmp_path / "c")
    man = json.loads((tmp_path / "c" / "manifest.json").read_text())
    assert any("search_backend is 'embedding'" in f for f in man["fallbacks"])
    (root / "settings" / "recall.yaml").write_text(
        "search_backend: fts5\ninject: {per_page_chars: 12}\n"
    )
    cfg = compose(base + ["inject.format=oks"])
    assert cfg.k == 10  # the hook asks recall() for max(3·3, 10) pages
    runner.run(cfg, tmp_path / "b")
    man = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert not any("search_backend" in f for f in man["fallbacks"])
    text = pl.read_parquet(tmp_path / "b" / "injection.parquet")["text"].to_list()
    previews = [ln[4:] for t in text for ln in t.split("\n") if ln.startswith("    ")]
    assert previews and all(len(p) <= 12 for p in previews)


def test_two_pages_with_one_stem_are_one_page(tmp_path):
    """OKS's ``pages`` table is keyed by slug: of two files with one stem the index keeps the one
    indexed last in (−memory score, slug) order, i.e. the lower compute_score."""
    root = _copy(tmp_path)
    src = (root / "wiki" / "computing" / "retry-with-backoff.md").read_text()
    dup = root / "wiki" / "ops" / "retry-with-backoff.md"
    dup.write_text(src.replace("importance: 0.7", "importance: 0.2"))
    ds = oks.load(str(root))
    docs = set(ds.nodes.filter(pl.col("slug") == "retry-with-backoff")["doc_id"].to_list())
    # both strategy pages of one age: 0.2·e^(−λd)·1.2 < 0.7·e^(−λd)·1.2, the 0.2 page is kept
    assert docs == {"ops/retry-with-backoff.md"}
    assert ds.skipped["duplicate_slug"] == 1
