"""The exploration notebook runs top to bottom on fresh sample runs (so it cannot rot)."""

import nbformat
from nbclient import NotebookClient

from tests.helpers.paths import REPO


def test_explore_run_notebook_executes(tmp_path, monkeypatch):
    monkeypatch.delenv("RUN_A", raising=False)
    monkeypatch.delenv("RUN_B", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    nb = nbformat.read(REPO / "notebooks" / "explore_run.ipynb", as_version=4)
    NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    text = "".join(o.get("text", "") for o in outputs)
    assert "wins" in text and "loses" in text
