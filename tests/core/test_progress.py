"""Progress: a bar on a terminal or RECALL_PROGRESS=1; log lines every ~10% with rate and time left
when there is no terminal (a nightly job's log); nothing with RECALL_PROGRESS=0."""

import io
import logging
import sys

from pipeline.core import progress


def test_log_lines_when_stderr_is_not_a_tty(monkeypatch, caplog):
    monkeypatch.delenv("RECALL_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progress.mode() == "log" and not progress.enabled()
    with caplog.at_level(logging.INFO, logger="pipeline.core.progress"):
        assert list(progress.progress(list(range(40)), "diffuse", unit="scope")) == list(range(40))
    lines = [r.getMessage() for r in caplog.records]
    # 40 items, one line per 10%: after items 4, 8, ..., 40
    assert len(lines) == 10
    assert lines[0].startswith("diffuse: 4/40 scope (10%), ")
    assert lines[-1].startswith("diffuse: 40/40 scope (100%), ") and lines[-1].endswith("~0 s left")


def test_logged_rate_and_time_left_by_hand():
    # a clock that advances 2 s per item: after 5 of 10 items, 0.5 item/s and 10 s left
    ticks = iter(range(0, 100, 2))
    records = []
    handler = logging.Handler()
    handler.emit = lambda r: records.append(r.getMessage())
    progress.log.addHandler(handler)
    progress.log.setLevel(logging.INFO)
    try:
        out = list(progress.logged(range(10), "embed", 10, "text", clock=lambda: next(ticks)))
    finally:
        progress.log.removeHandler(handler)
    assert out == list(range(10))
    assert "embed: 5/10 text (50%), 0.5 text/s, ~10 s left" in records
    assert records[-1] == "embed: 10/10 text (100%), 0.5 text/s, ~0 s left"


def test_single_item_or_unknown_length_passes_through(monkeypatch):
    monkeypatch.delenv("RECALL_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    items = [1]
    assert progress.progress(items, "x") is items
    gen = (i for i in range(3))
    assert progress.progress(gen, "x") is gen


def test_forced_on_and_off(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    monkeypatch.setenv("RECALL_PROGRESS", "1")
    assert list(progress.progress(range(3), "channels", unit="scope")) == [0, 1, 2]
    assert "channels" in buf.getvalue()
    monkeypatch.setenv("RECALL_PROGRESS", "0")
    items = [1, 2, 3]
    assert not progress.enabled() and progress.progress(items, "x") is items
