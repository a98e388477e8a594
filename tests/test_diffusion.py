"""PEDSA: hand-computed chain, parity with a literal per-query reference; PPR vs networkx."""
from collections import defaultdict

import numpy as np
import pytest
import scipy.sparse as sp

from pipeline.ops.diffusion import pedsa, ppr


def _sym(n, edges):
    r = [a for a, b, w in edges] + [b for a, b, w in edges]
    c = [b for a, b, w in edges] + [a for a, b, w in edges]
    v = [w for *_, w in edges] * 2
    m = sp.coo_matrix((v, (r, c)), shape=(n, n)).tocsr()
    m.sum_duplicates()
    return m


def adjacency_lists(normal, inhib):
    """ST-BME's undirected adjacency lists: every edge both ways, parallel edges kept (they add)."""
    adj = defaultdict(list)
    for edges, inh in ((normal, False), (inhib, True)):
        for a, b, w in edges:
            adj[a].append((b, w, inh))
            adj[b].append((a, w, inh))
    return adj


def pedsa_lists(n, adj, seeds, steps=2, decay=0.6, alpha=0.15, mult=2.0, k=100):
    """ST-BME's propagateActivation, literally, for one query (dicts and loops)."""
    clamp = lambda x: max(-2.0, min(2.0, x))  # noqa: E731
    e0 = {i: clamp(e) for i, e in seeds.items() if abs(clamp(e)) >= 0.01}
    result, frontier = dict(e0), dict(e0)
    for _ in range(steps):
        nxt = defaultdict(float)
        for i, e in frontier.items():
            for j, w, inh in adj[i]:
                nxt[j] += -abs(e) * w * decay * mult if inh else e * w * decay * (1 - alpha)
        nxt = {j: clamp(v) for j, v in nxt.items() if abs(clamp(v)) >= 0.01}
        if alpha > 0:
            for s, e in e0.items():
                v = clamp((1 - alpha) * nxt.get(s, 0.0) + alpha * e)
                if abs(v) >= 0.01:
                    nxt[s] = v
                else:
                    nxt.pop(s, None)
        nxt = dict(sorted(nxt.items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:k])
        for j, v in nxt.items():
            if abs(v) > abs(result.get(j, 0.0)):
                result[j] = v
        frontier = nxt
        if not frontier:
            break
    out = np.zeros(n)
    for j, v in result.items():
        out[j] = v
    return out


def pedsa_reference(n, normal, inhib, seeds, **kw):
    """The per-query reference: adjacency lists built for this call, then the literal loop."""
    return pedsa_lists(n, adjacency_lists(normal, inhib), seeds, **kw)


def test_chain_hand_computed():
    adj = _sym(4, [(0, 1, 1.0), (1, 2, 1.0)])
    inh = _sym(4, [(0, 3, 0.5)])
    e0 = np.array([[1.0], [0], [0], [0]])
    got = pedsa(adj, inh, e0)[:, 0]
    # step 1: E1 = 1·1·0.6·0.85 = 0.51, E3 = −1·0.5·0.6·2 = −0.6; seed 0 teleports to 0.15
    # step 2: E2 = 0.51·0.51 = 0.2601; E0 = 0.85·(0.2601 + …) + 0.15 stays below the seed's 1.0
    assert got == pytest.approx([1.0, 0.51, 0.2601, -0.6])


