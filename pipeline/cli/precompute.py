"""``recall precompute [overrides]``: Hydra entry point of the recall cache (``pipeline.run.precompute``).

Takes the same overrides as ``recall run`` (plus ``cache_dir=<dir>``); it writes the cache only (no
run directory). With signals on it prints ``tiers: <n> scopes, <k> recomputed; hot …`` (the
memory-curve tiers under ``<cache_dir>/tiers/<namespace>``), then ``namespace: <name>, generation
<g-…>``; with ``bme_cards.out`` set (``inject.format=bme``), ``bme cards: <n> written to <out>``
(``pipeline.hooks.bme.precompute_cards``). The last line printed is ``cache: <hits> hits,
<misses> misses``.
"""

from __future__ import annotations

import sys

from omegaconf import DictConfig

from pipeline.contract.errors import reported


def job(cfg: DictConfig) -> None:
    """Refresh the recall cache; print partitions rewritten/removed and cache hits/misses."""
    from pipeline.hooks.bme import check_cards, precompute_cards
    from pipeline.run.precompute import precompute
    from pipeline.run.precompute_tiers import TIER_NAMES

    def body() -> None:
        check_cards(cfg)
        res = precompute(cfg)
        print(
            f"partitions rewritten: {len(res['rewritten'])}, removed: {len(res['removed'])}; "
            f"{res['timings_s']['total']:.2f} s"
        )
        if (
            "tiers" in res
        ):  # signals on: <cache_dir>/tiers/<namespace> (pipeline.run.precompute_tiers)
            total = {t: sum(c[t] for c in res["tiers"].values()) for t in TIER_NAMES}
            print(
                f"tiers: {len(res['tiers'])} scopes, {len(res['tiers_rewritten'])} recomputed; "
                + ", ".join(f"{t} {n}" for t, n in total.items())
            )
        print(f"namespace: {res['namespace']}, generation {res['generation']}")
        cards = precompute_cards(cfg, res["namespace"])
        if cards is not None:
            print(f"bme cards: {cards[1]} written to {cards[0]}")
        print(f"cache: {res['hits']} hits, {res['misses']} misses")

    status = reported(body)
    if status:
        sys.exit(status)


def main(args: list[str]) -> int:
    """``recall precompute [overrides]``: compose the config (Hydra, guarded) and run :func:`job`; 0."""
    from pipeline.cli.hydra_guard import launch

    launch("recall precompute", args, job)
    return 0
