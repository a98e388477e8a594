"""Print one row per job of a Hydra sweep directory: the job's overrides and its metrics.

.venv/bin/python scripts/sweep_table.py /tmp/sweep [recall@5 recall@10 ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml


def main(sweep: str, metrics: list[str]) -> None:
    metrics = metrics or ["recall@2", "recall@5", "recall@10", "recall@25", "recall@50", "ndcg@10"]
    rows = []
    for m in sorted(Path(sweep).glob("*/metrics.json")):
        ov = yaml.safe_load((m.parent / ".hydra" / "overrides.yaml").read_text())
        vals = json.loads(m.read_text())
        rows.append(
            (
                " ".join(o for o in ov if not o.startswith(("out_dir", "data="))),
                [vals[k] for k in metrics],
            )
        )
    width = max((len(r[0]) for r in rows), default=10)
    print(f"{'overrides':<{width}} " + " ".join(f"{k:>10}" for k in metrics))
    for name, vals in sorted(rows, key=lambda r: -r[1][1]):
        print(f"{name:<{width}} " + " ".join(f"{v:>10.4f}" for v in vals))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
