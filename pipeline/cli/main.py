"""The ``recall`` command: ``recall run [hydra overrides]`` (``--multirun`` sweeps too).

User errors (bad data, bad options) print one line naming the file/field and the fix, exit 2.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.contract import paths
from pipeline.contract.errors import UserError, reported, require_one_of

if TYPE_CHECKING:
    import argparse

    from omegaconf import DictConfig

CONF_DIR = str(paths.CONF_DIR)
COMMANDS = {
    "run": "run recall for every query of a dataset and write a run directory",
    "compare": "compare finished runs (metrics, paired t-tests vs a baseline, per group)",
    "report": "write report.md / report.html with plots for a finished run",
    "export-trec": "write a run's recall as a TREC run file (qid Q0 docid rank score tag)",
    "import-trec": "turn an external TREC run file into a run directory (to compare or fuse)",
    "analyze": "analyses of a finished run: NMF topics (topics, node topics, recall spread), novelty.parquet",
    "tune": "search a preset's weights on a dev set (Hydra Optuna sweeper); write the best as a new preset",
    "feedback": "apply a run's recall (or injection) to the signals as a new table revision, or "
    "(--format reme|...) write it back into the system's store",
    "precompute": "update the recall cache under cache_dir: recompute only queries whose key changed",
    "serve": "serve the recall cache over HTTP (POST /recall, GET /health); misses computed as a run",
    "lookup": "print the recall cache entry of one query text as JSON (no server)",
    "mcp": "serve the recall cache as an MCP server (tool `recall`) over stdio or streamable HTTP",
    "oks-eval": "score a run against an OKS recall-case/v1 file as `oks eval recall` does (its metrics)",
}
USAGE = """usage: recall <command> [overrides]

commands:
  run          {run}
  compare      recall compare <run dirs or one sweep dir> [--baseline NAME] [--out DIR] [--ci]
  report       recall report <run dir>
  export-trec  recall export-trec <run dir> <file> [--level node_id|doc_id] [--tag NAME]
               [--score score|rank]
  import-trec  recall import-trec <run file> --out DIR [--qrels FILE] [--level node_id|doc_id]
  analyze      recall analyze <run dir>
  feedback     recall feedback <run dir> [--format signals|bme|oks|reme] [--signals TABLE] [--out PATH]
               [--injected] [--now ISO]
  precompute   recall precompute [run overrides] cache_dir=<dir> [namespace=<name>]
  serve        recall serve [run overrides] cache_dir=<dir> [host=127.0.0.1 port=8765]
  lookup       recall lookup [run overrides] cache_dir=<dir> text=<query text> [scope=<doc scope>]
  mcp          recall mcp [run overrides] cache_dir=<dir> [transport=stdio|http]
               [host=127.0.0.1 port=8765]
  oks-eval     recall oks-eval <run dir> <recall-case file> [--limit 5] [--out FILE]
  tune         recall tune data=<d> preset=<p> [tune.trials=40 tune.metric=recall@5 tune.seed=13
                 tune.space=<entry of conf/tune_spaces.yaml> tune.name=<new preset>]

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


def usage() -> str:
    """The top-level help: commands, then the common overrides with every preset and data option
    read from ``conf/`` (a new preset file is listed without editing this module)."""
    from pipeline.adapters.query_files import QUERY_FORMATS

    return USAGE.format(
        run=COMMANDS["run"],
        data=_options("data"),
        presets=_options("preset"),
        queries_formats="|".join(QUERY_FORMATS),
    )


def command_help(cmd: str) -> str:
    """``recall <cmd> --help`` for the Hydra commands (run, precompute, tune, serve, lookup): its usage
    line and description, then the common overrides."""
    from itertools import takewhile

    text = usage()
    lines = text.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith(f"  {cmd} "))
    more = [ln.strip() for ln in takewhile(lambda ln: ln.startswith(" " * 15), lines[at + 1 :])]
    rest = " ".join([lines[at].strip()[len(cmd) :].strip(), *more])
    syntax = rest if rest.startswith("recall ") else f"recall {cmd} [overrides]"
    common = text[text.index("common overrides") :]
    return f"usage: {syntax}\n\n{COMMANDS[cmd]}\n\n{common}"


