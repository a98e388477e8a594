"""data=reme on a store written in ReMe's own format (pipeline/synth/reme_store.py names the ReMe files,
agentscope-ai/ReMe @ c8e12487, every field is copied from): units, edges, signals and vectors
checked against hand-written values; bad input; the markdown walk; a run never touches the store."""

import datetime as dt
import hashlib
import json

import numpy as np
import polars as pl
import pytest

from pipeline.adapters import reme
from pipeline.contract.errors import ConfigError, DataError
from pipeline.run import runner
from pipeline.stages import embed, signals
from pipeline.synth.reme_store import chunk_record, file_node, write_jsonl_zst, write_store

T0 = 1767225600.0  # 2026-01-01T00:00:00Z
DAY = 86400.0
A, B, C, D = (
    "daily/2026-01-01/jwt.md",
    "digest/auth/oauth.md",
    "session/dialog/s1.jsonl",
    "resource/guide.md",
)
TEXT = {
    "a1": "## JWT rotation\nRotate signing keys daily; see [[digest/auth/oauth.md]].",
    "a2": "## Keys\nKept in the vault [[session/dialog/s1.jsonl#L2-L3]] and [[digest/missing.md]].",
    "b1": "OAuth refresh tokens; rotation in [[daily/2026-01-01/jwt.md#L12-L12]].",
    "c1": '{"role": "user", "content": "where are the signing keys"}',
    "c2": '{"role": "assistant", "content": "in the vault"}',
    "d1": "Guide to deployment of the service",
}


def build(root, meta=True, signals_files=True):
    """The hand-made store: 4 files, 6 chunks (b1's vector only in the npz cache), meta/*.json."""
    recs = {
        "a1": chunk_record(A, 5, 9, TEXT["a1"], [1, 0, 0, 0]),
        "a2": chunk_record(A, 10, 14, TEXT["a2"], [0, 1, 0, 0]),
        "b1": chunk_record(B, 4, 8, TEXT["b1"]),
        "c1": chunk_record(C, 1, 2, TEXT["c1"], [0, 0, 1, 0]),
        "c2": chunk_record(C, 3, 4, TEXT["c2"], [0, 0, 0, 2]),
        "d1": chunk_record(D, 1, 3, TEXT["d1"], [0, 0, 3, 4]),
    }
    ids = {k: r["id"] for k, r in recs.items()}
    files = [
        file_node(
            A,
            T0 + DAY,
            [("digest/auth/oauth.md", None), (C, "L2-L3"), ("digest/missing.md", None)],
            [ids["a1"], ids["a2"]],
            "jwt-rotation",
            "Key rotation",
        ),
        file_node(B, T0, [(A, "L12-L12")], [ids["b1"]]),
        file_node(C, T0, [], [ids["c1"], ids["c2"]], "s1"),
        file_node(D, T0 + 2 * DAY, [], [ids["d1"]]),
    ]
    if meta:
        write_store(root, files, list(recs.values()), npz={TEXT["b1"]: [0.6, 0.8, 0, 0]})
    for path, body in ((A, "# jwt\n"), (B, "oauth\n"), (C, TEXT["c1"] + "\n"), (D, "guide\n")):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(body)
    (root / "metadata" / "keyword_index").mkdir(parents=True, exist_ok=True)
    (root / "metadata" / "keyword_index" / "bm25_default_regex_x_v1.pkl").write_bytes(b"\x80\x04N.")
    if signals_files:
        m = root / "meta"
        m.mkdir(exist_ok=True)
        (m / "communities.json").write_text(
            json.dumps(
                {
                    "version": 1,
                    "computed_at": "2026-01-02T00:00:00Z",
                    "algorithm": "leiden",
                    "resolution": 1.0,
                    "communities": {A: "c_07", B: "c_07", D: "c_12"},
                    "stats": {},
                }
            )
        )
        (m / "access_log.json").write_text(
            json.dumps(
                {
                    "version": 1,
                    "computed_at": "2025-12-01T00:00:00Z",
                    "paths": {B: {"last_read": "2025-12-01T10:00:00Z", "last_hit_count_30d": 3}},
                }
            )
        )
        (m / "archived.json").write_text(
            json.dumps({"version": 2, "computed_at": "2026-01-02T00:00:00Z", "paths": [D]})
        )
    return ids


