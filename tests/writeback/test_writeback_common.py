"""``pipeline.writeback.common.store_root``: the store each write-back writes into, and the one
error line when the run read other data."""

import datetime as dt
from pathlib import Path

import polars as pl
import pytest

from pipeline.contract.errors import UserError
from pipeline.writeback import bme, oks, reme
from pipeline.writeback.common import store_root

ROWS = pl.DataFrame({"query_id": ["q"], "rank": [1], "node_id": ["n"], "doc_id": ["d.md"]})
NOW = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
SAMPLE = {"data": {"_target_": "sample", "path": "/x/sample"}}


def test_out_wins_else_the_path_of_a_run_of_that_data():
    cfg = {"data": {"_target_": "reme", "path": "/stores/r"}}
    assert store_root(Path("run"), cfg, "reme", "a ReMe store", "pass --out") == Path("/stores/r")
    assert store_root(Path("run"), cfg, "reme", "a ReMe store", "x", out="/o") == Path("/o")
    assert store_root(Path("run"), SAMPLE, "oks", "an OKS instance", "x", out="/o") == Path("/o")


def test_each_writer_names_the_run_what_it_read_and_the_fix(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(UserError) as e:
        oks.write_back(run, SAMPLE, ROWS, NOW, None, use_events=str(tmp_path / "uses.txt"))
    assert str(e.value) == (
        f"{run}: the run read data='sample', not an OKS instance (data=oks); "
        "pass --out <instance root>"
    )
    with pytest.raises(UserError) as e:
        reme.write_back(run, SAMPLE, ROWS, NOW, None)
    assert str(e.value) == (
        f"{run}: the run read data='sample', not a ReMe store (data=reme); pass --out <store root>"
    )
    with pytest.raises(UserError) as e:
        bme.write_back(run, {}, ROWS, NOW, str(tmp_path / "out.json"))
    assert str(e.value) == (
        f"{run}: the run read data=None, not an ST-BME store (data=bme); --format bme needs one"
    )
