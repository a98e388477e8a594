"""Entity extraction, hub layers (entity, synonym, group) and diffusion through hubs."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.ops.entities import extract, extract_ids, normalise
from pipeline.ops.ppr import ppr as ppr_dense
from pipeline.stages import diffuse, graph, hubs


@pytest.mark.parametrize(
    "text, keys",
    [
        (
            "When did Barack Obama visit the University of Oxford in 1995?",
            ["1995", "barack obama", "university of oxford"],
        ),
        (
            'The Beatles\'s album "Abbey Road" sold 30,000,000 copies.',
            ["30000000", "abbey road", "beatles"],
        ),
        (
            "Ludwig van Beethoven\nBeethoven was born in Bonn.",
            ["beethoven", "bonn", "ludwig van beethoven"],
        ),
        ("What is it? Who knows. Yes!", []),
        (None, []),
    ],
)
def test_extract_spans_numbers_quotes(text, keys):
    assert extract(text) == keys


def test_extract_options_and_normalise():
    t = "Barack Obama met Angela Merkel in 2009."
    assert extract(t, numbers=False) == ["angela merkel", "barack obama"]
    assert extract(t, subwords=True) == [
        "2009",
        "angela",
        "angela merkel",
        "barack",
        "barack obama",
        "merkel",
        "obama",
    ]
    assert normalise("  The Émile  Zola’s ") == "emile zola"


WORDS = [
    "The",
    "When",
    "Paris",
    "Anna",
    "Smith",
    "of",
    "van",
    "and",
    "x",
    "w1014",
    "1,999",
    "3.5",
    "2.",
    ".7",
    "Émile",
    "e\u0301",
    "\u0663",
    "\uff13",
    "٣4",
    "O'Neil",
    "Zola’s",
    '"Big Show"',
    "“Le Monde”",
    "«Tintin»",
    '"',
    "”",
    "St.",
    "A-B",
    "_9",
    "9_",
    "\u00e9t\u00e9",
    "北京",
    "\x00",
]  # capitals, joins, stop words, numbers in and out of words, Unicode digits, quotes, SEP
SEPS = [" ", "  ", "\t", "\n", ", ", ". ", "", "-", "'"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.none(),
            st.lists(st.tuples(st.sampled_from(WORDS), st.sampled_from(SEPS)), max_size=12).map(
                lambda ws: "".join(w + s for w, s in ws)
            ),
        ),
        max_size=12,
    ),
    st.booleans(),
    st.booleans(),
    st.booleans(),
    st.integers(1, 3),
    st.booleans(),
)
def test_extract_ids_is_extract_of_each_text(texts, numbers, quoted, subwords, min_len, no_sep):
    """Every text's keys, as ``extract`` gives them one by one, from the joined scan (and the
    one-by-one fallback when a text holds the separator)."""
    if no_sep:
        texts = [t.replace("\x00", "") if t else t for t in texts]
    kw = {"numbers": numbers, "quoted": quoted, "subwords": subwords, "min_len": min_len}
    want = [(i, k) for i, t in enumerate(texts) for k in extract(t, **kw)]
    unit, kid, names = extract_ids(texts, **kw)
    assert names == sorted({k for _i, k in want})
    assert list(zip(unit.tolist(), (names[j] for j in kid.tolist()))) == want


def test_extract_ids_by_hand():
    """A number at a text's start, numbers inside words (not keys), a non-ASCII number, a title,
    an empty text, and a text holding the separator (read one by one)."""
    texts = [
        "12 x",
        "Anna met Bob in 1999.",
        None,
        "w1014 Bob",
        '"Big Show" by \u0663\u0664',
        "x\x00",
    ]
    unit, kid, names = extract_ids(texts)
    assert names == ["12", "1999", "anna", "big show", "bob", "\u0663\u0664"]
    got = [(u, names[k]) for u, k in zip(unit.tolist(), kid.tolist())]
    assert got == [
        (0, "12"),
        (1, "1999"),
        (1, "anna"),
        (1, "bob"),
        (3, "bob"),
        (4, "big show"),
        (4, "\u0663\u0664"),
    ]
    unit, kid, names = extract_ids(texts[:-1])  # the joined scan
    assert [(u, names[k]) for u, k in zip(unit.tolist(), kid.tolist())] == got


NODES = pl.DataFrame(
    {
        "node_id": ["a", "b", "c", "d"],
        "text": [
            "Paris is in France.",
            "Paris hosted the 1900 Olympics.",
            "France borders Spain.",
            "Nothing here.",
        ],
        "doc_id": ["s1", "s1", "s2", "s2"],
    }
)


def test_entity_layer_weights_are_inverse_df_and_max_df_drops():
    h = hubs.build(NODES, hubs.HubParams.defaults(entities=True, max_df=1.0))
    assert h.keys == [
        "entity:1900",
        "entity:france",
        "entity:olympics",
        "entity:paris",
        "entity:spain",
    ]
    dense = h.inc.toarray()
    # paris in a, b (df 2 → 0.5); france in a, c (0.5); 1900, olympics in b (1.0); spain in c (1.0)
    np.testing.assert_allclose(
        dense, [[0, 0.5, 0, 0.5, 0], [1, 0, 1, 0.5, 0], [0, 0.5, 0, 0, 1], [0, 0, 0, 0, 0]]
    )
    assert h.df.tolist() == [1, 2, 1, 2, 1]
    # max_df 0.25 of 4 units = 1: entities in two units go
    h2 = hubs.build(NODES, hubs.HubParams.defaults(entities=True, max_df=0.25))
    assert h2.keys == ["entity:1900", "entity:olympics", "entity:spain"]
    assert hubs.build(NODES, hubs.HubParams.defaults()) is None


def test_group_layer_and_df_power():
    h = hubs.build(NODES, hubs.HubParams.defaults(groups={"doc_id": 0.4}, df_power=0.5))
    assert h.keys == ["doc_id:s1", "doc_id:s2"] and h.entity_index == {}
    np.testing.assert_allclose(
        h.inc.toarray(), np.array([[1, 0], [1, 0], [0, 1], [0, 1]]) * 0.4 / np.sqrt(2), rtol=1e-6
    )


def test_synonyms_link_close_keys_once_and_symmetric():
    nodes = pl.DataFrame(
        {"node_id": ["a", "b", "c"], "text": ["Alpha went out.", "Alfa came in.", "Zulu stayed."]}
    )
    vec = {"alpha": [1.0, 0.0], "alfa": [0.8, 0.6], "zulu": [0.0, 1.0]}
    h = hubs.build(
        nodes,
        hubs.HubParams.defaults(
            entities=True, max_df=1.0, synonym_k=2, synonym_threshold=0.75, synonym_weight=0.5
        ),
        embed=lambda keys: np.array([vec[k] for k in keys]),
    )
    assert h.keys == ["entity:alfa", "entity:alpha", "entity:zulu"]
    # cos(alfa, alpha) = 0.8 ≥ 0.75 → weight 0.5·0.8 once each way; cos(alfa, zulu) = 0.6 < 0.75
    np.testing.assert_allclose(h.syn.toarray(), [[0, 0.4, 0], [0.4, 0, 0], [0, 0, 0]], rtol=1e-6)


def test_query_seeds_weight_by_specificity():
    h = hubs.build(NODES, hubs.HubParams.defaults(entities=True, max_df=1.0))
    q = pl.DataFrame(
        {"query_id": ["q1", "q2"], "text": ["Did Paris host the 1900 Olympics?", "nothing to see"]}
    )
    s = hubs.query_seeds(q, h, hubs.HubParams.defaults(entities=True))
    # q1: 1900 (df 1 → 1), olympics (1), paris (df 2 → 0.5); normalised by 2.5
    assert s["query_idx"].to_list() == [0, 0, 0]
    assert [h.keys[i] for i in s["hub_idx"]] == ["entity:1900", "entity:olympics", "entity:paris"]
    np.testing.assert_allclose(s["weight"].to_numpy(), [0.4, 0.4, 0.2], rtol=1e-6)


def test_seed_splits_the_share_of_energy():
    e0 = np.zeros((4, 2), np.float32)
    e0[0, 0] = 0.6  # query 0 has unit-seed energy 0.6; query 1 none
    seeds = pl.DataFrame(
        {"query_idx": [0, 0, 1], "hub_idx": [7, 9, 9], "weight": [0.75, 0.25, 1.0]}
    )
    hubs.seed(e0, 2, np.array([0, 1]), np.array([7, 9]), seeds, share=0.5)
    # query 0: hubs get 0.5/(1-0.5) × 0.6 = 0.6, split 0.75 / 0.25; query 1: share 0.5 in total
    np.testing.assert_allclose(e0, [[0.6, 0], [0, 0], [0.45, 0], [0.15, 0.5]], rtol=1e-6)


def _materialised(nodes: pl.DataFrame, h: hubs.Hubs):
    """The same graph with every hub as a real node and every hub link as an explicit edge."""
    extra = pl.DataFrame({"node_id": [f"~{k}" for k in h.keys], "text": ["x"] * h.size})
    coo = h.inc.tocoo()
    n = nodes.height
    e = pl.DataFrame(
        {
            "src": coo.row.astype(np.int64),
            "dst": (coo.col + n).astype(np.int64),
            "weight": coo.data.astype(np.float32),
            "inhibit": False,
            "relation": "hub",
        }
    )
    return pl.concat([nodes.select("node_id", "text"), extra]), e.cast(graph.EDGE_SCHEMA)


@pytest.mark.parametrize("method", ["pedsa", "ppr"])
def test_diffusion_through_hubs_equals_materialised_graph(method):
    rng = np.random.default_rng(3)
    names = ["Ada", "Bo", "Cy", "Di", "Ed"]
    texts = [" ".join(rng.choice(names, 2, replace=False)) + f" item {i}." for i in range(12)]
    nodes = pl.DataFrame({"node_id": [f"n{i:02d}" for i in range(12)], "text": texts})
    h = hubs.build(nodes, hubs.HubParams.defaults(entities=True, max_df=1.0, numbers=False))
    queries = pl.DataFrame({"query_id": ["q0", "q1", "q2"], "text": ["Ada and Cy", "Ed", "none"]})
    cand = pl.DataFrame(
        {"query_idx": [0, 0, 1, 2], "node_idx": [0, 5, 3, 7], "fused": [0.9, 0.4, 0.7, 0.5]}
    )
    p = diffuse.DiffusionParams.defaults(method=method, seed_k=5, entity_seed_share=0.4)
    qs = hubs.query_seeds(queries, h, hubs.HubParams.defaults(entities=True, numbers=False))
    edges = pl.DataFrame(schema=graph.EDGE_SCHEMA)
    got = diffuse.run(cand, nodes, queries, edges, p, hubs=h, hub_seeds=qs)
    assert got["node_idx"].max() < nodes.height  # hubs never come out

    big_nodes, big_edges = _materialised(nodes, h)
    n = nodes.height
    extra = qs.select("query_idx", node_idx=pl.col("hub_idx") + n, w="weight")
    mass = cand.group_by("query_idx").agg(m=pl.col("fused").sum())
    extra = (
        extra.join(mass, on="query_idx")
        .with_columns(energy=(pl.col("w") * pl.col("m") * 0.4 / 0.6).cast(pl.Float32))
        .select("query_idx", "node_idx", "energy")
    )
    ref = diffuse.run(
        cand,
        big_nodes,
        queries,
        big_edges,
        diffuse.DiffusionParams.defaults(method=method, seed_k=5),
        extra_seeds=extra,
    )
    ref = ref.filter(pl.col("node_idx") < n)
    a = got.sort("query_idx", "node_idx")
    b = ref.sort("query_idx", "node_idx")
    assert a.select("query_idx", "node_idx").equals(b.select("query_idx", "node_idx"))
    np.testing.assert_allclose(a["graph"].to_numpy(), b["graph"].to_numpy(), rtol=1e-5, atol=1e-7)


def test_seed_power_sharpens_seed_energy():
    cand = pl.DataFrame({"query_idx": [0, 0, 0], "node_idx": [4, 2, 9], "fused": [0.5, 0.9, 0.2]})
    s = diffuse.seed_matrix(cand, diffuse.DiffusionParams.defaults(seed_k=2, seed_power=2.0))
    assert s["node_idx"].to_list() == [2, 4]  # top 2 by fused
    np.testing.assert_allclose(s["energy"].to_numpy(), [0.81, 0.25], rtol=1e-6)


def test_ppr_keep_limits_graph_hits_to_each_querys_largest():
    n = 30  # a path graph: PPR reaches every node with positive mass
    nodes = pl.DataFrame({"node_id": [f"n{i:02d}" for i in range(n)], "text": ["x"] * n})
    edges = pl.DataFrame(
        {
            "src": np.arange(n - 1),
            "dst": np.arange(1, n),
            "weight": 1.0,
            "inhibit": False,
            "relation": "edge",
        }
    ).cast(graph.EDGE_SCHEMA)
    queries = pl.DataFrame({"query_id": ["q0", "q1"], "text": ["a", "b"]})
    cand = pl.DataFrame({"query_idx": [0, 1], "node_idx": [3, 20], "fused": [1.0, 1.0]})
    full = diffuse.run(cand, nodes, queries, edges, diffuse.DiffusionParams.defaults(method="ppr"))
    kept = diffuse.run(
        cand, nodes, queries, edges, diffuse.DiffusionParams.defaults(method="ppr", keep=5)
    )
    assert full.group_by("query_idx").len()["len"].to_list() == [n, n]
    for q in (0, 1):
        top = (
            full.filter(pl.col("query_idx") == q)
            .sort("graph", "node_idx", descending=[True, False])
            .head(5)
        )
        assert (
            kept.filter(pl.col("query_idx") == q)
            .sort("graph", "node_idx", descending=[True, False])
            .equals(top)
        )


def test_segmented_hubs_are_each_segment_built_alone():
    """``hubs.build(seg=)`` (small groups packed end to end): every segment's hubs, counts, unit
    weights and query seeds are those of the segment built alone — an entity frequent in one
    segment is cut by ``max_df`` there only, and a query seeds its own segment's hub."""
    texts = [
        ["Ada met Bo in Oslo.", "Ada, Cy.", "Ada again.", "Di in 1999."],
        ["Ada, then Lima.", "Bo and Cy in Lima.", "Ed.", "Cy at Oslo in 1999."],
        ["Oslo.", "Oslo and Ada."],
    ]
    p = hubs.HubParams.defaults(entities=True, max_df=0.5, groups={"doc_id": 0.3})
    parts = [
        pl.DataFrame(
            {"node_id": [f"s{j}n{i}" for i in range(len(t))], "text": t, "doc_id": f"d{j % 2}"}
        )
        for j, t in enumerate(texts)
    ]
    seg = np.repeat(np.arange(len(parts)), [x.height for x in parts])
    packed = hubs.build(pl.concat(parts), p, seg=seg)
    queries = pl.DataFrame({"text": ["Ada in Oslo", "Cy in Lima", "Oslo"]})
    qs = hubs.query_seeds(queries, packed, p, qseg=np.arange(3))
    row0 = 0
    for j, part in enumerate(parts):
        alone = hubs.build(part, p)
        rows = np.arange(row0, row0 + part.height)
        cols = np.flatnonzero(np.diff(packed.inc[rows].tocsc().indptr))
        assert [packed.keys[c] for c in cols] == alone.keys
        np.testing.assert_array_equal(packed.df[cols], alone.df)
        np.testing.assert_array_equal(packed.inc[rows][:, cols].toarray(), alone.inc.toarray())
        own = hubs.query_seeds(queries[j : j + 1], alone, p)
        mine = qs.filter(pl.col("query_idx") == j)
        assert [packed.keys[h] for h in mine["hub_idx"]] == [alone.keys[h] for h in own["hub_idx"]]
        np.testing.assert_array_equal(mine["weight"].to_numpy(), own["weight"].to_numpy())
        row0 += part.height
    # "ada" is in 3 of segment 0's 4 units (> max_df) but in 1 of 4 in segment 1: kept there only
    assert alone.keys  # the last segment has hubs of its own
    assert "entity:ada" not in hubs.build(parts[0], p).keys
    assert "entity:ada" in hubs.build(parts[1], p).keys


