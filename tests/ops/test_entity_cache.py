"""ops.entity_cache: the entity mentions read back from disk are ``entities.extract_ids``' (the
same pairs, dtypes and keys); the key follows the texts and the extraction flags; a broken file is
recomputed; fewer than ``npzcache.MIN_ROWS`` texts write nothing."""

import numpy as np

from pipeline.core import npzcache
from pipeline.ops import entities, entity_cache

TEXTS = [
    "Caroline met Melanie in Paris in 2019.",
    None,
    "",
    'They read "The Old Man and the Sea" at the University of Oxford.',
    "Zoë Çelik visited São Paulo; 3,500 people came.",
    "caroline met melanie in paris",  # no capitals: no spans
    "Caroline met Melanie in Paris in 2019.",  # a repeat
] * 3


def _same(a, b) -> None:
    for x, y in zip(a[:2], b[:2]):
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes()
    assert a[2] == b[2] and len(a[0]) > 10


def test_mentions_read_back_equal_fresh_ones(tmp_path, monkeypatch):
    monkeypatch.setattr(npzcache, "MIN_ROWS", 1)
    kw = {"numbers": True, "quoted": True, "subwords": True}
    fresh = entities.extract_ids(TEXTS, **kw)
    _same(entity_cache.extract_ids(TEXTS, tmp_path, **kw), fresh)
    assert len(list(tmp_path.glob("*.npz"))) == 1

    def no_extracting(*a, **k):
        raise AssertionError("extracted although the cache holds these texts")

    monkeypatch.setattr(entities, "extract_ids", no_extracting)
    _same(entity_cache.extract_ids(TEXTS, tmp_path, **kw), fresh)


def test_the_flags_and_the_texts_are_in_the_key(tmp_path, monkeypatch):
    monkeypatch.setattr(npzcache, "MIN_ROWS", 1)
    for kw in ({}, {"numbers": False}, {"quoted": False}, {"subwords": True}):
        _same(entity_cache.extract_ids(TEXTS, tmp_path, **kw), entities.extract_ids(TEXTS, **kw))
    other = [t.replace("Paris", "Lyon") if t else t for t in TEXTS]
    _same(entity_cache.extract_ids(other, tmp_path), entities.extract_ids(other))
    assert len(list(tmp_path.glob("*.npz"))) == 5


def test_a_broken_file_is_recomputed_and_few_texts_write_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(npzcache, "MIN_ROWS", 1)
    fresh = entities.extract_ids(TEXTS)
    entity_cache.extract_ids(TEXTS, tmp_path)
    (path,) = tmp_path.glob("*.npz")
    whole = path.read_bytes()
    path.write_bytes(whole[:100])
    _same(entity_cache.extract_ids(TEXTS, tmp_path), fresh)
    assert path.read_bytes() == whole
    monkeypatch.setattr(npzcache, "MIN_ROWS", len(TEXTS) + 1)
    _same(entity_cache.extract_ids(TEXTS, tmp_path / "small"), fresh)
    assert not (tmp_path / "small").exists()
    assert np.array_equal(fresh[0], np.sort(fresh[0]))  # by text, as extract_ids promises
