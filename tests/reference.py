"""Reference implementations the parity tests compare with: slow and obvious on purpose."""


def topk_reference(values, k, keep_zero=False):
    """Indices of the ``k`` largest ``values`` of one query (ties: lower index first), by a full
    sort; zeros left out unless ``keep_zero``."""
    order = sorted(range(len(values)), key=lambda j: (-values[j], j))
    return sorted(j for j in order[:max(k, 0)] if keep_zero or values[j] != 0)
