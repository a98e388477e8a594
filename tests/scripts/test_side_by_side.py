"""scripts/bench/side_by_side.py: two bench_pipeline tables merged by (nodes, stage)."""

import importlib.util

from tests.helpers.paths import REPO

PATH = REPO / "scripts" / "bench" / "side_by_side.py"
spec = importlib.util.spec_from_file_location("scripts_side_by_side", PATH)
sbs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sbs)

CUDA = """real query path of preset=best ...
| nodes | edges | stage | seconds | queries/s | peak RSS MiB |
|---|---|---|---|---|---|
| 1,000 | 3,998 | channels | 0.50 | 2,000 | 300 |
| 1,000 | 3,998 | diffuse | 0.25 | 4,000 | 300 |
| 1,000 | 3,998 | end-to-end | 1.00 | 1,000 | 300 |
rows at 1,000: candidates 5
"""
CPU = """| nodes | edges | stage | seconds | queries/s | peak RSS MiB |
|---|---|---|---|---|---|
| 1,000 | 3,998 | channels | 2.00 | 500 | 280 |
| 1,000 | 3,998 | end-to-end | 5.00 | 200 | 280 |
| 1,000 | 3,998 | select | 0.10 | 10,000 | 280 |
"""


def test_rows_are_parsed_and_other_lines_skipped():
    assert sbs.stage_rows(CUDA) == {
        ("1,000", "channels"): (0.5, "2,000"),
        ("1,000", "diffuse"): (0.25, "4,000"),
        ("1,000", "end-to-end"): (1.0, "1,000"),
    }


def test_two_runs_side_by_side_with_the_speed_up():
    got = sbs.merged([("cuda", sbs.stage_rows(CUDA)), ("cpu", sbs.stage_rows(CPU))], 1000)
    assert got.splitlines() == [
        "queries: 1,000",
        "| nodes | stage | cuda s | cuda q/s | cpu s | cpu q/s | cuda speed-up |",
        "|---|---|---|---|---|---|---|",
        "| 1,000 | channels | 0.50 | 2,000 | 2.00 | 500 | 4.0× |",
        "| 1,000 | diffuse | 0.25 | 4,000 | — | — | — |",
        "| 1,000 | end-to-end | 1.00 | 1,000 | 5.00 | 200 | 5.0× |",
        "| 1,000 | select | — | — | 0.10 | 10,000 | — |",
    ]