def test_units_from_remes_own_index(tmp_path, monkeypatch):
    import pickle

    def never(*a, **k):
        raise AssertionError("the adapter unpickled something")

    monkeypatch.setattr(pickle, "load", never)
    monkeypatch.setattr(pickle, "loads", never)
    monkeypatch.setattr(pickle, "Unpickler", never)
    build(tmp_path)
    ds = reme.load(str(tmp_path))
    n = ds.nodes
    assert n["node_id"].to_list() == [
        "daily/2026-01-01/jwt.md#L5-L9",
        "daily/2026-01-01/jwt.md#L10-L14",
        "digest/auth/oauth.md#L4-L8",
        "resource/guide.md#L1-L3",
        "session/dialog/s1.jsonl#L1-L2",
        "session/dialog/s1.jsonl#L3-L4",
    ]
    assert n["doc_id"].to_list() == [A, A, B, D, C, C]
    assert n["layer"].to_list() == ["daily", "daily", "digest", "resource", "session", "session"]
    assert n["start_line"].to_list() == [5, 10, 4, 1, 1, 3] and n["end_line"].to_list() == [
        9,
        14,
        8,
        3,
        2,
        4,
    ]
    assert n["text"].to_list() == [TEXT[k] for k in ("a1", "a2", "b1", "d1", "c1", "c2")]
    assert n["title"].to_list() == ["jwt-rotation", "jwt-rotation", "oauth", "guide", "s1", "s1"]
    assert n["description"].to_list() == ["Key rotation", "Key rotation", None, None, None, None]
    day = lambda d: dt.datetime(2026, 1, d, tzinfo=dt.timezone.utc)  # noqa: E731
    assert n["updated_at"].to_list() == [day(2), day(2), day(1), day(3), day(1), day(1)]
    assert n["chunk_id"][0] == hashlib.sha256(f"{A} 5 9 {TEXT['a1']}".encode()).hexdigest()
    # b1 has no _embedding_f16_b64: its vector comes from the npz cache, keyed by sha256(text)
    np.testing.assert_allclose(
        np.array(n["embedding"].to_list()),
        [[1, 0, 0, 0], [0, 1, 0, 0], [0.6, 0.8, 0, 0], [0, 0, 3, 4], [0, 0, 1, 0], [0, 0, 0, 2]],
        atol=1e-3,  # float16: 0.6 is stored as 0.59985
    )
    assert ds.notes["vector_model"] == "reme:abc123def456-4d"
    assert "bm25_default_regex_x_v1.pkl" in ds.notes["pickles_ignored"]


def test_edges_resolve_line_anchors_to_the_chunks_holding_them(tmp_path):
    build(tmp_path)
    ds = reme.load(str(tmp_path))
    got = sorted(ds.edges.select("src", "dst").iter_rows())
    assert got == [
        ("daily/2026-01-01/jwt.md#L10-L14", "session/dialog/s1.jsonl#L1-L2"),  # L2-L3 spans both
        ("daily/2026-01-01/jwt.md#L10-L14", "session/dialog/s1.jsonl#L3-L4"),
        ("daily/2026-01-01/jwt.md#L5-L9", "digest/auth/oauth.md#L4-L8"),  # no anchor: first chunk
        ("digest/auth/oauth.md#L4-L8", "daily/2026-01-01/jwt.md#L10-L14"),  # L12 in L10-L14
    ]
    assert ds.skipped["link_target_not_indexed"] == 1  # digest/missing.md


def test_meta_signals_version_check_degradation_and_freshness(tmp_path, caplog):
    build(tmp_path)
    ds = reme.load(str(tmp_path))
    n = ds.nodes
    assert n["community_id"].to_list() == ["c_07", "c_07", "c_07", "c_12", None, None]
    assert n["hits_30d"].to_list() == [None, None, 3, None, None, None]
    assert n["last_access_at"][2] == dt.datetime(2025, 12, 1, 10, tzinfo=dt.timezone.utc)
    assert n["archived_store"].null_count() == 6  # archived.json has version 2: not used
    # reference time = latest st_mtime (2026-01-03): communities 1 day old, the access log 33
    assert ds.freshness == {
        "communities": {
            "status": "fresh",
            "computed_at": "2026-01-02T00:00:00+00:00",
            "age_days": 1.0,
        },
        "access_log": {
            "status": "stale",
            "computed_at": "2025-12-01T00:00:00+00:00",
            "age_days": 33.0,
        },
        "archived": {
            "status": "version_mismatch",
            "computed_at": "2026-01-02T00:00:00+00:00",
            "age_days": 1.0,
        },
    }
    assert "more than 14.0 days" in caplog.text and "version 2, expected 1" in caplog.text
    # the stored communities replace Leiden: ids by sorted rank, none where the path has none
    got = signals._stored_communities(n)
    assert got[:4].tolist() == [0, 0, 0, 1] and np.isnan(got[4:]).all()


