"""Bad input, end to end: every case ends in a one-line error naming the file (exit 2, no
traceback) or in a finished run whose manifest counts what was skipped. Never a crash."""

import gzip
import json
from collections import Counter

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.cli.main import main

ODD = "שלום עולם e\u0301\u0301 🚀🧠 中文记忆 \u200b\ufeff"


def _ws(root, files: dict[str, bytes | str]):
    notes = root / "notes"
    notes.mkdir(parents=True)
    for name, body in files.items():
        p = notes / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(body if isinstance(body, bytes) else body.encode())
    (root / "q.jsonl").write_text(json.dumps({"query_id": "q1", "text": "memory graph"}) + "\n")
    return ["data=workspace", f"data.path={notes}", f"data.queries={root / 'q.jsonl'}"]


def _pq(root, nodes: pl.DataFrame, edges=None, queries=None):
    root.mkdir(parents=True, exist_ok=True)
    nodes.write_parquet(root / "nodes.parquet")
    if edges is not None:
        edges.write_parquet(root / "edges.parquet")
    (
        queries
        if queries is not None
        else pl.DataFrame({"query_id": ["q1"], "text": ["memory graph"]})
    ).write_parquet(root / "queries.parquet")
    return ["data=parquet", f"data.path={root}"]


GOOD = pl.DataFrame(
    {
        "node_id": ["a", "b", "c"],
        "text": ["memory graph", "recall cache", "graph node"],
        "doc_id": ["d1", "d1", "d2"],
    }
)


def _cases(t):
    big = "memory " * (10 * 1024 * 1024 // 7)
    return {
        "workspace: malformed YAML front matter": (
            "error",
            _ws(t / "w1", {"a.md": "---\nname: [x\n---\n# A\nbody\n"}),
        ),
        "workspace: invalid UTF-8": ("error", _ws(t / "w2", {"a.md": b"# A\n\xff\xfe bad\n"})),
        "workspace: symlink inside the root": ("error", _ws(t / "w3", {"a.md": "# A\nmemory\n"})),
        "workspace: importance is not a number": (
            "error",
            _ws(t / "w4", {"a.md": "---\nimportance: high\n---\n# A\nx\n"}),
        ),
        "workspace: invalid JSON in queries": ("error", _ws(t / "w5", {"a.md": "# A\nmemory\n"})),
        "workspace: broken wikilink": (
            "ok:wikilink_broken",
            _ws(t / "w6", {"a.md": "# A\nmemory [[nowhere]]\n"}),
        ),
        "workspace: whitespace-only section": (
            "ok:empty_note",
            _ws(t / "w7", {"a.md": "# A\nmemory\n", "b.md": "   \n\n"}),
        ),
        "workspace: 10 MB note": (
            "ok",
            _ws(t / "w8", {"a.md": "# A\n" + big, "b.md": "# B\ngraph\n"}),
        ),
        "workspace: RTL, combining marks, emoji, CJK": (
            "ok",
            _ws(t / "w9", {"a.md": f"# {ODD}\n{ODD} memory\n"}),
        ),
        "parquet: missing text column": ("error", _pq(t / "p1", GOOD.drop("text"))),
        "parquet: null node_id": (
            "error",
            _pq(t / "p2", GOOD.with_columns(node_id=pl.Series(["a", None, "c"]))),
        ),
        "parquet: duplicate node_id": (
            "error",
            _pq(t / "p3", GOOD.with_columns(node_id=pl.lit("a"))),
        ),
        "parquet: NaN importance": (
            "error",
            _pq(t / "p4", GOOD.with_columns(importance=pl.Series([1.0, float("nan"), 2.0]))),
        ),
        "parquet: inf importance": (
            "error",
            _pq(t / "p5", GOOD.with_columns(importance=pl.Series([1.0, float("inf"), 2.0]))),
        ),
        "parquet: wrong type (tags as int)": (
            "error",
            _pq(t / "p6", GOOD.with_columns(tags=pl.lit(3))),
        ),
        "parquet: dangling and self-loop edges": (
            "ok:edge_dangling,edge_self_loop",
            _pq(t / "p7", GOOD, pl.DataFrame({"src": ["a", "a", "zz"], "dst": ["b", "a", "a"]})),
        ),
        "parquet: empty and whitespace-only texts": (
            "ok:empty_node_text",
            _pq(t / "p8", GOOD.with_columns(text=pl.Series(["memory graph", "", "  \t"]))),
        ),
        "parquet: query whose doc_scope matches nothing": (
            "ok:no_results",
            _pq(
                t / "p9",
                GOOD,
                None,
                pl.DataFrame(
                    {"query_id": ["q1"], "text": ["memory"], "doc_scope": [["no-such-doc"]]}
                ),
            ),
        ),
        "parquet: not a Parquet file": ("error", _pq(t / "p10", GOOD)),
        "locomo: invalid JSON": ("error", ["data=locomo", f"data.path={t / 'bad.json.gz'}"]),
        "beir: missing qrels file": ("error", ["data=beir", f"data.path={t / 'beir'}"]),
        "data.path does not exist": ("error", ["data=workspace", f"data.path={t / 'nope'}"]),
    }


def _prepare(t):
    cases = _cases(t)
    (t / "w3x").write_text("# X\nsecret\n")
    (t / "w3" / "notes" / "link.md").symlink_to(t / "w3x")
    (t / "w5" / "q.jsonl").write_text('{"query_id": "q1", "text": \n')
    (t / "p10" / "nodes.parquet").write_bytes(b"not parquet at all")
    with gzip.open(t / "bad.json.gz", "wt") as fh:
        fh.write('[{"sample_id": ')
    (t / "beir").mkdir()
    (t / "beir" / "corpus.jsonl").write_text(
        json.dumps({"_id": "1", "title": "t", "text": "memory"}) + "\n"
    )
    (t / "beir" / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "memory"}) + "\n")
    return cases


