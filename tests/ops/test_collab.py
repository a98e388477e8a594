"""ItemCF, Swing and UserCF (pipeline.ops.collab): a five-agent log by hand, and plain-loop
references over sets on random multi-team logs (1e-9)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from pipeline.ops import collab

# five agents (baskets) A..E and the items each injected
LOG = {"A": "xyz", "B": "xy", "C": "xyw", "D": "zw", "E": "yz"}
AGENTS, ITEMS = "ABCDE", "wxyz"  # code order = sorted key order


def _matrix():
    rows = [(a, i) for a, its in LOG.items() for i in its]
    b = np.array([AGENTS.index(a) for a, _ in rows])
    it = np.array([ITEMS.index(i) for _, i in rows])
    return collab.incidence(b, it, (5, 4))


def _at(m, i, j, names=ITEMS):
    return m.toarray()[names.index(i), names.index(j)]


def test_itemcf_by_hand():
    s = collab.itemcf(_matrix())
    # U_x={A,B,C}, U_y={A,B,C,E}, U_z={A,D,E}, U_w={C,D}
    assert _at(s, "x", "y") == pytest.approx(3 / math.sqrt(12), abs=1e-12)
    assert _at(s, "x", "z") == pytest.approx(1 / 3, abs=1e-12)
    assert _at(s, "x", "w") == pytest.approx(1 / math.sqrt(6), abs=1e-12)
    assert _at(s, "y", "z") == pytest.approx(2 / math.sqrt(12), abs=1e-12)
    assert _at(s, "y", "w") == pytest.approx(1 / math.sqrt(8), abs=1e-12)
    assert _at(s, "z", "w") == pytest.approx(1 / math.sqrt(6), abs=1e-12)
    assert np.allclose(s.toarray(), s.toarray().T) and not s.diagonal().any()


def test_swing_by_hand():
    # overlaps |I_u ∩ I_v|: AB 2, AC 2, BC 2, AE 2; x,y shared by A,B,C; y,z by A,E only
    s = collab.swing(_matrix(), alpha=1.0)
    assert _at(s, "x", "y") == pytest.approx(3 * (1 / 3), abs=1e-12)
    assert _at(s, "y", "z") == pytest.approx(1 / 3, abs=1e-12)
    for a, b in [("x", "z"), ("x", "w"), ("y", "w"), ("z", "w")]:  # one shared basket: no pair
        assert _at(s, a, b) == 0.0
    w = collab.swing(_matrix(), alpha=1.0, user_weight=True)  # w_u = 1/sqrt|I_u|: A,C 3; B,E 2
    assert _at(w, "x", "y") == pytest.approx((2 / math.sqrt(6) + 1 / 3) / 3, abs=1e-12)
    assert _at(w, "y", "z") == pytest.approx(1 / (3 * math.sqrt(6)), abs=1e-12)
    assert _at(collab.swing(_matrix(), alpha=0.5), "y", "z") == pytest.approx(1 / 2.5)


def test_usercf_by_hand():
    s = collab.usercf(_matrix())
    expect = {"AB": 2 / math.sqrt(6), "AC": 2 / 3, "AD": 1 / math.sqrt(6), "AE": 2 / math.sqrt(6)}
    expect |= {"BC": 2 / math.sqrt(6), "BD": 0.0, "BE": 1 / 2, "CD": 1 / math.sqrt(6)}
    expect |= {"CE": 1 / math.sqrt(6), "DE": 1 / 2}
    for pair, v in expect.items():
        assert _at(s, pair[0], pair[1], AGENTS) == pytest.approx(v, abs=1e-12), pair


def test_boosts_by_hand():
    r = _matrix()
    ib = collab.item_boost(r, collab.itemcf(r)).toarray()
    # agent D injected z, w: ItemCF boost of x = sim(z,x) + sim(w,x) = 1/3 + 1/sqrt6
    assert ib[AGENTS.index("D"), ITEMS.index("x")] == pytest.approx(1 / 3 + 1 / math.sqrt(6))
    ub = collab.user_boost(r, collab.usercf(r)).toarray()
    # agents who injected x: A, B, C; D's similarity to them 1/sqrt6, 0, 1/sqrt6
    assert ub[AGENTS.index("D"), ITEMS.index("x")] == pytest.approx(2 / math.sqrt(6))


def test_coused_drops_hits():
    r = _matrix()
    hits = collab.incidence(np.array([0]), np.array([ITEMS.index("x")]), (1, 4))
    out = collab.coused(hits, collab.itemcf(r)).toarray()[0]
    want = {"w": 1 / math.sqrt(6), "x": 0.0, "y": 3 / math.sqrt(12), "z": 1 / 3}
    assert out == pytest.approx([want[i] for i in ITEMS])


# ---- plain-loop references (sets and dicts; nothing shared with pipeline.ops.collab)


def _random_log(seed: int, rows: int = 400):
    """Rows (team, basket, item) with items and baskets scoped per team."""
    g = np.random.default_rng(seed)
    team = g.integers(0, 3, rows)
    basket = g.integers(0, 12, rows)
    item = g.integers(0, 15, rows)
    return team, basket, item


def _loop_sets(team, basket, item):
    users, items = {}, {}
    for t, b, i in zip(team.tolist(), basket.tolist(), item.tolist(), strict=True):
        users.setdefault((t, i), set()).add((t, b))
        items.setdefault((t, b), set()).add((t, i))
    return users, items


def loop_itemcf(users):
    out = {}
    for i, j in itertools.permutations(users, 2):
        n = len(users[i] & users[j])
        if n:
            out[i, j] = n / math.sqrt(len(users[i]) * len(users[j]))
    return out


def loop_swing(users, items, alpha, user_weight):
    out = {}
    for i, j in itertools.permutations(users, 2):
        both = sorted(users[i] & users[j])
        total = 0.0
        for u, v in itertools.combinations(both, 2):
            wu = 1 / math.sqrt(len(items[u])) if user_weight else 1.0
            wv = 1 / math.sqrt(len(items[v])) if user_weight else 1.0
            total += wu * wv / (alpha + len(items[u] & items[v]))
        if total:
            out[i, j] = total
    return out


def _as_dict(m, labels):
    c = m.tocoo()
    return {(labels[a], labels[b]): v for a, b, v in zip(c.row, c.col, c.data, strict=True) if v}


def _batched(team, basket, item):
    b, nb = collab.codes(team, basket)
    i, ni = collab.codes(team, item)
    labels = {}
    for t, it, code in zip(team.tolist(), item.tolist(), i.tolist(), strict=True):
        labels[code] = (t, it)
    return collab.incidence(b, i, (nb, ni)), labels


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_itemcf_matches_loop(seed):
    team, basket, item = _random_log(seed)
    r, labels = _batched(team, basket, item)
    want = loop_itemcf(_loop_sets(team, basket, item)[0])
    got = _as_dict(collab.itemcf(r), labels)
    assert got.keys() == want.keys()
    assert max(abs(got[k] - want[k]) for k in want) < 1e-9
    assert all(a[0] == b[0] for a, b in got)  # no pair crosses teams


@pytest.mark.parametrize(("seed", "alpha", "uw"), [(0, 1.0, False), (1, 1.0, True), (2, 0.3, True)])
def test_swing_matches_loop(seed, alpha, uw):
    team, basket, item = _random_log(seed)
    r, labels = _batched(team, basket, item)
    users, items = _loop_sets(team, basket, item)
    want = loop_swing(users, items, alpha, uw)
    got = _as_dict(collab.swing(r, alpha=alpha, user_weight=uw), labels)
    assert got.keys() == want.keys()
    assert max(abs(got[k] - want[k]) for k in want) < 1e-9
