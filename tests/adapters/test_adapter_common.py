"""``pipeline.adapters.common``: the one JSON Lines reader (plain, gzip, zstd), the end of every
adapter's ``load`` (:func:`finish`) and ``schema.frame``, checked on hand-written files."""

import gzip
import hashlib
import json

import polars as pl
import pytest

from pipeline.adapters import beir, reme_index
from pipeline.adapters.common import finish, read_jsonl, read_text
from pipeline.contract.errors import DataError
from pipeline.contract.schema import frame
from pipeline.synth.reme_store import chunk_record, write_jsonl_zst

# a value holding U+2028, U+2029 and U+0085 (JSON.stringify and ensure_ascii=False leave them
# raw): not line ends; a CRLF line end; blank lines
TEXT = '{"a": 1, "t": "x\u2028y\u2029z\u0085"}\r\n\n{"a": 2}\n\n'
ROWS = [{"a": 1, "t": "x\u2028y\u2029z\u0085"}, {"a": 2}]


def _zst(path, text: str) -> None:
    import pyarrow as pa

    with pa.CompressedOutputStream(pa.OSFile(str(path), "wb"), "zstd") as fh:
        fh.write(text.encode("utf-8"))


def test_plain_gzip_and_zstd_files_read_the_same_rows(tmp_path):
    (tmp_path / "a.jsonl").write_text(TEXT, encoding="utf-8", newline="")
    (tmp_path / "a.jsonl.gz").write_bytes(gzip.compress(TEXT.encode("utf-8")))
    _zst(tmp_path / "a.jsonl.zst", TEXT)
    for name in ("a.jsonl", "a.jsonl.gz", "a.jsonl.zst"):
        assert read_jsonl(tmp_path / name) == ROWS, name


def test_reme_chunks_split_lines_at_newline_only(tmp_path):
    """ReMe reads its chunk store line by line (lines end at "\\n"); a chunk text with U+2028
    is one chunk, not an invalid JSON line (the old reader split with str.splitlines)."""
    meta = tmp_path / "metadata"
    rec = chunk_record("daily/a.md", 1, 2, "first\u2028second")
    write_jsonl_zst(reme_index.chunks_file(meta, "default", "v1"), [rec])
    assert [r["text"] for r in reme_index.chunks(meta, "default", "v1")] == ["first\u2028second"]


def test_errors_name_the_file_and_its_line_with_the_callers_fix(tmp_path):
    p = tmp_path / "c.jsonl.zst"
    _zst(p, '{"a": 1}\n\n{"a": \n')
    with pytest.raises(DataError) as e:
        read_jsonl(p)
    assert str(e.value) == (f"{p}, row line 3: invalid JSON (Expecting value); fix: fix that line")
    _zst(p, '{"a": 1}\n[1, 2]\n')
    with pytest.raises(DataError) as e:
        read_jsonl(p, fix="rebuild it")
    assert str(e.value) == f"{p}, row line 2: expected a JSON object; fix: rebuild it"


def test_invalid_utf8_and_a_cut_stream_are_one_line_each(tmp_path):
    p = tmp_path / "c.jsonl.zst"
    import pyarrow as pa

    with pa.CompressedOutputStream(pa.OSFile(str(p), "wb"), "zstd") as fh:
        fh.write(b'{"a": "\xff"}\n')  # byte 7 is 0xff
    with pytest.raises(DataError) as e:
        read_jsonl(p, file_fix="rebuild the index")
    assert str(e.value) == f"{p}: not valid UTF-8 at byte 7; fix: rebuild the index"
    g = tmp_path / "d.jsonl.gz"
    whole = gzip.compress(TEXT.encode("utf-8"))
    g.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DataError, match=r"d\.jsonl\.gz: truncated or corrupt gzip stream"):
        read_text(g)  # was an EOFError traceback
    g.write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match=r"corrupt gzip stream .*fix: write the file again"):
        read_text(g)


