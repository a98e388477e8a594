"""Expand (ReMe's budgeted BFS): hand-computed hops, decay, budget and the depth limit."""

import numpy as np
import pytest
import scipy.sparse as sp

from pipeline.ops.expand import expand


def test_expand_bfs_hand_computed():
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
