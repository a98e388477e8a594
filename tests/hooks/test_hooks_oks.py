"""The OKS search backend (``pipeline/hooks/oks.py``): loaded the way OKS loads a connector
backend, and — in a Python 3.12 venv with OKS from PyPI — called by OKS's own ``recall()`` and its
auto-recall hook script, which answer from the recall service."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from pipeline.hooks.oks import Hit, RecallSearchBackend, hits_from_rows, slug_of
from pipeline.hooks.source import Source
from tests.helpers.hooks_fakes import (
    HIT,
    MISS,
    ROWS_HIT,
    UNKNOWN,
    FakeCache,
    FakeService,
    build_app,
    serving,
)
from tests.helpers.paths import REPO

OKS_VERSION = "0.6.23"  # PyPI's newest when written; the interface is the same since v0.6.0
PAGES = {  # path under wiki/ → (title, type, area)
    "concepts/alpha.md": ("Key rotation", "strategy", "eng"),
    "rules/beta.md": ("On-call rules", "anti-pattern", "ops"),
    "concepts/gamma.md": ("Glossary", "concept", "eng"),
}


@pytest.fixture
def service():
    return FakeService()


def instance(root: Path, settings: dict) -> Path:
    """A tiny OKS instance: PAGES as wiki pages, settings/recall.yaml with ``settings``."""
    for path, (title, typ, area) in PAGES.items():
        f = root / "wiki" / path
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"---\ntitle: {title}\ntype: {typ}\narea: {area}\ncreated: 2026-11-01\n---\n"
                     f"# {title}\n\nBody of {title}.\n")  # fmt: skip
    (root / "settings").mkdir(exist_ok=True)
    (root / "settings" / "recall.yaml").write_text(json.dumps(settings))  # JSON is YAML
    return root


def test_hits_hand_computed():
    # one hit per page, its first row in rank order; slug = file stem of doc_id
    hits = hits_from_rows(ROWS_HIT, 10, None, None)
    got = [(h.slug, h.score, h.backend, h.extra["best_node"]) for h in hits]
    assert got == [
        ("alpha", 3.5, "recall", "concepts/alpha.md#1"),
        ("beta", 1.25, "recall", "rules/beta.md#0"),
        ("gamma", 0.5, "recall", "concepts/gamma.md#0"),
    ]
    assert [h.slug for h in hits_from_rows(ROWS_HIT, 2, None, None)] == ["alpha", "beta"]
    areas = {"alpha": "eng", "beta": "ops", "gamma": "eng"}
    assert [h.slug for h in hits_from_rows(ROWS_HIT, 10, areas, "ops")] == ["beta"]
    # OKS's fts5 scope filter: comma-separated areas, stripped and lowered on both sides
    both = hits_from_rows(ROWS_HIT, 10, areas, " OPS, eng")
    assert [h.slug for h in both] == ["alpha", "beta", "gamma"]
    assert (
        slug_of({"node_id": "x/y.md#3"}) == "y"
        and slug_of({"node_id": "n", "doc_id": "a/b.md"}) == "b"
    )


def test_entry_point_loads_like_oks(tmp_path, service):
    # OKS: for ep in entry_points(group="oks_search_backend"): if ep.name == n: ep.load()(root=root)
    table = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]
    value = table["oks_search_backend"]["recall"]
    ep = EntryPoint(name="recall", value=value, group="oks_search_backend")
    with serving(build_app(service)) as url:
        root = instance(
            tmp_path, {"search_backend": "recall", "recall_pipeline": {"endpoint": url}}
        )
        backend = ep.load()(root=str(root))
        hits = backend.search(HIT, limit=10, scope=None, goal="g")  # OKS may pass goal=
        miss = backend.search(MISS, limit=10, scope=None)
        none = backend.search(UNKNOWN, limit=10, scope=None)
    want = service.recall(HIT, format="oks")["rows"]
    slugs = list(dict.fromkeys(slug_of(r) for r in want))
    assert [h.slug for h in hits] == slugs == ["alpha", "beta", "gamma"]
    assert [h.score for h in hits] == [3.5, 1.25, 0.5]
    assert [(h.slug, h.score) for h in miss] == [("beta", 2.75)]  # computed by the service
    assert none == []
    assert isinstance(hits[0], Hit)  # no OKS in this venv: the same fields, our class


def test_cache_read_and_scope(service):
    backend = RecallSearchBackend(root=None, source=Source(cache=FakeCache()))
    backend.index([{"slug": "alpha", "area": "Eng"}, {"slug": "beta", "area": "ops"}])
    assert [h.slug for h in backend.search(HIT, limit=10, scope="eng")] == ["alpha"]
    assert backend.search(MISS, limit=10) == []  # cache only: a miss has no hits


def test_bad_settings_one_line(tmp_path):
    with pytest.raises(ValueError, match="no recall_pipeline: mapping"):
        RecallSearchBackend(root=str(instance(tmp_path, {"search_backend": "recall"}))).search("q")
    bad = {"search_backend": "recall", "recall_pipeline": {"endpont": "http://127.0.0.1:1"}}
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['endpont'\]"):
        RecallSearchBackend(root=str(instance(tmp_path, bad))).search("q")
    bad = {"search_backend": "recall", "recall_pipeline": {"endpoint": "127.0.0.1:8765"}}
    with pytest.raises(ValueError, match="not an absolute http"):
        RecallSearchBackend(root=str(instance(tmp_path, bad))).search("q")


# --- OKS itself (Python >= 3.12, its own venv) -------------------------------------------------


def python312() -> str | None:
    """A working Python >= 3.12: pyenv's, else python3.12/3.13 on PATH (a pyenv shim may not run)."""
    pyenv = sorted(Path("/root/.pyenv/versions").glob("3.1[23].*/bin/python3"), reverse=True)
    for py in [*map(str, pyenv), shutil.which("python3.12"), shutil.which("python3.13")]:
        probe = [py, "-c", "import sys; assert sys.version_info >= (3, 12)"] if py else None
        if probe and subprocess.run(probe, capture_output=True).returncode == 0:
            return py
    return None