# The patterns as first written (look-behind first); the module's are rewritten for speed.
_OLD_SPAN = (
    r"(?<![\w'’])[A-Z][\w'’\-\.]*(?:[ \t]+(?:(?:of|the|de|du|da|di|del|der|la|le|van|von|and|&"
    r"|for|on|in|y)[ \t]+)*[A-Z][\w'’\-\.]*)*"
)
_OLD_NUMBER = r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])"
_PIECES = list("AaBbZz09.,'’ \t\n-_\"é") + ["Of", " of ", " the ", "Ölaf", "x1", "3.5", "1,000"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_entity_patterns_match_as_first_written(text):
    import re

    from pipeline.ops import entities

    for new, old in ((entities._SPAN, _OLD_SPAN), (entities._NUMBER, _OLD_NUMBER)):
        got = [(m.start(), m.group(0)) for m in new.finditer(text)]
        assert got == [(m.start(), m.group(0)) for m in re.finditer(old, text)]


def _extract_as_first_written(text, numbers=True, quoted=True, subwords=False, min_len=2):
    """entities.extract before it was made faster: one pass per pattern, every span word by word."""
    import re

    from pipeline.ops.entities import _QUOTED, STOP

    raw = []
    for m in re.finditer(_OLD_SPAN, text):
        words = m.group(0).split()
        while words and normalise(words[0]) in STOP:
            words.pop(0)
        while words and normalise(words[-1]) in STOP:
            words.pop()
        if words:
            raw.append(" ".join(words))
            if subwords and len(words) > 1:
                raw += [w for w in words if w[:1].isupper() and normalise(w) not in STOP]
    if numbers:
        raw += [m.group(0).replace(",", "") for m in re.finditer(_OLD_NUMBER, text)]
    if quoted:
        raw += [m.group(1) for m in _QUOTED.finditer(text)]
    keys = {normalise(r) for r in raw}
    return sorted(k for k in keys if len(k) >= min_len and k not in STOP)


_WORDS = [
    "When",
    "Paris",
    "the",
    "Bank",
    "of",
    "England",
    "«Le Monde»",
    '"Blue Train"',
    "It's",
    "Ann's",
    "1,200",
    "3.5",
    "x",
    "and",
    "The",
    "Dr",
    "Köln",
    "O'Neil",
    ".",
    ",",
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_WORDS), max_size=14).map(" ".join),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_extract_equals_its_first_writing(text, numbers, quoted, subwords):
    kw = {"numbers": numbers, "quoted": quoted, "subwords": subwords}
    assert extract(text, **kw) == _extract_as_first_written(text, **kw)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.lists(st.sampled_from(_WORDS), max_size=8).map(" ".join)),
        max_size=25,
    ),
    st.sampled_from([0.05, 0.3, 1.0]),
)
def test_entity_pairs_equal_a_count_by_hand(rows, max_df):
    rows = sorted(rows, key=lambda r: r[0])  # segments are contiguous
    seg = np.asarray([s for s, _ in rows], np.int64)
    nodes = pl.DataFrame({"text": [t for _, t in rows]}, schema={"text": pl.String})
    p = hubs.HubParams.defaults(entities=True, max_df=max_df)
    names, units, hub_ids, seg_keys = hubs._entity_pairs(nodes, p, seg)
    # by hand: per (segment, key) the units that mention it; kept when df <= max(1, max_df · size)
    found = [extract(t, **hubs._extract_kw(p)) for _, t in rows]
    size = {s: int((seg == s).sum()) for s in set(seg.tolist())}
    mentions: dict = {}
    for u, keys in enumerate(found):
        for k in keys:
            mentions.setdefault((int(seg[u]), k), []).append(u)
    want = sorted(
        (sk, us) for sk, us in mentions.items() if len(us) <= max(1, int(max_df * size[sk[0]]))
    )
    assert seg_keys == [sk for sk, _ in want]
    assert names == [k for (_s, k), _ in want]
    assert list(zip(hub_ids.tolist(), units.tolist())) == [
        (h, u) for h, (_sk, us) in enumerate(want) for u in us
    ]


