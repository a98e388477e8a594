"""``recall feedback RUN --format oks``: recall is not use; ``--use-events`` counts uses as
``oks wiki use`` does (open-agent-power/open-knowledge-studio @ 6a281b47, ``cli.py::wiki_use`` →
``store.py::record_access``: +1 per call, ``json.dumps(counts, indent=2)``, unknown slugs
refused), atomically."""

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.adapters import oks
from pipeline.run import runner
from tests.helpers.paths import REPO, TESTS_DATA

STORE = TESTS_DATA / "oks_store"


def _hashes(root: Path) -> dict:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def ran(tmp_path_factory):
    """One preset=oks run on a copy of the store (module-wide)."""
    from hydra import compose, initialize_config_dir

    tmp = tmp_path_factory.mktemp("oks-run")
    store = tmp / "store"
    shutil.copytree(STORE, store)
    over = ["data=oks", f"data.path={store}", f"data.queries={store / 'queries.jsonl'}"]
    over += ["preset=oks", "report=false", "inject.format=oks", "device=cpu"]
    with initialize_config_dir(config_dir=str(REPO / "conf"), version_base="1.3"):
        cfg = compose("config", overrides=[*over, f"cache_dir={tmp / 'cache'}"])
    runner.run(cfg, tmp / "run")
    return store, tmp / "run"


@pytest.fixture
def run(ran, tmp_path):
    """(a fresh copy of the store, the run): --out points the writer at the copy."""
    store = tmp_path / "store"
    shutil.copytree(ran[0], store)
    return store, ran[1]


def _feedback(run_dir, *extra, out=None, env=None):
    args = [sys.executable, "-m", "pipeline.cli.main", "feedback", str(run_dir), "--format", "oks"]
    extra = [*extra, *(["--out", str(out)] if out else [])]
    return subprocess.run([*args, *extra], capture_output=True, text=True, cwd=REPO, env=env)


def test_recall_alone_writes_nothing(ran):
    store, run_dir = ran  # the run's own data.path
    before = _hashes(store)
    for extra in ([], ["--injected"]):
        out = _feedback(run_dir, *extra)
        assert out.returncode == 0 and out.stdout.startswith("wrote nothing: for OKS a recall")
    assert _hashes(store) == before


def test_use_events_count_like_oks_wiki_use(run, tmp_path):
    store, run_dir = run
    events = tmp_path / "used.txt"
    events.write_text(
        "retry-with-backoff\n# a comment\n\n缓存失效\n" + '{"slug": "retry-with-backoff"}\n',
        encoding="utf-8",
    )
    before = _hashes(store)
    out = _feedback(run_dir, "--use-events", str(events), out=store)
    dst = store / ".oks" / "access.json"
    assert out.returncode == 0 and out.stdout.strip() == f"wrote {dst}"
    # was {"retry-with-backoff": 3, "deploy-checklist": 1}: +2, +0, new key appended, OKS's bytes
    assert dst.read_text(encoding="utf-8") == (
        '{\n  "retry-with-backoff": 5,\n  "deploy-checklist": 1,\n  "\\u7f13\\u5b58\\u5931\\u6548": 1\n}'
    )
    after = _hashes(store)
    assert {k for k in after if after[k] != before.get(k)} == {".oks/access.json"}
    uses = dict(oks.load(str(store)).nodes.select("slug", "access_count").unique().iter_rows())
    assert (uses["retry-with-backoff"], uses["缓存失效"], uses["title-only"]) == (5, 1, 0)


def test_unknown_slug_or_a_crash_mid_write_leaves_the_file_as_it_was(run, tmp_path):
    store, run_dir = run
    dst = store / ".oks" / "access.json"
    before = dst.read_bytes()
    bad = tmp_path / "bad.txt"
    bad.write_text("retry-with-backoff\nINDEX-of-nothing\nscratch\n", encoding="utf-8")
    out = _feedback(run_dir, "--use-events", str(bad), out=store)
    # scratch.md has no front matter: OKS does not read it as a page either
    assert out.returncode == 2 and "['INDEX-of-nothing', 'scratch'] are not pages" in out.stderr
    good = tmp_path / "good.txt"
    good.write_text("deploy-checklist\n", encoding="utf-8")
    env = {"PATH": "/usr/bin:/bin", "RECALL_FAULT_AT": "write:access.json"}
    killed = _feedback(run_dir, "--use-events", str(good), out=store, env=env)
    assert killed.returncode != 0 and dst.read_bytes() == before


def test_use_events_need_format_oks(ran, tmp_path):
    _store, run_dir = ran
    (tmp_path / "e.txt").write_text("retry-with-backoff\n")
    args = [sys.executable, "-m", "pipeline.cli.main", "feedback", str(run_dir)]
    out = subprocess.run(
        [*args, "--use-events", str(tmp_path / "e.txt")], capture_output=True, text=True, cwd=REPO
    )
    assert out.returncode == 2 and "--use-events is for --format oks" in out.stderr
