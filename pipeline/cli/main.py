"""The ``recall`` entry point: the command table, the shared Hydra override checks and dispatch.

Each command runs in its own module under ``pipeline/cli/`` (:data:`COMMANDS`): ``recall <command>
[args]`` looks the name up there, checks the Hydra overrides among the arguments, and calls the
module's entry point with the arguments. User errors (bad data, bad options) print one line naming
the file/field and the fix, exit 2.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.contract import paths
from pipeline.contract.errors import UserError, reported, require_one_of

if TYPE_CHECKING:
    import argparse

CONF_DIR = str(paths.CONF_DIR)
logging.getLogger("faiss.loader").setLevel(logging.WARNING)  # its AVX probing is noise to users


@dataclass(frozen=True)
class Command:
    """One ``recall`` command: the module that runs it and what the help says of it.

    ``entry`` is the function of ``pipeline.cli.<module>`` that runs the command:
    ``entry(args: list[str]) -> int`` (the exit status). A Hydra command's module may define
    ``overrides(args) -> list[str]``, the Hydra overrides among its arguments (default: all of them).
    """

    module: str  # under pipeline.cli
    help: str  # one line: the description under `recall <command> --help`
    syntax: tuple[str, ...] = ()  # its lines in `recall --help` (later ones wrapped); () → `help`
    entry: str = "main"
    hydra: bool = False  # composed by Hydra: `--help` is command_help(); else argparse's own


COMMANDS: dict[str, Command] = {
    "run": Command(
        "run",
        "run recall for every query of a dataset and write a run directory",
        hydra=True,
    ),
    "compare": Command(
        "compare",
        "compare finished runs (metrics, paired t-tests vs a baseline, per group)",
        ("recall compare <run dirs or one sweep dir> [--baseline NAME] [--out DIR] [--ci]",),
    ),
    "report": Command(
        "report",
        "write report.md / report.html with plots for a finished run",
        ("recall report <run dir>",),
    ),
    "export-trec": Command(
        "trec",
        "write a run's recall as a TREC run file (qid Q0 docid rank score tag)",
        (
            "recall export-trec <run dir> <file> [--level node_id|doc_id] [--tag NAME]",
            "[--score score|rank]",
        ),
        entry="export_main",
    ),
    "import-trec": Command(
        "trec",
        "turn an external TREC run file into a run directory (to compare or fuse)",
        ("recall import-trec <run file> --out DIR [--qrels FILE] [--level node_id|doc_id]",),
        entry="import_main",
    ),
    "analyze": Command(
        "analyze",
        "analyses of a finished run: NMF topics (topics, node topics, recall spread), novelty.parquet",
        ("recall analyze <run dir>",),
    ),
    "feedback": Command(
        "feedback",
        "apply a run's recall (or injection) to the signals as a new table revision, or "
        "(--format reme|...) write it back into the system's store",
        (
            "recall feedback <run dir> [--format signals|bme|oks|reme] [--signals TABLE] [--out PATH]",
            "[--injected] [--now ISO]",
        ),
    ),
    "precompute": Command(
        "precompute",
        "update the recall cache under cache_dir: recompute only queries whose key changed",
        ("recall precompute [run overrides] cache_dir=<dir> [namespace=<name>]",),
        hydra=True,
    ),
    "serve": Command(
        "serve",
        "serve the recall cache over HTTP (POST /recall, GET /health); misses computed as a run",
        ("recall serve [run overrides] cache_dir=<dir> [host=127.0.0.1 port=8765]",),
        entry="serve_main",
        hydra=True,
    ),
    "lookup": Command(
        "serve",
        "print the recall cache entry of one query text as JSON (no server)",
        ("recall lookup [run overrides] cache_dir=<dir> text=<query text> [scope=<doc scope>]",),
        entry="lookup_main",
        hydra=True,
    ),
    "mcp": Command(
        "mcp_command",
        "serve the recall cache as an MCP server (tool `recall`) over stdio or streamable HTTP",
        (
            "recall mcp [run overrides] cache_dir=<dir> [transport=stdio|http]",
            "[host=127.0.0.1 port=8765]",
        ),
        hydra=True,
    ),
    "oks-eval": Command(
        "oks_eval",
        "score a run against an OKS recall-case/v1 file as `oks eval recall` does (its metrics)",
        ("recall oks-eval <run dir> <recall-case file> [--limit 5] [--out FILE]",),
    ),
    "tune": Command(
        "tune",
        "search a preset's weights on a dev set (Hydra Optuna sweeper); write the best as a new preset",
        (
            "recall tune data=<d> preset=<p> [tune.trials=40 tune.metric=recall@5 tune.seed=13",
            "  tune.space=<entry of conf/tune_spaces.yaml> tune.name=<new preset>]",
        ),
        hydra=True,
    ),
}
NAME_WIDTH = 13  # the command column of `recall --help`; a wrapped syntax line starts after it
USAGE = """usage: recall <command> [overrides]