log = logging.getLogger("pipeline")
logging.getLogger("faiss.loader").setLevel(logging.WARNING)  # its AVX probing is noise to users


def summary_table(metrics: dict | None, out_dir: str) -> str:
    """The metrics as a fixed-width table (overall, then one row per query group) and the run directory."""
    from pipeline.metrics.evaluate import judged_warning, metric_names

    lines = []
    if metrics:
        names = metric_names(metrics)
        head = f"{'group':<14}{'n':>6}" + "".join(f"{m:>11}" for m in names)
        lines += [head, "-" * len(head)]
        rows = [("all", metrics)] + sorted(metrics["by_group"].items())
        for g, m in rows:
            lines.append(
                f"{str(g)[:13]:<14}{m['n_queries']:>6}" + "".join(f"{m[x]:>11.4f}" for x in names)
            )
        lines += judged_warning(metrics)
    lines.append(f"run directory: {out_dir}")
    return "\n".join(lines)


def _run(
    cfg: DictConfig,
) -> float | None:  # wrapped by hydra.main in main(): hydra loads only for runs
    from hydra.core.hydra_config import HydraConfig

    from pipeline.run import runner

    out_dir = HydraConfig.get().runtime.output_dir
    result = {}
    status = reported(lambda: result.update(runner.run(cfg, out_dir)))
    if status:
        sys.exit(status)
    print(summary_table(result["metrics"], result["out_dir"]))
    return (result["metrics"] or {}).get(cfg.tune.metric)  # the objective under `recall tune`


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
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from pipeline.cli.hydra_guard import guarded

    if GlobalHydra.instance().is_initialized():
        return None
    try:
        with guarded(), initialize_config_dir(config_dir=CONF_DIR, version_base="1.3"):
            return compose("config", overrides=choices)
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
    """Dispatch ``recall <command> [args]`` (run, precompute, tune or a tool on finished runs); the exit status.

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
    if cmd in COMMANDS and any(a in ("-h", "--help") for a in rest):
        return _help(cmd)
    hydra_args = rest
    if cmd in ("serve", "lookup"):
        from pipeline.cli.serve import main as serve_main
        from pipeline.cli.serve import split_args

        hydra_args = split_args(rest)[1]
    if cmd == "mcp":  # pipeline/cli/mcp_command.py
        from pipeline.cli import mcp_command

        hydra_args = mcp_command.overrides(rest)
    status = reported(
        lambda: (require_one_of("command", cmd, COMMANDS), check_overrides(hydra_args)) and None
    )
    if status:
        return status
    if cmd in ("serve", "lookup"):
        return serve_main(cmd, rest)
    if cmd == "mcp":
        return mcp_command.main(rest)
    if cmd == "tune":
        from pipeline.run.tune import tune

        return reported(lambda: tune(rest))
    if cmd not in ("run", "precompute"):
        return reported(lambda: tool(cmd, rest))
    sys.argv = [f"recall {cmd}", *rest]
    import hydra

    from pipeline.cli.hydra_guard import guarded

    with guarded():  # no hydra key of a user file makes Hydra import or call anything
        if cmd == "precompute":
            from pipeline.cli.precompute import main as _precompute

            _precompute()
        else:
            hydra.main(config_path=CONF_DIR, config_name="config", version_base="1.3")(_run)()
    return 0


def _help(cmd: str) -> int:
    """0, after printing ``cmd``'s own help: argparse's for a tool command, else
    :func:`command_help`."""
    if cmd in ("run", "precompute", "tune", "serve", "lookup", "mcp"):
        print(command_help(cmd))
        return 0
    try:
        return tool(cmd, ["--help"])
    except SystemExit as exc:  # argparse exits after printing the help
        return int(exc.code or 0)


def tool(cmd: str, args: list[str]) -> int:
    """The commands on finished runs (no Hydra): compare, report, export-trec, import-trec."""
    import argparse

    from pipeline import report

    ap = argparse.ArgumentParser(prog=f"recall {cmd}", description=COMMANDS[cmd])
    if cmd == "compare":
        return _compare(ap, args)
    elif cmd == "feedback":
        from pipeline.cli.feedback import main as feedback_main

        return feedback_main(ap, args)
    elif cmd == "analyze":
        from pipeline.cli.analyze import analyze_run

        ap.add_argument("run_dir")
        print("wrote " + ", ".join(analyze_run(ap.parse_args(args).run_dir)))
    elif cmd == "report":
        ap.add_argument("run_dir")
        md, html = report.run_report(ap.parse_args(args).run_dir)
        print(f"report: {md} {html}")
    elif cmd == "export-trec":
        return _export_trec(ap, args)
    elif cmd == "oks-eval":
        return _oks_eval(ap, args)
    else:
        return _import_trec(ap, args)
    return 0


def _compare(ap: argparse.ArgumentParser, args: list[str]) -> int:
    """0, after ``recall compare`` printed the table of the runs (or one sweep) and wrote --out."""
    from pipeline import report

    ap.add_argument("runs", nargs="+", help="run directories, or one sweep directory")
    ap.add_argument(
        "--baseline", default=None, help="run name to test against (default: the first)"
    )
    ap.add_argument("--out", default=None, help="write compare.md / compare.html here")
    ap.add_argument(
        "--ci", action="store_true", help="± the half-width of each mean's 95%% bootstrap interval"
    )
    a = ap.parse_args(args)
    runs = [Path(r) for r in a.runs]
    one_sweep = len(runs) == 1 and not (runs[0] / "manifest.json").exists()
    res = (
        report.compare_dir(runs[0], baseline=a.baseline, ci=a.ci)
        if one_sweep
        else report.compare(runs, baseline=a.baseline, ci=a.ci)
    )
    print(report.format_table(res))
    if a.out:
        md, html = report.compare_report(res, a.out)
        print(f"report: {md} {html}")
    return 0


def _export_trec(ap: argparse.ArgumentParser, args: list[str]) -> int:
    """0, after ``recall export-trec`` wrote a run's recall.parquet as a TREC run file."""
    import polars as pl

    from pipeline import report

    ap.add_argument("run_dir")
    ap.add_argument("path")
    ap.add_argument("--level", default="node_id", choices=["node_id", "doc_id"])
    ap.add_argument("--tag", default=None)
    ap.add_argument(
        "--score",
        default="score",
        choices=["score", "rank"],
        help="score: the run's scores (ties nudged 1 ulp so sorting by score keeps the rank "
        "order); rank: 1/rank",
    )
    a = ap.parse_args(args)
    rec = Path(a.run_dir) / "recall.parquet"
    if not rec.exists():
        raise UserError(f"{a.run_dir}: no recall.parquet; pass a finished run directory")
    out = report.write_run(
        pl.read_parquet(rec),
        a.path,
        tag=a.tag or Path(a.run_dir).name,
        level=a.level,
        score=a.score,
    )
    print(f"wrote {out}")
    return 0


