"""Dockerfile.cuda cannot be built here (no Docker engine); it is linted with hadolint instead."""

import shutil
import subprocess
import sys
from pathlib import Path

from tests.helpers.paths import REPO


def test_dockerfile_cuda_passes_hadolint():
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    p = subprocess.run(
        [exe, str(REPO / "Dockerfile.cuda")], capture_output=True, text=True, timeout=60
    )
    assert p.returncode == 0, p.stdout + p.stderr
    text = (REPO / "Dockerfile.cuda").read_text()
    assert "nvidia/cuda:12" in text and "'.[gpu]'" in text and 'ENTRYPOINT ["recall"]' in text


def test_one_faiss_per_install():
    """faiss-cpu and faiss-gpu write the same ``faiss`` module: never both in one install."""
    import re
    import tomllib

    proj = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = proj["optional-dependencies"]

    def faiss(reqs):
        return {re.split(r"[<>=\[ ;]", r)[0] for r in reqs if r.startswith("faiss")}

    assert faiss(proj["dependencies"]) == set()
    assert faiss(extras["cpu"]) == {"faiss-cpu"} and faiss(extras["gpu"]) == {"faiss-gpu-cu12"}
    assert "-e '.[dev,cpu]'" in (REPO / "Makefile").read_text()
    installs = re.findall(
        r"pip install[^\n]*'\.\[([^\]]*)\]'", (REPO / "Dockerfile.cuda").read_text()
    )
    assert installs == ["gpu"]