def test_a_cut_beir_corpus_gz_is_a_data_error(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "queries.jsonl").write_text('{"_id": "q", "text": "x"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq\td\t1\n")
    whole = gzip.compress(b'{"_id": "d", "title": "", "text": "some text"}\n' * 50)
    (tmp_path / "corpus.jsonl.gz").write_bytes(whole[:-12])
    with pytest.raises(DataError, match=r"corpus\.jsonl\.gz: truncated or corrupt gzip stream"):
        beir.load(str(tmp_path))


def test_finish_fingerprints_each_file_once_in_order_and_slices_the_queries(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_bytes(b"alpha")
    b.write_bytes(b"beta")
    nodes = pl.DataFrame({"node_id": ["n1"], "text": ["t"]})
    queries = pl.DataFrame({"query_id": ["q1", "q2", "q3"], "text": ["x", "y", "z"]})
    qrels = pl.DataFrame(
        {"query_id": ["q1", "q3"], "node_id": ["n1", "n1"], "relevance": [1, 1]},
        schema_overrides={"relevance": pl.Int32},
    )
    ds = finish("d", nodes, queries, [b, None, a, str(b), ""], 2, qrels=qrels)
    assert ds.fingerprints == {
        str(b): hashlib.sha256(b"beta").hexdigest(),
        str(a): hashlib.sha256(b"alpha").hexdigest(),
    }
    assert list(ds.fingerprints) == [str(b), str(a)]
    assert ds.name == "d" and ds.queries["query_id"].to_list() == ["q1", "q2"]
    assert ds.qrels["query_id"].to_list() == ["q1"]  # q3's judgement left with q3
    assert ds.edges is None and ds.notes == {} and not ds.skipped


def test_frame_types_the_named_columns_in_their_order(tmp_path):
    rows = [{"node_id": "a", "seq": 3, "title": None, "text": "x", "extra": 1}]
    df = frame(rows, "nodes", ("node_id", "title", "text", "seq"), "f.json")
    assert df.schema == pl.Schema(
        {"node_id": pl.String, "title": pl.String, "text": pl.String, "seq": pl.Int64}
    )
    assert df.row(0) == ("a", None, "x", 3)
    with pytest.raises(DataError) as e:
        frame(rows * 2, "nodes", ("node_id", "text"), "f.json")
    assert (
        str(e.value)
        == "f.json, row 0, field 'node_id': duplicate node_id 'a'; fix: make 'node_id' unique"
    )


def test_json_reader_is_unchanged_for_a_plain_file(tmp_path):
    p = tmp_path / "x.json"
    p.write_text(json.dumps({"k": [1, 2]}))
    from pipeline.adapters.common import read_json

    assert read_json(p) == {"k": [1, 2]}


def test_optional_query_columns_no_row_gave_are_dropped():
    from pipeline.adapters.common import without_empty_columns

    q = pl.DataFrame(
        {
            "query_id": ["a", "b"],
            "text": [None, None],
            "viewer": [None, "v"],
            "group": [None, None],
        },
        schema_overrides={"text": pl.String, "group": pl.String},
    )
    assert without_empty_columns(q).columns == ["query_id", "text", "viewer"]
    assert without_empty_columns(q.head(0)).columns == ["query_id", "text"]


def test_a_sillytavern_chat_whose_graph_holds_u2028_is_read(tmp_path):
    """SillyTavern writes its chat with JSON.stringify, which leaves U+2028 raw: the header line
    ends at "\\n" only (it was cut at the U+2028: "first line is not JSON")."""
    from pipeline.adapters.bme_store import read_graph

    g = {"version": 9, "nodes": [{"id": "n1", "fields": {"summary": "a\u2028b"}}], "edges": []}
    head = {"chat_metadata": {"st_bme_graph": g}}
    chat = tmp_path / "chat.jsonl"
    chat.write_text(json.dumps(head, ensure_ascii=False) + "\n" + '{"mes": "hi"}\n', "utf-8")
    graph, _files, _kind = read_graph(chat)
    assert graph["nodes"][0]["fields"]["summary"] == "a\u2028b"


def test_a_parquet_queries_file_of_a_workspace_reads_as_the_parquet_adapter_reads(tmp_path):
    from pipeline.adapters import workspace

    q = pl.DataFrame({"query_id": ["q1"], "text": ["alpha"], "viewer": ["v"]})
    q.write_parquet(tmp_path / "q.parquet")
    assert workspace.load_queries(tmp_path / "q.parquet").rows() == [("q1", "alpha", "v")]
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(DataError) as e:
        workspace.load_queries(bad)
    assert str(e.value).startswith(f"{bad}: cannot be read as Parquet (")
    assert str(e.value).endswith("; fix: write the queries table with polars/pyarrow write_parquet")
