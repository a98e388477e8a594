"""``recall --help`` lists every preset and data option of conf/; each command's --help is its
own; a mistyped nested key names the closest key (never Hydra's ``+key=`` advice)."""

import subprocess
import sys

import pytest

from pipeline.cli.main import COMMANDS, check_overrides, main
from pipeline.contract.errors import UserError
from tests.helpers.paths import REPO


def test_top_level_help_lists_every_preset_and_data_option(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    preset_line = next(ln for ln in out.splitlines() if ln.strip().startswith("preset="))
    presets = preset_line.strip().removeprefix("preset=").split("|")
    assert {"reme", "oks", "bme", "oks_team", "hipporag", "best", "bm25"} <= set(presets)
    assert sorted(presets) == sorted(p.stem for p in (REPO / "conf" / "preset").glob("*.yaml"))
    data_line = next(ln for ln in out.splitlines() if ln.strip().startswith("data="))
    assert {"reme", "oks", "bme", "workspace", "parquet"} <= set(data_line.strip()[5:].split("|"))
    assert "data.queries=<file>" in out and "data.queries_format=auto|jsonl|text" in out


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_each_command_prints_its_own_help(cmd, capsys):
    assert main([cmd, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: recall {cmd}")
    assert " ".join(COMMANDS[cmd].split()) in " ".join(out.split())  # its description
    assert "commands:" not in out  # not the global usage


def test_feedback_help_is_its_argparse_help(capsys):
    assert main(["feedback", "runs/x", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: recall feedback") and "--format" in out and "--injected" in out


def test_nested_key_typo_names_the_closest_key():
    with pytest.raises(UserError, match=r"unknown option 'data.pth'.*did you mean 'data.path'"):
        check_overrides(["data=workspace", "data.pth=x"])
    with pytest.raises(UserError, match=r"did you mean 'fuse.weights.lexical'"):
        check_overrides(["fuse.weights.lexcal=0.3"])
    with pytest.raises(UserError, match=r"'k' is not a group of options"):
        check_overrides(["k.x=1"])
    # keys that exist pass, a MISSING one (data.path=???) included; +key adds on purpose
    check_overrides(["data=workspace", "data.path=x", "data.queries_format=text", "+data.y=1"])
    check_overrides(["preset=reme", "lexical.idf=reme", "tune.trials=3"])


def test_nested_key_typo_on_the_command_line_is_one_line(tmp_path):
    p = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "data=workspace", "data.pth=x"],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr and "+data.pth" not in p.stderr
    assert [ln for ln in p.stderr.splitlines() if ln.strip()] == [
        ln for ln in p.stderr.splitlines() if ln.startswith("error: unknown option 'data.pth'")
    ]


def test_a_closed_pipe_ends_help_quietly():
    """``recall --help | head -1``: the reader is gone before the help is written (closed here
    before the child has imported anything); no traceback, the status a shell gives a command
    SIGPIPE stopped (141)."""
    p = subprocess.Popen(
        [sys.executable, "-m", "pipeline", "--help"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    p.stdout.close()
    err = p.stderr.read().decode()
    assert p.wait(timeout=120) == 141
    assert "Traceback" not in err and "BrokenPipeError" not in err
