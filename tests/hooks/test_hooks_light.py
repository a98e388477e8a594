"""The hooks are standard-library clients (OKS issue #53 (a), (c)): importing them loads none of the
batch engine's dependencies, and with those made unimportable (as in OKS's venv after a
``pip install --no-deps`` of this project) the OKS backend still answers from ``recall serve``,
and says on one line when the service is down. The config resolvers still register whichever of
``pipeline`` and ``omegaconf`` is imported first."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

from tests.helpers.hooks_fakes import HIT, FakeService, build_app, serving
from tests.helpers.paths import REPO

HEAVY = ("omegaconf", "hydra", "torch", "polars", "numpy", "pyarrow", "starlette", "yaml")
BLOCK = f"""
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {HEAVY[:-1]!r}:  # PyYAML stays: OKS depends on it
            raise ImportError(f"blocked: {{name}}")
sys.meta_path.insert(0, Block())
"""
SEARCH = """
import json, sys
from pipeline.hooks.oks import RecallSearchBackend
backend = RecallSearchBackend(root=sys.argv[1])
try:
    hits = backend.search(sys.argv[2], limit=10)
    print(json.dumps([[h.slug, h.score, h.backend] for h in hits]))
except ValueError as exc:
    print(json.dumps({"error": str(exc)}))
"""


HERMES = """
import sys
from pipeline.hooks.hermes import RecallMemoryProvider
from pipeline.hooks.source import Source
from pipeline.hooks.client import HttpRecaller
provider = RecallMemoryProvider(Source(recaller=HttpRecaller(sys.argv[1]), format="oks"))
provider.initialize("s1")
print(provider.prefetch(sys.argv[2], session_id="s1"))
"""


def python(code: str, *args: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with the repo on the path."""
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_importing_the_hooks_loads_no_heavy_package():
    code = (
        "import sys, json\nimport pipeline.hooks.oks, pipeline.hooks.hermes\n"
        "import pipeline.hooks.client, pipeline.hooks.source\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    run = python(code)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == []


def test_resolvers_register_whichever_is_imported_first():
    conf = "{'k': 3, 'a': '${min:200,${mul:${k},5}}', 'b': '${if_eq:oks,oks,10,5}'}"
    for first in ("import pipeline\nimport omegaconf", "import omegaconf\nimport pipeline"):
        code = f"{first}\nc = omegaconf.OmegaConf.create({conf})\nprint(c.a, c.b)"
        run = python(code)
        assert run.returncode == 0, run.stderr
        assert run.stdout.split() == ["15", "10"]  # min(200, 3·5), oks == oks → 10


def _instance(root, endpoint: str) -> str:
    (root / "settings").mkdir(parents=True)
    settings = {"search_backend": "recall", "recall_pipeline": {"endpoint": endpoint}}
    (root / "settings" / "recall.yaml").write_text(json.dumps(settings))
    return str(root)


def test_oks_backend_without_the_engine_answers_and_fails_on_one_line(tmp_path):
    with serving(build_app(FakeService())) as url:
        run = python(BLOCK + SEARCH, _instance(tmp_path / "up", url), HIT)
    assert run.returncode == 0, run.stderr
    # FakeService's HIT rows, one hit per page (alpha's first row wins), no OKS → our Hit class
    assert json.loads(run.stdout) == [
        ["alpha", 3.5, "recall"],
        ["beta", 1.25, "recall"],
        ["gamma", 0.5, "recall"],
    ]
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = f"http://127.0.0.1:{port}"
    run = python(BLOCK + SEARCH, _instance(tmp_path / "down", down), HIT)
    assert run.returncode == 0, run.stderr
    error = json.loads(run.stdout)["error"]
    assert error.startswith(f"recall backend: {down}/recall: ") and "\n" not in error
    assert error.endswith("is `recall serve` running there?")


def test_hermes_provider_without_the_engine_injects_the_turns_recall():
    with serving(build_app(FakeService())) as url:
        run = python(BLOCK + HERMES, url, HIT)
    assert run.returncode == 0, run.stderr
    want = FakeService().recall(HIT, format="oks")["injection"]  # the service's answer, this turn
    assert run.stdout.strip() == want.strip() != ""
