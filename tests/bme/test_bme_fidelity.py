"""The preset=bme fidelity fixes that ``scripts/parity/parity.py bme`` found against ST-BME's own
``retrieve()`` (Youzini-afk/ST-Bionic-Memory-Ecology @ 590da3b6), each checked by hand:
scene reconstruction (``retriever.js::reconstructSceneNodeIds``, owner-POV augmentation), the
per-part vector score (``shared-ranking.js``: hits of each query text's top 20, merged by max),
and the oracle's FNV token-hash embedding (``oracles/bme/run_bme.mjs`` ``hashEmbed``)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from pipeline.bme import scene
from pipeline.encoders.models import TokenHashEmbedder

# node: 0 event seq 5 | 1 character | 2 location | 3 event seq 4 | 4 event seq 7 | 5 event seq 1
#       6 pov_memory | 7 event seq 6, archived;  edges 0–1, 0–2, 6–3, 6–4, 1–5
TYPES = ["event", "character", "location", "event", "event", "event", "pov_memory", "event"]
SEQ = np.array([5, 0, 0, 4, 7, 1, 9, 6])
ARCH = np.array([False] * 7 + [True])
EDGES = [(0, 1), (0, 2), (6, 3), (6, 4), (1, 5)]


def _scene(seeds, limit=12):
    nbrs = [[] for _ in TYPES]
    for a, b in EDGES:
        nbrs[a].append(b)
        nbrs[b].append(a)
    events = np.array([i for i, t in enumerate(TYPES) if t == "event" and not ARCH[i]])
    imp = np.full(len(TYPES), 5.0)
    return scene.reconstruct(seeds, limit, TYPES, SEQ, SEQ, imp, ARCH, nbrs, events)


def test_scene_reconstruction_by_hand():
    # 0 (event): its character 1 and location 2, then the events nearest seq 5 — 3 (|4−5| = 1)
    # and 4 (2); 7 is nearer (1) but archived. 6 (pov): its two most recent neighbours 4 (seq 7)
    # then 3, each an event, expanded (nothing new)
    assert _scene([0, 6]) == [0, 1, 2, 3, 4, 6]
    assert _scene([0, 6], limit=4) == [0, 1, 2, 3]
    # 1 (character): its most recent events 0 then 5, each expanded: 0 brings 2, 3, 4
    assert _scene([1]) == [1, 0, 2, 3, 4, 5]


def test_owner_pov_goes_in_front_of_the_first_twelve():
    pov = [None] * 6 + ["character:aria", None]
    assert scene.augment_pov([0, 3, 6, 4], 2, pov, ["character:aria"]) == [6, 0]
    assert scene.augment_pov([6, 3, 4], 2, pov, ["character:aria"]) == [6, 3]  # already in
    assert scene.augment_pov([0, 3, 6], 2, pov, []) == [0, 3]  # no active owner


def test_vector_score_is_the_best_among_the_parts_that_hit():
    from pipeline.channels.candidates import CandidateInputs, ChannelSettings, generate
    from pipeline.stages.channels import DenseParams

    # part A (0.7) = e0, part B (0.3) = e1; node x = e0, node y = (e0 + e1)/√2
    xb = np.array([[1, 0], [2**-0.5, 2**-0.5]], dtype=np.float32)
    xp = np.array([[1, 0], [0, 1]], dtype=np.float32)
    nodes = pl.DataFrame({"node_id": ["x", "y"], "text": ["t"] * 2})
    queries = pl.DataFrame({"query_id": ["q"], "text": ["t"]})
    out = generate(
        nodes,
        queries,
        ChannelSettings(("dense",), DenseParams.defaults(candidates=2, per_part=1, min_score=0.0)),
        CandidateInputs(xb, xp, part_q=np.array([0, 0]), part_w=np.array([0.7, 0.3])),
    )
    got = dict(zip(out["node_idx"].to_list(), out["dense"].to_list()))
    # A's top 1 is x (0.7·1); y is only in B's top 1: 0.3·(1/√2), not A's 0.7·(1/√2)
    assert got == pytest.approx({0: 0.7, 1: 0.3 * 2**-0.5}, rel=1e-6)


def test_oracle_token_hash_embedding_by_hand():
    enc = TokenHashEmbedder(dim=16)
    assert (
        enc.fnv1a32("a") == 0xE40C292C and enc.fnv1a32("foobar") == 0xBF9CF968
    )  # FNV test vectors
    v = enc.encode(["A, a!", "", "Ａ"])  # NFKC: the full-width Ａ is "a"
    want = np.zeros(16, np.float32)
    want[0xE40C292C % 16] = -1.0  # bit 31 set: sign −1; two occurrences, then unit length
    assert np.array_equal(v[0], want) and np.array_equal(v[2], want)
    assert not v[1].any()  # no token: a zero vector
