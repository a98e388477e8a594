"""The nodes' entity mentions on disk: ``entities.extract_ids`` of a large node table's texts,
read back by a later run over the same texts (1M synthetic nodes: ~3 s of regular expressions,
most of the entity layer's time). It depends on the texts and the extraction flags alone, not on
scopes, document frequencies or hub weights, which ``stages.hubs`` derives from it each run.
Keys, files and the folder's bound are ``pipeline.core.npzcache``'s; fewer than ``npzcache.MIN_ROWS``
texts are read each time."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pipeline.core import npzcache
from pipeline.ops import entities

FORMAT = "entities/1"


def extract_ids(texts: list[str | None], root: Path | None, **kw):
    """``entities.extract_ids(texts, **kw)``: (text index, key index) pairs and the keys, read
    from ``root`` when an earlier run wrote them, else computed and, for ``npzcache.MIN_ROWS``
    texts or more, written there. ``root`` None: no cache."""
    if root is None or len(texts) < npzcache.MIN_ROWS:
        return entities.extract_ids(texts, **kw)
    h = npzcache.start(FORMAT, sorted(kw.items()))
    npzcache.digest(h, "text", texts)
    path = Path(root) / f"{h.hexdigest()}.npz"
    z = npzcache.read(path)
    if z is not None:
        try:
            keys = npzcache.unpack(z["key_bytes"], z["key_lens"])
            unit, kid = z["unit"], z["kid"]
            if len(unit) == len(kid) and (not len(kid) or int(kid.max()) < len(keys)):
                return unit, kid, keys
        except (KeyError, ValueError, UnicodeDecodeError):  # another layout: recomputed
            pass
    unit, kid, keys = entities.extract_ids(texts, **kw)
    key_bytes, key_lens = npzcache.pack(keys)
    arrays = {"unit": unit, "kid": kid, "key_bytes": key_bytes, "key_lens": key_lens}
    npzcache.write(path, {k: np.asarray(v) for k, v in arrays.items()})
    return unit, kid, keys