def _ppr_with_dense_seeds(cand, nodes, queries, edges, p, h, qseeds):
    """The PPR diffusion as first written: a dense (units + hubs) × queries seed block, each column
    scaled to sum 1, the dense PPR result, each column's `keep` best units, its nonzeros in
    (query, node) order (the solvers' order)."""
    rows, qs = np.arange(nodes.height), np.arange(queries.height)
    adj, inhib = graph.adjacency(edges, nodes.height, rows)
    adj, inhib, cols = hubs.augment(adj, inhib, h, rows)
    seeds = diffuse._seeds(cand, nodes, queries, p, None)
    e0 = diffuse._initial_energy(seeds, qs, rows, len(rows) + len(cols))
    hubs.seed(e0, len(rows), qs, cols, qseeds, p.entity_seed_share)
    mass = e0.sum(axis=0, dtype=np.float64)
    e0 = (e0 / np.where(mass > 0, mass, 1.0)).astype(np.float32)
    out, _ = ppr_dense(adj, e0, damping=p.damping, max_iter=p.max_iter)
    r, c, g = diffuse._hits(out[: len(rows)], p.keep)
    hits = pl.DataFrame({"query_idx": qs[c], "node_idx": rows[r], "graph": g})
    return hits.sort(["query_idx", "node_idx"])