def test_bad_input_corpus_counts_outcomes(tmp_path, capsys):
    cases = _prepare(tmp_path)
    outcomes = Counter()
    for i, (name, (expect, args)) in enumerate(cases.items()):
        out = tmp_path / f"run{i}"
        try:
            code = main(
                [
                    "run",
                    *args,
                    "embed=hashing",
                    "report=false",
                    f"out_dir={out}",
                    f"cache_dir={tmp_path / 'c'}",
                ]
            )
        except SystemExit as exc:
            code = exc.code
        err = capsys.readouterr().err
        if expect == "error":
            lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
            assert code == 2 and len(lines) == 1 and "Traceback" not in err, (
                name,
                code,
                err[-800:],
            )
            assert "fix:" in lines[0] or "choose" in lines[0], (name, lines[0])
            assert not (out / "manifest.json").exists(), name
            outcomes["clear error (exit 2)"] += 1
            continue
        assert code in (0, None), (name, err[-1500:])
        manifest = json.loads((out / "manifest.json").read_text())
        for reason in expect.partition(":")[2].split(","):
            if reason == "no_results":
                assert manifest["rows"]["queries_without_results"] == 1, name
            elif reason:
                assert manifest["skipped"].get(reason, 0) >= 1, (name, manifest["skipped"])
        outcomes["finished run" + (" with counted skips" if ":" in expect else "")] += 1
    print(f"\nbad-input corpus: {len(cases)} cases tried: {dict(outcomes)}")
    assert sum(outcomes.values()) == len(cases) == 22


TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    mutation=st.sampled_from(
        ["none", "null_id", "dup_id", "nan", "empty_text", "unicode", "drop_text", "int_text"]
    ),
    texts=st.lists(TEXT, min_size=1, max_size=6),
)
def test_parquet_nodes_property(tmp_path_factory, mutation, texts):
    """Whatever the table holds: a DataError/ConfigError naming the file, or a finished run."""
    from pipeline.adapters import parquet
    from pipeline.contract.errors import UserError

    t = tmp_path_factory.mktemp("prop")
    n = len(texts)
    df = pl.DataFrame(
        {
            "node_id": [f"n{i}" for i in range(n)],
            "text": [x or "memory" for x in texts],
            "importance": [1.0] * n,
        }
    )
    if mutation == "null_id":
        df = df.with_columns(node_id=pl.Series([None] + df["node_id"].to_list()[1:]))
    elif mutation == "dup_id":
        df = df.with_columns(node_id=pl.lit("same"))
    elif mutation == "nan":
        df = df.with_columns(importance=pl.lit(float("nan")))
    elif mutation == "empty_text":
        df = df.with_columns(text=pl.lit(" "))
    elif mutation == "drop_text":
        df = df.drop("text")
    elif mutation == "int_text":
        df = df.with_columns(text=pl.lit(7))
    _pq(t, df)
    try:
        ds = parquet.load(str(t))
    except UserError as exc:
        assert str(t) in str(exc)
        return
    from hydra import compose, initialize_config_dir

    from pipeline.run import runner
    from tests.helpers.paths import REPO

    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=["embed=hashing", "report=false", "device=cpu", f"out_dir={t / 'o'}"],
        )
    try:
        runner.run(cfg, t / "o", dataset=ds)
    except UserError as exc:
        assert "no node has any text" in str(exc)
        return
    assert (t / "o" / "manifest.json").exists()


JSONS = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=8),
    lambda c: (
        st.lists(c, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "sample_id",
                    "conversation",
                    "qa",
                    "question",
                    "evidence",
                    "category",
                    "session_1",
                    "session_1_date_time",
                    "speaker",
                    "dia_id",
                    "text",
                    "id",
                    "paragraphs",
                    "title",
                    "paragraph_text",
                    "is_supporting",
                    "_id",
                ]
            ),
            c,
            max_size=5,
        )
    ),
    max_leaves=12,
)


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(doc=JSONS, which=st.sampled_from(["locomo", "musique", "beir"]))
def test_json_adapters_property(tmp_path_factory, doc, which):
    """Arbitrary JSON in the shape of each source: a UserError naming the file, or a Dataset."""
    from pipeline.adapters import beir, locomo, musique
    from pipeline.contract.errors import UserError

    t = tmp_path_factory.mktemp(which)
    if which == "beir":
        (t / "corpus.jsonl").write_text(json.dumps(doc) + "\n")
        (t / "queries.jsonl").write_text(json.dumps(doc) + "\n")
        (t / "qrels").mkdir()
        (t / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n")
        path, load = t, beir.load
    else:
        path = t / "data.json"
        path.write_text(json.dumps(doc))
        (t / "data_corpus.json").write_text(json.dumps(doc))
        load = locomo.load if which == "locomo" else musique.load
    try:
        ds = load(str(path))
    except UserError as exc:
        assert str(t) in str(exc)
        return
    from pipeline.contract.schema import conform

    for table, df in (
        ("nodes", ds.nodes),
        ("queries", ds.queries),
    ):  # a Dataset is in the contract as given
        assert conform(df, table, "check").equals(df)
    assert ds.nodes["text"].null_count() == 0 and ds.nodes["node_id"].is_unique().all()


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    body=st.binary(max_size=300)
    | st.text(alphabet=st.sampled_from(list("---#[]|:\n ab{}\"'\\é中🚀")), max_size=200)
)
def test_workspace_markdown_property(tmp_path_factory, body):
    """Arbitrary bytes or markdown-ish text in a note: a UserError naming the file, or a Dataset."""
    from pipeline.adapters import workspace
    from pipeline.contract.errors import UserError

    t = tmp_path_factory.mktemp("md")
    (t / "a.md").write_bytes(body if isinstance(body, bytes) else body.encode())
    (t / "b.md").write_text("# B\nmemory\n")
    try:
        ds = workspace.load(str(t))
    except UserError as exc:
        assert str(t) in str(exc)
        return
    assert ds.nodes.filter(pl.col("node_id") == "b.md#b")["text"].to_list() == [
        "B\nmemory"
    ]  # b.md unharmed
