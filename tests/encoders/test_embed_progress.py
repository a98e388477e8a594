"""Embedding says how far it is: a log line every ~10% of the texts on a non-terminal (the
``pipeline.core.progress`` lines), counted after each batch of the encoder's own loop, with the same
vectors whether progress is shown, logged or off."""

import io
import logging
import sys

import numpy as np
import pytest

from pipeline.core import progress
from pipeline.encoders.models import HashingEmbedder, SentenceEncoder

WORDS = "the cat sat on a mat and we had tea in my house by an old red door at noon".split()


@pytest.fixture
def no_terminal(monkeypatch):
    monkeypatch.delenv("RECALL_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert progress.mode() == "log"


def _lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "pipeline.core.progress"]


def test_hashing_embedder_logs_every_tenth_of_its_texts(no_terminal, caplog):
    texts = [f"text number {i}" for i in range(20)]
    with caplog.at_level(logging.INFO, logger="pipeline.core.progress"):
        x = HashingEmbedder(dim=16).encode(texts)
    lines = _lines(caplog)
    # 20 texts, one line per 10%: after texts 2, 4, ..., 20
    assert len(lines) == 10
    assert lines[0].startswith("embed (hashing): 2/20 text (10%), ")
    assert lines[-1].startswith("embed (hashing): 20/20 text (100%), ")
    off = HashingEmbedder(dim=16)
    with pytest.MonkeyPatch.context() as m:
        m.setenv("RECALL_PROGRESS", "0")
        assert np.array_equal(off.encode(texts), x)


def test_sized_items_count_their_units(no_terminal, caplog):
    # batches of 3, 3, 1, 3 texts (total 10): lines after 3 (30%), 6 (60%), 7 (70%), 10 (100%)
    batches = [[0, 1, 2], [3, 4, 5], [6], [7, 8, 9]]
    with caplog.at_level(logging.INFO, logger="pipeline.core.progress"):
        got = list(progress.progress(batches, "embed", total=10, unit="text", size=len))
    assert got == batches
    heads = [line.split(",")[0] for line in _lines(caplog)]
    assert heads == [
        "embed: 3/10 text (30%)",
        "embed: 6/10 text (60%)",
        "embed: 7/10 text (70%)",
        "embed: 10/10 text (100%)",
    ]


def test_minilm_logs_per_batch_and_keeps_its_vectors(no_terminal, caplog, monkeypatch):
    # 30 texts of 6 words (8 tokens with [CLS]/[SEP]: one padded width), batch_size 3: 10
    # batches of 3 texts, so a line after every batch (3, 6, ..., 30)
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(WORDS, 6)) for _ in range(30)]
    enc = SentenceEncoder(batch_size=3)
    with caplog.at_level(logging.INFO, logger="pipeline.core.progress"):
        logged = enc.encode(texts)
    heads = [line.split(",")[0] for line in _lines(caplog)]
    assert heads == [f"embed: {3 * k}/30 text ({10 * k}%)" for k in range(1, 11)]
    monkeypatch.setenv("RECALL_PROGRESS", "0")
    assert np.array_equal(enc.encode(texts), logged)
    bar = io.StringIO()
    monkeypatch.setattr(sys, "stderr", bar)
    monkeypatch.setenv("RECALL_PROGRESS", "1")  # the bar
    assert np.array_equal(enc.encode(texts), logged)
    assert "/30" in bar.getvalue() and "text/s" in bar.getvalue()  # tqdm: count, rate