def test_batched_matches_reference_on_random_graphs():
    rng = np.random.default_rng(7)
    for trial in range(20):
        n = int(rng.integers(5, 60))
        m = int(rng.integers(n, 4 * n))
        pairs = rng.integers(0, n, size=(m, 2))
        pairs = pairs[pairs[:, 0] != pairs[:, 1]]
        w = rng.uniform(0.05, 1.0, len(pairs))
        is_inh = rng.random(len(pairs)) < 0.1
        normal = [(int(a), int(b), float(x)) for (a, b), x, i in zip(pairs, w, is_inh) if not i]
        inhib = [(int(a), int(b), float(x)) for (a, b), x, i in zip(pairs, w, is_inh) if i]
        k = int(rng.integers(2, 12))
        B = 6
        e0 = np.zeros((n, B))
        for q in range(B):
            idx = rng.choice(n, size=min(n, 3), replace=False)
            e0[idx, q] = rng.uniform(0.1, 2.5, len(idx))
        got = pedsa(_sym(n, normal), _sym(n, inhib), e0, top_k=k)
        for q in range(B):
            seeds = {int(i): float(e0[i, q]) for i in np.flatnonzero(e0[:, q])}
            ref = pedsa_reference(n, normal, inhib, seeds, k=k)
            assert got[:, q] == pytest.approx(ref, abs=1e-9), f"trial {trial} query {q}"


def test_ppr_matches_networkx():
    import networkx as nx

    edges = [(0, 1, 1.0), (1, 2, 2.0), (2, 0, 1.0), (2, 3, 1.0), (3, 4, 0.5)]
    g = nx.DiGraph()
    g.add_nodes_from(range(5))
    g.add_weighted_edges_from(edges)
    adj = sp.csr_matrix((np.array([w for *_, w in edges]), ([a for a, *_ in edges], [b for _, b, _ in edges])), shape=(5, 5))
    pers = np.zeros((5, 2))
    pers[0, 0] = 1.0
    pers[[1, 3], 1] = 0.5
    got, info = ppr(adj, pers, damping=0.5, tol=1e-12, max_iter=500)
    assert info.converged
    for q in range(2):
        ref = nx.pagerank(g, alpha=0.5, personalization={i: pers[i, q] for i in range(5)},
                          dangling={i: pers[i, q] for i in range(5)}, tol=1e-14, max_iter=1000)
        assert got[:, q] == pytest.approx([ref[i] for i in range(5)], abs=1e-8)


def test_expand_bfs_hand_computed():
    from pipeline.ops.diffusion import expand

    # 0 → 1 → 2 → 3, and 4 → 0 (an in-neighbour of the seed)
    out_adj = sp.csr_matrix(([1.0, 1.0, 1.0, 1.0], ([0, 1, 2, 4], [1, 2, 3, 0])), shape=(5, 5))
    in_adj = out_adj.T.tocsr()
    e0 = np.array([[1.0], [0], [0], [0], [0]])
    one = expand(out_adj, in_adj, e0, depth=1, decay=0.5)[:, 0]
    assert one.tolist() == [1.0, 0.5, 0.0, 0.0, 0.5]
    two = expand(out_adj, in_adj, e0, depth=2, decay=0.5)[:, 0]
    assert two.tolist() == [1.0, 0.5, 0.25, 0.0, 0.5]
    capped = expand(out_adj, in_adj, e0, depth=2, decay=0.5, budget=2)[:, 0]
    assert capped.tolist() == [1.0, 0.5, 0.0, 0.0, 0.5]  # budget spent at hop 1
    with pytest.raises(ValueError, match="at most 3|0 to 3"):
        expand(out_adj, in_adj, e0, depth=4)


def test_pedsa_empty_seeds_and_ties():
    adj = _sym(3, [(0, 1, 1.0), (0, 2, 1.0)])
    zero = pedsa(adj, None, np.zeros((3, 2)))
    assert not zero.any()
    tie = pedsa(adj, None, np.array([[1.0], [0], [0]]), top_k=2)[:, 0]
    # nodes 1 and 2 tie at 0.51; with the seed (0.15 after teleport) the top-2 are 1 and 2
    assert tie.tolist() == pytest.approx([1.0, 0.51, 0.51])
    tie1 = pedsa(adj, None, np.array([[1.0], [0], [0]]), top_k=1, steps=1)[:, 0]
    assert tie1.tolist() == pytest.approx([1.0, 0.51, 0.0])  # tie broken by node order