def oks_venv() -> Path:
    """A venv with OKS from PyPI (made once, in a cache folder outside the repo) and this project
    installed as the README says, ``pip install --no-deps`` (again on every call: the code under
    test); none of the batch engine's dependencies is there."""
    py = python312()
    if py is None:
        pytest.skip("no Python >= 3.12 (OKS requires-python >= 3.12)")
    home = Path(
        os.environ.get("RECALL_HOOK_ENVS", Path.home() / ".cache/recall-pipeline/hook-envs")
    )
    venv = home / f"oks-{OKS_VERSION}-nodeps"
    bin_py = venv / "bin" / "python"
    if not (venv / ".ready").exists():
        shutil.rmtree(venv, ignore_errors=True)
        subprocess.run([py, "-m", "venv", str(venv)], check=True)
        pip = [str(bin_py), "-m", "pip", "install", "-q", f"open-knowledge-studio=={OKS_VERSION}"]
        subprocess.run(pip, check=True, timeout=600)
        (venv / ".ready").touch()
    build = venv.parent / f"{venv.name}-src"  # the tracked files only (no .venv, runs, caches)
    shutil.rmtree(build, ignore_errors=True)
    files = subprocess.check_output(["git", "-C", str(REPO), "ls-files", "pyproject.toml",
                                     "pipeline", "conf", "README.md", "LICENSE"], text=True)  # fmt: skip
    for rel in files.split():
        if (REPO / rel).is_file():
            (build / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / rel, build / rel)
    install = [str(bin_py), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall"]
    subprocess.run([*install, str(build)], check=True, timeout=600)
    heavy = "omegaconf hydra torch polars numpy pyarrow".split()
    probe = "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) for m in sys.argv[1:]))"
    assert subprocess.run([str(bin_py), "-c", probe, *heavy]).returncode == 0, "heavy deps there"
    return venv


RECALL_SCRIPT = """
import json, sys
from knowledge_studio.recall import recall
out = recall(query=sys.argv[1], limit=10, goal="none", knowledge_only=True)
print(json.dumps([[h["slug"], h["relevance"], h["backend"], h["title"]] for h in out["knowledge"]]))
"""


@pytest.mark.slow  # the first run installs OKS and its dependencies from PyPI (~30 s)
def test_real_oks_recall_and_hook(tmp_path, service):
    venv = oks_venv()
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    env.pop("PYTHONPATH", None)  # the installed copy answers, not the checkout
    with serving(build_app(service)) as url:
        settings = {"search_backend": "recall", "recall_pipeline": {"endpoint": url}}
        root = instance(tmp_path / "kb", settings)
        env["OKS_ROOT"] = str(root)
        run = [str(venv / "bin" / "python"), "-c", RECALL_SCRIPT, HIT]
        got = json.loads(
            subprocess.run(run, env=env, capture_output=True, text=True, check=True).stdout
        )
        cli = [str(venv / "bin" / "oks"), "recall", HIT, "--format", "json", "--knowledge-only"]
        cli_out = subprocess.run([*cli, "--goal", "none", "-n", "10"], env=env, capture_output=True,
                                 text=True, check=True).stdout  # fmt: skip
        hook = next(
            venv.glob(
                "lib/python3*/site-packages/knowledge_studio/_assets/hooks/user-prompt-recall.py"
            )
        )
        payload = json.dumps({"prompt": HIT, "session_id": "t1", "cwd": str(root)})
        out = subprocess.run([str(venv / "bin" / "python"), str(hook)], input=payload, env=env,
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
    # OKS's recall(): settings/recall.yaml's search_backend → our entry point → the service's rows,
    # one per page, relevance = the row's score, the page's own title filled in by OKS
    assert got == [
        ["alpha", 3.5, "recall", "Key rotation"],
        ["beta", 1.25, "recall", "On-call rules"],
        ["gamma", 0.5, "recall", "Glossary"],
    ]
    # `oks recall` (the CLI) gives the same pages
    cli_hits = json.loads(cli_out)["knowledge"]
    assert [[h["slug"], h["relevance"], h["backend"]] for h in cli_hits] == [g[:3] for g in got]
    # the hook injects pages at relevance >= 0.7 (its floor): alpha and beta, not gamma
    assert "(alpha)" in out and "(beta)" in out and "(gamma)" not in out, out


@pytest.mark.slow  # the OKS venv of test_real_oks_recall_and_hook
def test_real_oks_recall_with_the_server_down_is_one_line(tmp_path):
    venv = oks_venv()
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}"
    settings = {"search_backend": "recall", "recall_pipeline": {"endpoint": down}}
    root = instance(tmp_path / "kb", settings)
    env = {**os.environ, "HOME": str(tmp_path / "home"), "OKS_ROOT": str(root), "COLUMNS": "300"}
    env.pop("PYTHONPATH", None)
    cli = [str(venv / "bin" / "oks"), "recall", HIT, "--knowledge-only", "--goal", "none"]
    run = subprocess.run(cli, env=env, capture_output=True, text=True)
    out = (run.stdout + run.stderr).strip()
    assert run.returncode == 2, out
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    assert out.startswith(f"recall backend: {down}/recall: ") and "recall serve" in out
