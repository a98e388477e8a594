"""``recall mcp``: the recall cache as a Model Context Protocol server (``pipeline.serve.mcp_app``).

``recall mcp <run overrides> cache_dir=D [transport=stdio|http] [host=127.0.0.1 port=8765]``
composes the config as ``recall serve`` does, loads one ``Service`` (the same cache, the same
answers) and serves the ``recall`` tool over stdio (the default: the client starts the command)
or streamable HTTP at ``http://host:port/mcp``. ``host``/``port`` are ``serve.host`` and
``serve.port``; a bind off loopback needs ``serve.token`` (``pipeline.serve.access``). Stdout is
the protocol's alone under stdio: Hydra logs nothing and makes no run folder, status lines go to
stderr.
"""

from __future__ import annotations

import contextlib
import os
import sys

from omegaconf import DictConfig

from pipeline.contract.errors import ConfigError, reported, require_one_of

TRANSPORTS = ("stdio", "http")
QUIET = [
    "hydra/job_logging=disabled",
    "hydra/hydra_logging=disabled",
    "hydra.output_subdir=null",
    "hydra.run.dir=.",
]


def _parts(args: list[str]) -> tuple[list[str], dict, list[str]]:
    """(the ``transport=`` values, ``text=``/``scope=`` taken verbatim, the other overrides with
    host/port renamed to serve.*)."""
    from pipeline.cli.serve import split_args

    transports = [a.partition("=")[2] for a in args if a.startswith("transport=")]
    own, rest = split_args([a for a in args if not a.startswith("transport=")])
    return transports, own, rest


def overrides(args: list[str]) -> list[str]:
    """The Hydra overrides of ``args``: without ``transport=``, host/port renamed to serve.*."""
    return _parts(args)[2]


def split(args: list[str]) -> tuple[str, list[str]]:
    """(transport, :func:`overrides`); a ConfigError for an unknown transport or a
    ``text=``/``scope=`` (those are the tool's arguments)."""
    transports, own, rest = _parts(args)
    if own:
        raise ConfigError(
            f"recall mcp takes no {'/'.join(sorted(own))}=; a client passes the query to the "
            "recall tool"
        )
    transport = transports[-1] if transports else "stdio"
    require_one_of("transport", transport, TRANSPORTS)
    return transport, rest


@contextlib.contextmanager
def stdout_to_stderr():
    """While loading the service, file descriptor 1 and ``sys.stdout`` write to stderr, so no
    library's output (Python or C) reaches a stdio client before the protocol starts (the SDK's
    ``stdio_server`` diverts them the same way while it serves)."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def serve_mcp(cfg: DictConfig, transport: str) -> None:
    """Load the service and serve the ``recall`` tool on ``transport`` until the client leaves
    (stdio) or the process is stopped (http)."""
    from pipeline.cli.serve import empty_namespace_warning
    from pipeline.serve.access import check_bind
    from pipeline.serve.mcp_app import PATH, build_server, http_app, run_stdio
    from pipeline.serve.service import Service

    host, port = str(cfg.serve.host), int(cfg.serve.port)
    token = cfg.serve.get("token")
    warning = check_bind(host, token, "recall mcp") if transport == "http" else None
    with stdout_to_stderr():  # nothing but the protocol on stdout
        service = Service(cfg)
    where = "stdio" if transport == "stdio" else f"http://{host}:{port}{PATH}"
    print(f"recall mcp: namespace {service.namespace}, {where}", file=sys.stderr, flush=True)
    for line in (warning, empty_namespace_warning(service.cache.namespaces(), service.namespace, cfg.cache_dir)):  # fmt: skip
        if line:
            print(line, file=sys.stderr, flush=True)
    server = build_server(service)
    try:
        if transport == "stdio":
            import anyio

            anyio.run(run_stdio, server)
        else:
            import uvicorn

            uvicorn.run(http_app(server, host, token), host=host, port=port, log_level="warning")
    finally:
        service.close()


def main(args: list[str]) -> int:
    """``recall mcp [overrides]``: compose the config (Hydra, guarded, quiet) and serve; the exit
    status (2 and one line for a bad option)."""
    from pipeline.cli.hydra_guard import launch

    got: dict = {}
    status = reported(lambda: got.update(zip(("transport", "rest"), split(args), strict=True)))
    if status:
        return status
    result = {"code": 0}

    def body(cfg: DictConfig) -> None:
        result["code"] = reported(lambda: serve_mcp(cfg, got["transport"]))

    launch("recall mcp", [*got["rest"], *QUIET], body)
    return result["code"]