commands:
{commands}

common overrides (Hydra syntax, any config key works):
  data={data}
  data.path=<file or folder>   data.queries=<file>   data.qrels=<file>   data.limit_queries=<n>
  data.queries_format={queries_formats}   (README: "Queries and judgements")
  preset={presets}
  k=50   device=auto|cpu|cuda
  diffuse=none|pedsa|ppr|expand   select=topk|dpp|mmr   novelty=none|bme   signals=none|default
  graph.mentions=true   fuse.weights.lexical=0.3   score.terms.graph=2.0   include_archived=true
  out_dir=<dir>   embed=minilm|hashing   cache_dir=<dir>
  lexical.tokenizer=auto|english|cjk_char|jieba        embed.model_path=<local sentence-transformers folder>
  --multirun preset=dense,bm25,best                    (a sweep; one run dir per job)
  --cfg job                                            (print the composed config)

example: recall run data=locomo preset=best out_dir=runs/locomo-best
"""


def _options(group: str) -> str:
    """The options of a config group (its ``conf/<group>/*.yaml`` files), ``|``-separated."""
    return "|".join(sorted(p.stem for p in (Path(CONF_DIR) / group).glob("*.yaml")))


def command_lines() -> list[str]:
    """The ``commands:`` block of ``recall --help``: one entry per row of :data:`COMMANDS`, in
    table order, its syntax (or, without one, its description) after the name column."""
    lines = []
    for name, command in COMMANDS.items():
        first, *wrapped = command.syntax or (command.help,)
        lines.append(f"  {name:<{NAME_WIDTH}}{first}")
        lines += [" " * (NAME_WIDTH + 2) + line for line in wrapped]
    return lines


def usage() -> str:
    """The top-level help: the command table, then the common overrides with every preset and data
    option read from ``conf/`` (a new preset file is listed without editing this module)."""
    from pipeline.adapters.query_files import QUERY_FORMATS

    return USAGE.format(
        commands="\n".join(command_lines()),
        data=_options("data"),
        presets=_options("preset"),
        queries_formats="|".join(QUERY_FORMATS),
    )


def command_help(cmd: str) -> str:
    """``recall <cmd> --help`` for the Hydra commands (run, precompute, tune, serve, lookup, mcp):
    its syntax and description, then the common overrides."""
    command = COMMANDS[cmd]
    syntax = " ".join(line.strip() for line in command.syntax) or f"recall {cmd} [overrides]"
    text = usage()
    common = text[text.index("common overrides") :]
    return f"usage: {syntax}\n\n{command.help}\n\n{common}"


def parser(cmd: str) -> argparse.ArgumentParser:
    """The argparse parser a command on finished runs starts from: ``prog`` ``recall <cmd>``, its
    description from :data:`COMMANDS`."""
    import argparse

    return argparse.ArgumentParser(prog=f"recall {cmd}", description=COMMANDS[cmd].help)


def check_overrides(args: list[str]) -> None:
    """Catch mistyped group options and top-level keys before Hydra, with the closest valid name."""
    import difflib

    import yaml

    conf = Path(CONF_DIR)
    groups = {
        p.name: sorted(x.stem for x in p.glob("*.yaml")) for p in conf.iterdir() if p.is_dir()
    }
    top = set(yaml.safe_load((conf / "config.yaml").read_text())) | set(groups) | {"hydra"}
    for arg in args:
        if arg.startswith("-") or "=" not in arg or arg[0] in "+~":
            continue
        key, value = arg.split("=", 1)
        head = key.split(".")[0].split("/")[0]
        if head not in top:
            close = difflib.get_close_matches(head, sorted(top), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise UserError(f"unknown option {head!r} in {arg!r}{hint}; see recall --help")
        if key in groups and "(" not in value:  # choice(...), interval(...): sweep expressions
            for v in value.split(","):
                require_one_of(key, v, groups[key])
    check_nested_keys(args, set(groups))


def _composed(choices: list[str]):
    """The config Hydra composes with only the group choices ``choices`` (no other override);
    None where Hydra is in use already or refuses it (Hydra then reports the problem itself)."""
    from hydra.core.global_hydra import GlobalHydra

    from pipeline.cli.hydra_guard import compose

    if GlobalHydra.instance().is_initialized():
        return None
    try:
        return compose(choices)
    except Exception:  # noqa: BLE001 — any composition problem is Hydra's to report
        return None


def check_nested_keys(args: list[str], groups: set[str]) -> None:
    """A dotted key (``data.pth=x``) that the composed config lacks is a UserError naming the
    closest key there, never Hydra's ``+data.pth=`` advice (``+key=`` adds a key on purpose)."""
    import difflib

    from omegaconf import DictConfig, OmegaConf

    pairs = [a.split("=", 1) for a in args if "=" in a and not a.startswith(("-", "+", "~"))]
    dotted = [(k, v) for k, v in pairs if "." in k and not k.startswith("hydra.")]
    if not dotted:
        return
    choices = [f"{k}={v}" for k, v in pairs if k in groups and "," not in v and "(" not in v]
    cfg = _composed(choices)
    if cfg is None:
        return
    for key, value in dotted:
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent, default=None, throw_on_resolution_failure=False)
        if isinstance(node, DictConfig) and leaf in node.keys():
            continue
        if not isinstance(node, DictConfig):
            raise UserError(
                f"unknown option {key!r} in '{key}={value}': {parent!r} is not a group of "
                f"options; see recall --help (or recall run --cfg job)"
            )
        close = difflib.get_close_matches(leaf, [str(k) for k in node], n=1)
        hint = f" (did you mean '{parent}.{close[0]}'?)" if close else ""
        raise UserError(
            f"unknown option {key!r} in '{key}={value}'{hint}; the keys of {parent} are "
            f"{sorted(str(k) for k in node)}"
        )


def main(argv: list[str] | None = None) -> int:
    """Dispatch ``recall <command> [args]`` through :data:`COMMANDS`; the exit status.

    A reader that closes the pipe early (``recall --help | head``) ends the output quietly, as
    the Python docs' SIGPIPE note recommends: stdout goes to devnull, the status is 141
    (128 + SIGPIPE), as a shell reports a command a closed pipe stopped."""
    try:
        return _dispatch(argv)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


def _dispatch(argv: list[str] | None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    cmd, rest = argv[0], argv[1:]
    status = reported(lambda: require_one_of("command", cmd, COMMANDS))
    if status:
        return status
    command = COMMANDS[cmd]
    if command.hydra and any(a in ("-h", "--help") for a in rest):
        print(command_help(cmd))
        return 0
    module = importlib.import_module(f"pipeline.cli.{command.module}")
    entry = getattr(module, command.entry)
    if any(a in ("-h", "--help") for a in rest):
        try:
            return entry(["--help"])
        except SystemExit as exc:  # argparse exits after printing the help
            return int(exc.code or 0)
    # a Hydra command's key=value arguments are checked as overrides (a module may say which of
    # its arguments are, ``overrides(args)``); an argparse command's arguments are its own (a
    # run directory may be named ``runs/lr=0.3``)
    overrides = getattr(module, "overrides", list if command.hydra else (lambda args: []))
    status = reported(lambda: check_overrides(overrides(rest)))
    if status:
        return status
    return reported(lambda: entry(rest))


if __name__ == "__main__":
    sys.exit(main())
