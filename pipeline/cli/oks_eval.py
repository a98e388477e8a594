"""``recall oks-eval <run dir> <recall-case file> [--limit 5] [--out FILE]``: score a run against
an OKS recall-case/v1 file as ``oks eval recall`` does (``pipeline.report.oks_eval``); writes OKS's
recall-eval-run/v1 JSON and prints its metrics."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.cli.main import parser


def main(args: list[str]) -> int:
    """0, after ``recall oks-eval`` wrote OKS's recall-eval-run/v1 JSON and printed its metrics."""
    from pipeline.contract import io
    from pipeline.report.oks_eval import evaluate_run

    ap = parser("oks-eval")
    ap.add_argument("run_dir")
    ap.add_argument(
        "dataset", help="an OKS recall-case/v1 file (e.g. records/experiments/eval-50.yaml)"
    )
    ap.add_argument("--limit", type=int, default=5, help="slugs per case (OKS: ≥ 5; default 5)")
    ap.add_argument("--out", default=None, help="default: <run dir>/oks-eval.json")
    a = ap.parse_args(args)
    result = evaluate_run(a.run_dir, a.dataset, a.limit)
    out = Path(a.out or Path(a.run_dir) / "oks-eval.json")
    io.write_json(out, result)
    print(json.dumps({"output": str(out.resolve()), "metrics": result["metrics"]}, indent=2))
    return 0
