"""The in-memory form of the data contract: nodes, edges, queries and qrels as polars frames."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace

import polars as pl

from pipeline.contract.errors import ConfigError


@dataclass
class Dataset:
    """What every adapter returns: frames in the data contract, validated by ``pipeline.contract.schema``.

    ``qrels`` has ``query_id``, ``relevance`` and exactly one of ``node_id`` (unit-level judgements)
    or ``doc_id`` (judgements on the document a unit belongs to). ``fingerprints`` maps each input
    file to its sha256; ``skipped`` counts input items dropped on purpose, by reason; ``notes``
    says how the input was read where that is not the contract as given (copied into the manifest);
    ``notes["vector_model"]`` names the model of stored ``embedding`` columns (stages/embed.py);
    ``freshness`` is per store signal file (status, computed_at, age_days), the manifest's
    ``signals_freshness.store``. ``tables``
    holds other tables a store keeps, by name (``data=oks``: ``goals``, ``recall_state``,
    ``inject_log``: OKS's injection history, read by the collab channel and boost).
    """

    name: str
    nodes: pl.DataFrame
    queries: pl.DataFrame
    edges: pl.DataFrame | None = None
    qrels: pl.DataFrame | None = None
    fingerprints: dict[str, str] = field(default_factory=dict)
    skipped: Counter = field(default_factory=Counter)
    notes: dict[str, str] = field(default_factory=dict)
    freshness: dict = field(default_factory=dict)  # the store's own signal files (adapters/reme.py)
    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    settings: dict = field(default_factory=dict)  # the store's own recall settings (data=oks)

    def part(self, queries: pl.DataFrame, nodes: pl.DataFrame | None = None) -> Dataset:
        """The same dataset for a subset of its queries (a Ray shard, precompute's missed queries),
        without qrels or skip counts; every other field (notes, tables, freshness) carries over."""
        return replace(
            self,
            queries=queries,
            nodes=self.nodes if nodes is None else nodes,
            qrels=None,
            skipped=Counter(),
        )

    def use_log(self) -> pl.DataFrame | None:
        """The injection log the dataset carries: ``inject_log`` (data=oks) or a contract
        ``access_log`` table (agent_id, slugs, team?, session_id?, turn?), else None."""
        for name in ("inject_log", "access_log"):
            if self.tables.get(name) is not None:
                return self.tables[name]
        return None

    @property
    def qrels_level(self) -> str | None:
        """``doc_id`` or ``node_id``: the column the judgements name; None without qrels."""
        if self.qrels is None:
            return None
        return "doc_id" if "doc_id" in self.qrels.columns else "node_id"


def require_queries(data_name: str, queries: pl.DataFrame | None) -> None:
    """A ConfigError when a dataset to recall for has no queries (``recall run``, ``recall
    precompute``)."""
    if queries is None or queries.height == 0:
        raise ConfigError(f"data={data_name}: the dataset has no queries; give it a queries file")
