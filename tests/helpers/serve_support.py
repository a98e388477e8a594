"""Helpers of the ``recall serve`` tests: configs, references by ``recall run``, bit-exact row
comparison."""

from __future__ import annotations

import numpy as np
import polars as pl
from hydra import compose, initialize_config_dir

from tests.helpers.isolated import fresh_run
from tests.helpers.paths import REPO, SHARED_DATA

FLOATS = (pl.Float32, pl.Float64)


def config(tmp, *overrides):
    """A composed config (CPU, hashing embedder) with its cache and outputs under ``tmp``."""
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        return compose(
            "config",
            overrides=[
                "device=cpu",
                "embed=hashing",
                "report=false",
                f"out_dir={tmp / 'run'}",
                f"cache_dir={tmp / 'cache'}",
                f"data_dir={SHARED_DATA}",
                "serve.check_interval=0",
                *overrides,
            ],
        )


def reference(cfg, root, name: str, dataset=None):
    """(recall rows, injection rows) of a fresh ``recall run`` with its own cache and outputs."""
    run = fresh_run(cfg, root, name, dataset=dataset)
    inj = run.out_dir / "injection.parquet"
    return run.recall(), (pl.read_parquet(inj) if inj.is_file() else None)


def rows_of(recall: pl.DataFrame, query_id: str) -> pl.DataFrame:
    """One query's rows of a recall table, rank order, without ``query_id``."""
    return recall.filter(pl.col("query_id") == query_id).sort("rank").drop("query_id")


def same_bits(got: list[dict], want: pl.DataFrame) -> None:
    """``got`` (response rows) holds exactly ``want``'s rows and columns; floats equal bit for bit
    at the reference column's width, every other value equal."""
    assert len(got) == want.height, (len(got), want.height)
    assert all(list(r) == want.columns for r in got), (got[:1], want.columns)
    for col, dtype in want.schema.items():
        ours = [r[col] for r in got]
        if dtype in FLOATS:
            width = np.float32 if dtype == pl.Float32 else np.float64
            a = np.array([np.nan if v is None else v for v in ours], dtype=width)
            b = want[col].cast(dtype).fill_null(np.nan).to_numpy().astype(width)
            assert np.array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}")), col
            assert [v is None for v in ours] == want[col].is_null().to_list(), col
        else:
            assert ours == want[col].to_list(), col


NOTES = {
    "ops/vault.md": "# Vault\n\nRotate the dbt service account password in Vault under secret/trino.\n",
    "ops/deploy.md": "# Deploy\n\nDeploys go through the release train every Tuesday.\n",
    "team/oncall.md": "# On-call\n\nThe on-call rota is in PagerDuty; swap shifts in the team channel.\n",
    "team/lunch.md": "# Lunch\n\nTeam lunch is on Fridays at the noodle place.\n",
    "secret/plan.md": "---\nvisibility: [alice]\n---\n# Plan\n\nThe merger plan is code named bluebird.\n",
}
QUERIES = [
    {"query_id": "q-all", "text": "rotate the vault password"},
    {"query_id": "q-ops", "text": "when do deploys go out", "doc_scope": ["ops"]},
    {"query_id": "q-team", "text": "who is on call", "doc_scope": ["team"]},
]


def notes_store(tmp, *overrides):
    """(a config, the store folder): a small workspace store (five notes in ops/, team/ and
    secret/, the last visible to alice only) with three queries (whole store, ops, team)."""
    import json

    store = tmp / "notes"
    for rel, text in NOTES.items():
        (store / rel).parent.mkdir(parents=True, exist_ok=True)
        (store / rel).write_text(text)
    queries = tmp / "queries.jsonl"
    queries.write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    cfg = config(tmp, "data=workspace", f"data.path={store}", f"data.queries={queries}", "k=5",
                 *overrides)  # fmt: skip
    return cfg, store