def _oks_eval(ap: argparse.ArgumentParser, args: list[str]) -> int:
    """0, after ``recall oks-eval`` wrote OKS's recall-eval-run/v1 JSON and printed its metrics."""
    import json

    from pipeline.contract import io
    from pipeline.report.oks_eval import evaluate_run

    ap.add_argument("run_dir")
    ap.add_argument(
        "dataset", help="an OKS recall-case/v1 file (e.g. records/experiments/eval-50.yaml)"
    )
    ap.add_argument("--limit", type=int, default=5, help="slugs per case (OKS: ≥ 5; default 5)")
    ap.add_argument("--out", default=None, help="default: <run dir>/oks-eval.json")
    a = ap.parse_args(args)
    result = evaluate_run(a.run_dir, a.dataset, a.limit)
    out = Path(a.out or Path(a.run_dir) / "oks-eval.json")
    io.write_json(out, result)
    print(json.dumps({"output": str(out.resolve()), "metrics": result["metrics"]}, indent=2))
    return 0


def _import_trec(ap: argparse.ArgumentParser, args: list[str]) -> int:
    """0, after ``recall import-trec`` turned a TREC run file into a run directory."""
    from pipeline import report

    ap.add_argument("run_file")
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--qrels",
        default=None,
        help="TREC qrels, or any data.qrels format: TSV with a header, OKS recall-case/v1",
    )
    ap.add_argument("--level", default="node_id", choices=["node_id", "doc_id"])
    a = ap.parse_args(args)
    print(f"wrote {report.import_run(a.run_file, a.out, a.qrels, a.level)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
