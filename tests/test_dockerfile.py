"""Dockerfile.cuda cannot be built here (no Docker engine); it is linted with hadolint instead."""
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO


def test_dockerfile_cuda_passes_hadolint():
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    p = subprocess.run([exe, str(REPO / "Dockerfile.cuda")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    text = (REPO / "Dockerfile.cuda").read_text()
    assert "nvidia/cuda:12" in text and "'.[gpu]'" in text and 'ENTRYPOINT ["recall"]' in text