def test_archived_json_lists_paths_and_missing_files_degrade(tmp_path):
    build(tmp_path, signals_files=False)
    (tmp_path / "meta").mkdir()
    (tmp_path / "meta" / "archived.json").write_text(
        json.dumps({"version": 1, "computed_at": "2026-01-03T00:00:00Z", "paths": [D]})
    )
    ds = reme.load(str(tmp_path))
    assert ds.nodes["archived_store"].to_list() == [False, False, False, True, False, False]
    assert ds.nodes["community_id"].null_count() == 6 and ds.nodes["hits_30d"].null_count() == 6
    assert ds.freshness["communities"]["status"] == "missing"


def test_stored_vectors_are_unit_rows_and_a_missing_one_is_refused():
    nodes = pl.DataFrame(
        {"node_id": ["a", "b"], "embedding": [[3.0, 4.0], [0.0, 0.0]]},
        schema_overrides={"embedding": pl.List(pl.Float32)},
    )
    np.testing.assert_allclose(embed.node_vectors(nodes), [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)
    with pytest.raises(ConfigError, match="node 'b' has no embedding"):
        embed.node_vectors(
            nodes.with_columns(embedding=pl.Series([[1.0, 0.0], None], dtype=pl.List(pl.Float32)))
        )
    with pytest.raises(ConfigError, match="width 3"):
        embed.node_vectors(
            pl.DataFrame({"node_id": ["a", "b"], "embedding": [[1.0, 0.0], [1.0, 0.0, 0.0]]})
        )


def _queries(path, rows):
    pl.DataFrame(
        rows, schema={"query_id": pl.String, "text": pl.String, "embedding": pl.List(pl.Float32)}
    ).write_parquet(path)


def _hash_tree(root):
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_run_uses_stored_vectors_and_leaves_the_store_byte_identical(compose, tmp_path):
    store = tmp_path / "store"
    build(store)
    before = _hash_tree(store)
    q = tmp_path / "q.parquet"
    _queries(q, [{"query_id": "q1", "text": "zzz", "embedding": [0.0, 0.0, 1.0, 1.0]}])
    cfg = compose(
        [
            "data=reme",
            f"data.path={store}",
            f"data.queries={q}",
            "preset=reme",
            "k=3",
            f"out_dir={tmp_path / 'run'}",
        ]
    )
    runner.run(cfg, tmp_path / "run")
    rec = pl.read_parquet(tmp_path / "run" / "recall.parquet")
    # "zzz" matches no chunk, so only the vector list: ReMe returns it with raw cosines.
    # cos([0,0,1,1]/√2, ·): d1 [0,0,.6,.8] → 1.4/√2 = 0.98995; c1, c2 → 1/√2; a1, a2, b1 → 0
    assert rec["node_id"].to_list() == [
        "resource/guide.md#L1-L3",
        "session/dialog/s1.jsonl#L1-L2",
        "session/dialog/s1.jsonl#L3-L4",
    ]
    assert rec["score"].to_list() == pytest.approx([1.4 / 2**0.5, 2**-0.5, 2**-0.5], abs=1e-3)
    from pipeline.run import precompute

    precompute.precompute(cfg)  # the nightly cache reads the store the same way
    man = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert (
        man["embedded_texts"] == 0
        and man["signals_freshness"]["store"]["communities"]["status"] == "fresh"
    )
    assert _hash_tree(store) == before


def test_a_query_without_a_vector_needs_the_same_model(compose, tmp_path):
    store = tmp_path / "store"
    build(store)
    q = tmp_path / "q.parquet"
    _queries(q, [{"query_id": "q1", "text": "vault", "embedding": None}])
    cfg = compose(
        [
            "data=reme",
            f"data.path={store}",
            f"data.queries={q}",
            "preset=reme",
            "dense.no_query_vector=error",
            f"out_dir={tmp_path / 'run'}",
        ]
    )
    with pytest.raises(
        ConfigError,
        match="stored 4-d vectors of 'reme:abc123def456-4d'.*query 'q1' needs its text embedded",
    ):
        runner.run(cfg, tmp_path / "run")
    # a local model of that name and width is used for it (here the hashing embedder, 4-d)
    cfg = compose(
        [
            "data=reme",
            f"data.path={store}",
            f"data.queries={q}",
            "preset=reme",
            "embed=hashing",
            "embed.encoder.dim=4",
            "+embed.encoder.model_id=reme:abc123def456-4d",
            f"out_dir={tmp_path / 'run'}",
        ]
    )
    runner.run(cfg, tmp_path / "run")
    wide = tmp_path / "w.parquet"
    _queries(wide, [{"query_id": "q1", "text": "vault", "embedding": [1.0, 0.0, 0.0]}])
    cfg = compose(
        [
            "data=reme",
            f"data.path={store}",
            f"data.queries={wide}",
            "preset=reme",
            f"out_dir={tmp_path / 'run2'}",
        ]
    )
    with pytest.raises(ConfigError, match="query vectors are 3-d, the nodes' stored vectors 4-d"):
        runner.run(cfg, tmp_path / "run2")


def _run(compose, tmp_path, store, q, name, *extra):
    cfg = compose(
        [
            "data=reme",
            f"data.path={store}",
            f"data.queries={q}",
            "preset=reme",
            *extra,
            f"out_dir={tmp_path / name}",
        ]
    )
    runner.run(cfg, tmp_path / name)
    man = json.loads((tmp_path / name / "manifest.json").read_text())
    return pl.read_parquet(tmp_path / name / "recall.parquet"), man


def test_preset_reme_falls_back_to_keyword_for_a_query_nothing_can_embed(compose, tmp_path):
    """ReMe's default: with no embedding model for the store's vectors, a query is searched by
    BM25 alone (search.py: no vector hit → the keyword list, raw scores); a query that carries its
    vector still gets the hybrid list, whatever other queries share its batch."""
    store = tmp_path / "store"
    build(store)
    q = tmp_path / "q.parquet"
    _queries(
        q,
        [
            {"query_id": "q1", "text": "zzz", "embedding": [0.0, 0.0, 1.0, 1.0]},
            {"query_id": "q2", "text": "vault", "embedding": None},
        ],
    )
    rec, man = _run(compose, tmp_path, store, q, "run")
    assert any("keyword only" in f for f in man["fallbacks"])
    assert rec.height <= 2 * 5  # k = ReMe's limit 5
    q2 = rec.filter(pl.col("query_id") == "q2")
    # only a2 and c2 hold "vault"; their scores are the BM25 scores (ReMe's raw keyword list)
    assert sorted(q2["node_id"].to_list()) == [
        "daily/2026-01-01/jwt.md#L10-L14",
        "session/dialog/s1.jsonl#L3-L4",
    ]
    assert q2["score"].to_list() == pytest.approx(q2["lexical"].to_list())
    # the keyword-only recipe (ReMe's default.yaml: no embedding store) gives the same rows
    only = tmp_path / "q2.parquet"
    _queries(only, [{"query_id": "q2", "text": "vault", "embedding": None}])
    kw, _ = _run(compose, tmp_path, store, only, "kw", "channels=[lexical]")
    assert q2.select("node_id", "rank", "score").equals(kw.select("node_id", "rank", "score"))
    # q1 (its own vector) is the vector list of the test above: d1 0.98995, c1, c2 1/√2
    q1 = rec.filter(pl.col("query_id") == "q1")
    assert q1["score"].to_list()[:3] == pytest.approx([1.4 / 2**0.5, 2**-0.5, 2**-0.5], abs=1e-3)


def test_two_embedding_caches_are_read(tmp_path):
    """A store whose embedding model changed keeps one npz per vector space; chunks with their
    own vector need neither, and a chunk without one takes its text's vector from the cache of
    the chunks' width; two caches disagreeing on a needed text is an error naming both."""
    store = tmp_path / "store"
    build(store)
    es = store / "metadata" / "embedding_store"
    other = {TEXT["b1"]: [1, 2, 3], TEXT["a1"]: [4, 5, 6]}  # a 3-d model's cache
    keys = np.array([hashlib.sha256(t.encode()).hexdigest() for t in other], dtype=str)
    np.savez(es / "default_v1_ffff0000.npz", keys=keys, embeddings=np.array(list(other.values())))
    ds = reme.load(str(store))
    b1 = ds.nodes.filter(pl.col("node_id") == "digest/auth/oauth.md#L4-L8")
    assert b1["embedding"].to_list()[0] == pytest.approx([0.6, 0.8, 0.0, 0.0], abs=1e-3)
    assert ds.notes["vector_model"] == "reme:chunk-vectors-4d"
    np.savez(
        es / "default_v1_eeee0000.npz",
        keys=keys[:1],
        embeddings=np.array([[0.0, 0.0, 0.6, 0.8]], np.float16),
    )
    with pytest.raises(DataError, match="different vectors in default_v1_abc123def456.npz"):
        reme.load(str(store))


def test_bad_input_names_the_file_and_the_fix(tmp_path):
    build(tmp_path)
    chunks = tmp_path / "metadata" / "file_store" / "file_chunks_default_v1.jsonl.zst"
    whole = chunks.read_bytes()
    chunks.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(
        DataError,
        match=r"file_chunks_default_v1\.jsonl\.zst: truncated or corrupt zstd stream.*fix: rebuild ReMe's index",
    ):
        reme.load(str(tmp_path))
    chunks.write_bytes(whole)
    (
        tmp_path / "metadata" / "embedding_store" / "default_v1_abc123def456.npz"
    ).unlink()  # b1 loses its vector
    with pytest.raises(
        DataError,
        match=r"chunk [0-9a-f]{64} \(digest/auth/oauth\.md:4-8\) has no vector.*data\.vectors=false",
    ):
        reme.load(str(tmp_path))
    ds = reme.load(str(tmp_path), vectors="false")
    assert "embedding" not in ds.nodes.columns and "vector_model" not in ds.notes


def test_markdown_walk_covers_daily_and_digest_with_line_anchor_links(tmp_path):
    (tmp_path / "daily" / "2026-01-01").mkdir(parents=True)
    (tmp_path / "digest" / "wiki").mkdir(parents=True)
    (tmp_path / "resource").mkdir()
    (tmp_path / "mem_session").mkdir()
    (tmp_path / "daily" / "2026-01-01" / "a.md").write_text(
        "---\nname: a-note\nsession_id: s1\nsource_conversation: '[[session/dialog/s1.jsonl]]'\n---\n"
        "## One\nsee [[digest/wiki/b.md#L7-L8]] and [[session/dialog/s1.jsonl#L9-L10]]\n"
    )
    (tmp_path / "digest" / "wiki" / "b.md").write_text(
        "# B\nintro\n\n## Two\nline 5\nline 6\nline 7\n"
    )
    (tmp_path / "resource" / "r.md").write_text("# not indexed by ReMe's default config\n")
    (tmp_path / "mem_session" / "m.md").write_text("# not indexed either\n")
    ds = reme.load(str(tmp_path))
    assert ds.nodes["node_id"].to_list() == [
        "daily/2026-01-01/a.md#one",
        "digest/wiki/b.md#b",
        "digest/wiki/b.md#two",
    ]
    assert ds.nodes["layer"].to_list() == ["daily", "digest", "digest"]
    assert ds.edges.select("src", "dst").rows() == [
        ("daily/2026-01-01/a.md#one", "digest/wiki/b.md#two")
    ]
    assert (
        ds.skipped["link_target_not_indexed"] == 1
    )  # the .jsonl: not a .jsonl.md, not a broken link
    assert "markdown walk" in ds.notes["index"]
    # no ReMe index, so no vector: ReMe's default config (embedding_store: "") searches such a
    # workspace by keyword; preset reme drops its dense channel (stages/embed.keyword_store)
    assert ds.notes["store_vectors"] == "none"
    assert "store_vectors" not in reme.load(str(tmp_path), vectors="false").notes


def test_layers_filter_and_doc_ids_keep_qrels(tmp_path):
    build(tmp_path)
    ds = reme.load(str(tmp_path), layers=["daily", "digest"])
    assert ds.nodes["doc_id"].unique().sort().to_list() == [A, B]
    assert sorted(ds.edges.select("src", "dst").iter_rows()) == [
        ("daily/2026-01-01/jwt.md#L5-L9", "digest/auth/oauth.md#L4-L8"),
        ("digest/auth/oauth.md#L4-L8", "daily/2026-01-01/jwt.md#L10-L14"),
    ]


def test_truncated_file_graph_is_an_error_too(tmp_path):
    build(tmp_path)
    g = tmp_path / "metadata" / "file_graph" / "default.jsonl.zst"
    write_jsonl_zst(g, [{"path": A}])
    with pytest.raises(DataError, match=r"default\.jsonl\.zst, row line 1, field 'st_mtime'"):
        reme.load(str(tmp_path))


def test_reme_design_takes_the_stores_signals(compose, tmp_path):
    store = tmp_path / "store"
    build(store)
    (store / "meta" / "archived.json").write_text(
        json.dumps({"version": 1, "computed_at": "2026-01-03T00:00:00Z", "paths": [C]})
    )
    q = tmp_path / "q.parquet"
    _queries(q, [{"query_id": "q1", "text": "vault keys", "embedding": [0.0, 0.0, 1.0, 1.0]}])
    over = ["data=reme", f"data.path={store}", f"data.queries={q}", "preset=reme_design", "k=5"]
    runner.run(compose([*over, f"out_dir={tmp_path / 'run'}"]), tmp_path / "run")
    rec = pl.read_parquet(tmp_path / "run" / "recall.parquet")
    sig = pl.read_parquet(tmp_path / "run" / "signals.parquet").sort("node_id")
    # communities.json, not Leiden: c_07 (jwt, oauth) → 0, c_12 (guide) → 1, none for s1.jsonl
    assert sig["community"].to_list() == [0, 0, 0, 1, None, None]
    # archived.json lists s1.jsonl: its chunks (cosine 0.71 to the query) are never recalled
    assert C not in set(rec["doc_id"]) and D in set(rec["doc_id"])
    assert sig["archived_signal"].to_list() == [False, False, False, False, True, True]


def test_inject_reme_has_remes_link_expansion_and_5_chunks(compose, tmp_path):
    """``inject.format=reme`` with preset reme's k (ReMe's limit 5): each chunk is followed by
    ReMe's ``render_expansion_lines`` of its file, written out by hand from the store's file
    graph (a link to a file outside the graph, digest/missing.md, is not shown: scope REAL)."""
    store = tmp_path / "store"
    build(store)
    q = tmp_path / "q.parquet"
    _queries(q, [{"query_id": "q2", "text": "vault keys rotation", "embedding": None}])
    rec, _ = _run(compose, tmp_path, store, q, "run", "inject.format=reme")
    assert rec.height <= 5
    text = pl.read_parquet(tmp_path / "run" / "injection.parquet")["text"][0]
    assert text.count("========== ") == rec.height
    expansion_a = [
        "  outlinks (2):",
        "    → digest/auth/oauth.md  (no meta)",
        '    → session/dialog/s1.jsonl  name="s1"',
        "        via anchor=#L2-L3",
        "  inlinks (1):",
        "    ← digest/auth/oauth.md  (no meta)",
        "        via anchor=#L12-L12",
    ]
    lines = text.split("\n")
    at = next(i for i, x in enumerate(lines) if x.startswith("========== " + A + ":10-14"))
    assert lines[at + 1 : at + 1 + len(TEXT["a2"].split("\n"))] == TEXT["a2"].split("\n")
    after = at + 1 + len(TEXT["a2"].split("\n"))
    assert lines[after : after + len(expansion_a)] == expansion_a
    # a file with neither out- nor in-links (resource/guide.md) adds no line
    from pipeline.inject.reme import Links

    ds = reme.load(str(store))
    links = Links(ds.tables["file_links"], ds.tables["file_nodes"])
    assert links.expansion(D) == {"outlinks": [], "inlinks": []}
    assert links.expansion(C)["inlinks"] == [
        {
            "path": A,
            "meta": {"name": "jwt-rotation", "description": "Key rotation"},
            "anchors": ["L2-L3"],
        }
    ]