@pytest.mark.parametrize("keep", [0, 3])
def test_ppr_from_sparse_seeds_equals_the_dense_seed_block(keep):
    rng = np.random.default_rng(8)
    names = ["Ada", "Bo", "Cy", "Di", "Ed", "Flo"]
    texts = [" ".join(rng.choice(names, 2, replace=False)) + f" item {i}." for i in range(40)]
    nodes = pl.DataFrame({"node_id": [f"n{i:02d}" for i in range(40)], "text": texts})
    h = hubs.build(nodes, hubs.HubParams.defaults(entities=True, max_df=0.5, numbers=False))
    queries = pl.DataFrame({"query_id": [f"q{i}" for i in range(6)], "text": names})
    cand = pl.DataFrame(
        {
            "query_idx": np.repeat(np.arange(6), 8),
            "node_idx": rng.choice(40, 48),
            "fused": rng.uniform(0.1, 1.0, 48),
        }
    ).unique(["query_idx", "node_idx"], maintain_order=True)
    src = rng.integers(0, 40, 30)
    edges = pl.DataFrame(
        {"src": src, "dst": (src + 1) % 40, "weight": rng.uniform(0.2, 1.0, 30), "inhibit": False}
    ).with_columns(relation=pl.lit("next"))
    edges = edges.cast({k: v for k, v in graph.EDGE_SCHEMA.items() if k in edges.columns})
    p = diffuse.DiffusionParams.defaults(method="ppr", seed_k=5, entity_seed_share=0.4, keep=keep)
    qseeds = hubs.query_seeds(queries, h, hubs.HubParams.defaults(entities=True, numbers=False))
    got = diffuse.run(cand, nodes, queries, edges, p, hubs=h, hub_seeds=qseeds)
    want = _ppr_with_dense_seeds(cand, nodes, queries, edges, p, h, qseeds)
    assert got.equals(want)  # same rows, same order, same bits
