"""Workspace adapter on the tiny fixture, the bundled sample, and refusals."""

import os

import pytest

from pipeline.adapters import sample, workspace
from pipeline.contract.errors import DataError
from tests.helpers.paths import TINY_WS


def _tiny():
    return workspace.load(
        str(TINY_WS / "notes"),
        queries=str(TINY_WS / "queries.jsonl"),
        qrels=str(TINY_WS / "qrels.tsv"),
    )


def test_sections_line_spans_front_matter_and_code():
    ds = _tiny()
    n = {r["node_id"]: r for r in ds.nodes.iter_rows(named=True)}
    assert sorted(n) == [
        "people/alice.md#alice-chen",
        "people/alice.md#contact",
        "projects/farm.md#budget",
        "projects/farm.md#budget-2",
        "projects/farm.md#intro",
        "secret.md#salary",
    ]
    alice = n["people/alice.md#alice-chen"]
    assert (alice["start_line"], alice["end_line"], alice["doc_id"]) == (9, 11, "people/alice.md")
    assert alice["title"] == "Alice Chen" and alice["tags"] == ["people", "platform"]
    assert (
        alice["importance"] == 7.0
        and alice["type"] == "person"
        and alice["created_at"].year == 2026
    )
    budget = n["projects/farm.md#budget"]
    assert (
        budget["text"] == "Budget\nThe farm costs 4,000 dollars a month."
        and budget["code"] == "make farm-report"
    )
    assert budget["tags"] == ["farm", "ci"] and budget["archived"] is True  # comma-string tags
    assert n["secret.md#salary"]["visibility"] == ["alice"]


def test_wikilinks_with_anchor_alias_and_broken_ones():
    ds = _tiny()
    edges = set(zip(ds.edges["src"], ds.edges["dst"]))
    assert edges == {
        ("people/alice.md#contact", "projects/farm.md#budget"),
        ("projects/farm.md#intro", "people/alice.md#alice-chen"),
    }
    assert ds.skipped["wikilink_broken"] == 1


def test_queries_and_doc_level_qrels():
    ds = _tiny()
    assert ds.queries["query_id"].to_list() == ["q1", "q2"] and ds.queries["viewer"][1] == "bob"
    assert ds.qrels_level == "doc_id" and ds.qrels.height == 2


def test_symlink_is_refused(tmp_path):
    (tmp_path / "a.md").write_text("# A\ntext\n")
    os.symlink("/etc/hostname", tmp_path / "b.md")
    with pytest.raises(DataError, match="symbolic link"):
        workspace.load(str(tmp_path))


def test_link_escaping_root_is_skipped(tmp_path):
    (tmp_path / "a.md").write_text("# A\nsee [[../../etc/passwd]] and [[b]]\n")
    (tmp_path / "b.md").write_text("# B\nbody\n")
    ds = workspace.load(str(tmp_path))
    assert ds.skipped["wikilink_outside_root"] == 1
    assert list(zip(ds.edges["src"], ds.edges["dst"])) == [("a.md#a", "b.md#b")]


def test_malformed_front_matter_names_file_and_line(tmp_path):
    (tmp_path / "bad.md").write_text("---\nname: [unclosed\n---\n# X\ny\n")
    with pytest.raises(
        DataError, match=r"bad.md, row line \d+, field 'front matter'.*not valid YAML"
    ):
        workspace.load(str(tmp_path))
    (tmp_path / "bad.md").write_text("---\nimportance: high\n---\n# X\ny\n")
    with pytest.raises(DataError, match=r"bad.md, field 'importance'.*not a number"):
        workspace.load(str(tmp_path))


def test_bundled_sample_is_complete():
    ds = sample.load()
    docs = set(ds.nodes["doc_id"])
    assert 40 <= len(docs) <= 120 and 20 <= ds.queries.height <= 40
    assert set(ds.qrels["doc_id"]) <= docs  # every judged note exists
    assert ds.nodes.filter(ds.nodes["archived"].fill_null(False))["doc_id"].n_unique() >= 3
    assert ds.nodes["visibility"].drop_nulls().len() > 0
    assert ds.skipped.get("wikilink_broken", 0) == 0 and ds.edges.height > 50
