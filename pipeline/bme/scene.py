"""ST-BME's owner-POV augmentation and scene reconstruction (``retrieval/retriever.js`` @ 590da3b:
``augmentSelectedNodeIdsWithActiveOwnerPov``, ``reconstructSceneNodeIds``): from the first
``maxRecallNodes`` recalled nodes to the ``selectedNodeIds`` BME injects and reinforces.

- POV augmentation: per active owner key (in order), the first ``pov_memory`` node of that owner in
  the ranked list goes in front, unless already selected; then the first ``limit``.
- Scene reconstruction, per seed in order (stop at ``limit``): the seed; an **event** brings its
  character / location / thread / reflection / pov_memory neighbours over usable edges (neither
  invalidated nor expired; inhibitory ones too, in edge order) and the two events nearest in
  ``seq`` (distance, then later ``seq`` first); a **pov_memory** its two most recent neighbours
  (``seqRange[1]`` desc, importance desc), each event among them expanded; a **character** or
  **location** its two most recent neighbouring events, each expanded. Archived nodes never go in.

Pure: node attributes as arrays indexed by node, ``nbrs`` the usable-edge neighbours of each node.
"""

from __future__ import annotations

import numpy as np

SCENE_TYPES = {"character", "location", "thread", "reflection", "pov_memory"}


def augment_pov(ranked: list[int], limit: int, pov_owner: list, owners: list[str]) -> list[int]:
    """``ranked[:limit]`` with each active owner's best POV node in front (``pov_owner[i]``: the
    owner key of node i's POV scope, or None)."""
    head = list(dict.fromkeys(ranked[:limit]))
    front = []
    for key in dict.fromkeys(o.strip() for o in owners if o and o.strip()):
        best = next((i for i in ranked if pov_owner[i] == key), None)
        if best is not None and best not in head and best not in front:
            front.append(best)
    return list(dict.fromkeys(front + head))[:limit]


def reconstruct(
    seeds: list[int],
    limit: int,
    types: list,
    seq: np.ndarray,
    recency: np.ndarray,
    importance: np.ndarray,
    archived: np.ndarray,
    nbrs: list[list[int]],
    events: np.ndarray,
) -> list[int]:
    """``reconstructSceneNodeIds``: ``events`` are the indices of the non-archived event nodes the
    query may see, in graph order; ``recency`` is ``seqRange[1]``, ``seq`` the node's ``seq``."""
    out: list[int] = []

    def push(i: int) -> None:
        if len(out) < limit and i not in out and not archived[i]:
            out.append(i)

    def recent(cands: list[int], only_events: bool) -> list[int]:
        c = [j for j in cands if not only_events or (types[j] == "event" and not archived[j])]
        return sorted(c, key=lambda j: (-recency[j], -importance[j]))[:2]  # stable: edge order

    def expand(i: int) -> None:
        for j in nbrs[i]:
            if not archived[j] and types[j] in SCENE_TYPES:
                push(j)
        others = events[events != i]
        d = np.abs(seq[others] - seq[i])
        for j in others[np.lexsort((-seq[others], d))][:2]:
            push(int(j))

    for s in dict.fromkeys(seeds):
        if len(out) >= limit:
            break
        push(s)
        if types[s] == "event":
            expand(s)
        elif types[s] == "pov_memory":
            for j in recent(nbrs[s], False):
                push(j)
                if types[j] == "event":
                    expand(j)
        elif types[s] in ("character", "location"):
            for j in recent(nbrs[s], True):
                push(j)
                expand(j)
    return out[:limit]
