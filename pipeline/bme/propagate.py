"""ST-BME's ``propagateActivation`` as ST-BME writes it: one query at a time, with dicts and
loops (Youzini-afk/ST-Bionic-Memory-Ecology @ 590da3b6). Slow and obvious on purpose: the per-query
baseline that :func:`pipeline.ops.pedsa.pedsa` batches, which the parity tests
(``tests/ops/test_pedsa.py``, ``tests/stages/test_diffuse_pedsa.py``) and
``scripts/bench/bench_diffusion.py`` compare with."""

from collections import defaultdict

import numpy as np


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
