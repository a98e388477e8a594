"""``recall --help`` lists every preset and data option of conf/ and exactly the command table;
each table entry's module runs its command; each command's --help is its own; an unknown command
names the choices; a mistyped nested key names the closest key (never Hydra's ``+key=`` advice)."""

import importlib
import inspect
import subprocess
import sys

import pytest

from pipeline.cli.main import COMMANDS, check_overrides, command_help, main
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


def _help_commands(out: str) -> list[str]:
    """The command names of the ``commands:`` block of ``recall --help``, in order."""
    block = out.split("commands:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    return [ln.split()[0] for ln in block if ln[2] != " "]  # wrapped lines start further in


def test_top_level_help_lists_exactly_the_command_table(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert _help_commands(out) == list(COMMANDS)
    assert _help_commands(out) == [
        "run", "compare", "report", "export-trec", "import-trec", "analyze", "feedback",
        "precompute", "serve", "lookup", "mcp", "oks-eval", "tune",
    ]  # fmt: skip
    lines = out.splitlines()
    at = lines.index(
        "  export-trec  recall export-trec <run dir> <file> [--level node_id|doc_id] [--tag NAME]"
    )
    assert lines[at + 1] == "               [--score score|rank]"
    assert (
        "  run          run recall for every query of a dataset and write a run directory" in lines
    )


def test_a_hydra_commands_help_joins_its_wrapped_syntax():
    assert command_help("tune").splitlines()[0] == (
        "usage: recall tune data=<d> preset=<p> [tune.trials=40 tune.metric=recall@5 tune.seed=13 "
        "tune.space=<entry of conf/tune_spaces.yaml> tune.name=<new preset>]"
    )
    assert command_help("run").splitlines()[:3] == [
        "usage: recall run [overrides]",
        "",
        "run recall for every query of a dataset and write a run directory",
    ]


@pytest.mark.parametrize("cmd", list(COMMANDS))
def test_each_table_entry_names_a_module_with_its_entry_point(cmd):
    command = COMMANDS[cmd]
    module = importlib.import_module(f"pipeline.cli.{command.module}")
    entry = getattr(module, command.entry)
    assert callable(entry) and list(inspect.signature(entry).parameters) == ["args"]
    assert entry.__doc__  # a public function of the command's module


def test_every_command_module_is_in_the_table():
    """One module per command: every module of pipeline/cli/ runs a command of the table, but
    the entry point and the Hydra loader."""
    modules = {p.stem for p in (REPO / "pipeline" / "cli").glob("*.py")}
    assert modules - {c.module for c in COMMANDS.values()} == {"__init__", "main", "hydra_guard"}


def test_dispatch_calls_the_table_entry_with_the_arguments(monkeypatch):
    from pipeline.cli import trec

    seen = []
    monkeypatch.setattr(trec, "import_main", lambda args: seen.append(args) or 7)
    assert main(["import-trec", "a.run", "--out", "d"]) == 7
    assert seen == [["a.run", "--out", "d"]]


def test_an_unknown_command_names_the_choices(capsys):
    assert main(["compar", "runs/a"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: command='compar' is not valid (did you mean 'compare'?); choose from "
        "['analyze', 'compare', 'export-trec', 'feedback', 'import-trec', 'lookup', 'mcp', "
        "'oks-eval', 'precompute', 'report', 'run', 'serve', 'tune']"
    ]


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_each_command_prints_its_own_help(cmd, capsys):
    assert main([cmd, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: recall {cmd}")
    assert " ".join(COMMANDS[cmd].help.split()) in " ".join(out.split())  # its description
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


def test_an_argparse_commands_arguments_are_not_hydra_overrides(compose, tmp_path, capsys):
    """``recall export-trec runs/lr=0.3 out.trec``: a path with ``=`` is a run directory, not an
    override (it was refused as ``unknown option 'runs/lr'``); a Hydra command still checks them."""
    from pipeline.run import runner

    run_dir = tmp_path / "runs" / "lr=0.3"
    runner.run(compose(["data=sample", "preset=bm25", "embed=hashing"]), run_dir)
    out = tmp_path / "out.trec"
    assert main(["export-trec", str(run_dir), str(out)]) == 0
    first = out.read_text().splitlines()[0].split()
    assert first[:2] == ["q01", "Q0"] and first[3] == "1"  # qid Q0 docid rank score tag
    capsys.readouterr()
    assert main(["run", "data.pth=x"]) == 2
    assert "unknown option 'data.pth'" in capsys.readouterr().err
