"""ReMe's ``search`` on the REAL service over a workspace of markdown notes (sections with line
numbers): each result's ``start_line``/``end_line`` is the section's own lines in its file, read
back from the store independently, and the ``reme`` block's header shows the same span."""

from __future__ import annotations

from starlette.testclient import TestClient

from pipeline.contract.registry import call_target
from pipeline.serve import Service
from pipeline.serve.app import build_app
from tests.helpers.paths import TINY_WS
from tests.helpers.serve_support import config


def test_results_carry_the_chunks_real_lines(tmp_path):
    cfg = config(
        tmp_path,
        "data=workspace",
        f"data.path={TINY_WS}",
        f"data.queries={TINY_WS / 'queries.jsonl'}",
        "preset=reme",
        "inject.format=reme",
    )
    nodes = call_target(cfg.data).nodes  # the store read on its own
    lines = {n: (a, b) for n, a, b in nodes.select("node_id", "start_line", "end_line").rows()}
    service = Service(cfg)
    try:
        client = TestClient(build_app(service))
        seen = 0
        for text in ("farm harvest", "alice"):
            r = client.post("/reme/search", json={"query": text, "limit": 3})
            assert r.status_code == 200, r.text
            results = r.json()["metadata"]["results"]
            heads = [x.split(" ")[1] for x in r.json()["answer"].splitlines() if x[:10] == "=" * 10]
            assert heads == [f"{c['path']}:{c['start_line']}-{c['end_line']}" for c in results]
            for c in results:
                assert (c["start_line"], c["end_line"]) == lines[c["id"]] and c["start_line"] > 0
            seen += len(results)
        assert seen > 0
    finally:
        service.close()
