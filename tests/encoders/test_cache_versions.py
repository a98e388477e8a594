"""Caches know what they depend on: the code version, the model folder and the encoder settings are
in every cache key, so changing any of them is a miss (and leaving them alone is a hit)."""

import numpy as np
import pytest

from pipeline.contract import ingest, registry
from pipeline.core import memo, version
from pipeline.encoders import models
from pipeline.encoders.models import EmbeddingCache, SentenceEncoder, embed_cached
from pipeline.recallcache import recipe
from pipeline.run import runner

TEXTS = ["memory graph", "recall cache", "memory graph"]


def _fake_encode(
    self, texts, device="cpu"
):  # no model is loaded: the key, not the vectors, is under test
    return np.tile(np.arange(self.dim, dtype=np.float32), (len(texts), 1)) / self.dim


@pytest.fixture
def model_dirs(tmp_path, monkeypatch):
    monkeypatch.setattr(SentenceEncoder, "encode", _fake_encode)
    dirs = [tmp_path / "model-a", tmp_path / "model-b"]
    for d in dirs:
        d.mkdir()
        (d / "config.json").write_text("{}")
    return dirs


def _encoded(enc, cache) -> int:
    return embed_cached(enc, TEXTS, cache, "cpu")[1]


def test_embedding_key_changes_with_model_path_settings_files_and_code(
    tmp_path, model_dirs, monkeypatch
):
    cache = EmbeddingCache(tmp_path / "emb.sqlite", 4)
    a, b = model_dirs
    assert _encoded(SentenceEncoder(str(a), dim=4), cache) == 2  # two distinct texts
    assert _encoded(SentenceEncoder(str(a), dim=4), cache) == 0  # same settings: a hit
    assert _encoded(SentenceEncoder(str(b), dim=4), cache) == 2  # another model folder
    assert _encoded(SentenceEncoder(str(a), dim=4, max_seq_length=128), cache) == 2
    assert _encoded(SentenceEncoder(str(a), dim=4, max_seq_length=128), cache) == 0
    (a / "config.json").write_text('{"hidden_size": 4}')  # the model's files changed in place
    assert _encoded(SentenceEncoder(str(a), dim=4), cache) == 2
    monkeypatch.setattr(models, "encoder_code", lambda: "edited")
    assert _encoded(SentenceEncoder(str(a), dim=4), cache) == 2


def test_candidate_and_recipe_keys_change_with_the_code_version(compose, monkeypatch):
    cfg = compose(["embed=hashing", "preset=dense"])
    ds = registry.call_target(cfg.data)
    nodes, queries = ingest.drop_empty(ds)
    keys = ["channels", "dense", "embed"]
    key = lambda: memo.stage_key(memo.key_prefix(cfg, ds, keys), nodes, queries)  # noqa: E731
    before = key(), recipe.recipe_hash(cfg)
    assert before == (key(), recipe.recipe_hash(cfg))
    monkeypatch.setattr(version, "code_version", lambda: "0.1.0+edited")
    after = key(), recipe.recipe_hash(cfg)
    assert after[0] != before[0] and after[1] != before[1]


def test_a_run_reuses_candidates_only_under_the_same_code_version(compose, tmp_path, monkeypatch):
    cfg = compose(["embed=hashing", "preset=dense", "report=false", "data.limit_queries=3"])
    cfg.cache_dir = str(tmp_path / "cache")  # not the session cache: the first run must compute
    assert runner.run(cfg, tmp_path / "r1")["manifest"]["reused_stages"] == []
    assert runner.run(cfg, tmp_path / "r2")["manifest"]["reused_stages"] == ["channels"]
    monkeypatch.setattr(version, "code_version", lambda: "0.1.0+edited")
    assert runner.run(cfg, tmp_path / "r3")["manifest"]["reused_stages"] == []


def test_code_version_hashes_the_package_source():
    assert version.code_version().startswith(version.package_version() + "+")
    h1 = version.source_hash([version.ROOT / "contract" / "io.py"])
    assert (
        h1
        == version.source_hash([version.ROOT / "contract" / "io.py"])
        != version.source_hash([version.ROOT / "contract" / "errors.py"])
    )


def test_code_version_changes_with_a_result_shaping_librarys_version(monkeypatch):
    """A stemmer, tokenizer or BM25 upgrade changes recall rows: the version every key carries
    must change with it (here rjieba, OKS's Chinese tokenizer, and PyStemmer)."""
    real = version.package_version
    before = version.library_versions()
    for lib in ("rjieba", "PyStemmer", "bm25s"):
        version.library_versions.cache_clear()
        monkeypatch.setattr(
            version, "package_version", lambda n, lib=lib: "9.9.9" if n == lib else real(n)
        )
        assert version.library_versions() != before, lib
    monkeypatch.setattr(version, "package_version", real)
    version.library_versions.cache_clear()
    assert version.library_versions() == before
    assert version.code_version().endswith("+" + before)
