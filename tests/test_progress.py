"""Progress bars: on for a terminal or RECALL_PROGRESS=1, off for pipes and RECALL_PROGRESS=0."""

import io
import sys

from pipeline import progress


def test_off_when_stderr_is_not_a_tty(monkeypatch):
    monkeypatch.delenv("RECALL_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    items = [1, 2, 3]
    assert progress.progress(items, "x") is items and not progress.enabled()


def test_forced_on_and_off(monkeypatch):
    buf = io.StringIO()
    monkeypatch.setattr(sys, "stderr", buf)
    monkeypatch.setenv("RECALL_PROGRESS", "1")
    assert list(progress.progress(range(3), "channels", unit="scope")) == [0, 1, 2]
    assert "channels" in buf.getvalue()
    monkeypatch.setenv("RECALL_PROGRESS", "0")
    assert not progress.enabled()
