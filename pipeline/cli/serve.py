"""``recall serve`` and ``recall lookup``: Hydra-composed like ``recall precompute``.

``recall serve <run overrides> cache_dir=D [host=127.0.0.1 port=8765]`` loads a ``Service`` and
runs the HTTP app (``pipeline.serve.app``) on uvicorn; ``host``/``port`` are ``serve.host`` and
``serve.port`` (loopback unless told). A bind that is not loopback needs ``serve.token`` (or
``RECALL_SERVE_TOKEN``: clients send ``Authorization: Bearer <token>``) and prints a warning
line; the ``Host`` names served are ``serve.allowed_hosts`` (null: the loopback names) plus the
bind address (``pipeline.serve.guard``).
``recall lookup <run overrides> cache_dir=D text=... [scope=...]`` prints the cached entry of
that text as one line of JSON (no server, nothing computed; exit 1 and ``{"error": ...}`` on
stderr when there is none, or when it was built by another code version). ``text=`` and ``scope=`` are taken verbatim (any
characters); ``scope`` may be given more than once for a list.
"""

from __future__ import annotations

import json
import sys

from omegaconf import DictConfig

from pipeline.contract.errors import ConfigError, reported
from pipeline.serve.access import check_bind
from pipeline.serve.guard import allowed_hosts

RENAMED = {"host": "serve.host", "port": "serve.port"}
VERBATIM = ("text", "scope")


def split_args(args: list[str]) -> tuple[dict, list[str]]:
    """({text, scope} taken verbatim, the Hydra overrides with host/port renamed to serve.*)."""
    own: dict = {}
    rest = []
    for a in args:
        key, _eq, value = a.partition("=")
        if key in VERBATIM and _eq:
            own.setdefault(key, []).append(value)
        elif key in RENAMED and _eq:
            rest.append(f"{RENAMED[key]}={value}")
        else:
            rest.append(a)
    return own, rest


def empty_namespace_warning(there: list[str], namespace: str, cache_dir) -> str | None:
    """The line ``recall serve`` prints when its namespace has no precomputed generation: every
    request is then a miss computed on the fly (the overrides differ from the precompute's, e.g.
    another ``data.queries``, or nothing was precomputed)."""
    if namespace in there:
        return None
    return (
        f"warning: {cache_dir}: no recall cache namespace {namespace!r} (there: {there}); every "
        "request is computed as a miss until recall precompute runs with the same overrides "
        "(or pass namespace=<one of them>)"
    )


def serve(cfg: DictConfig) -> None:
    """Load the service and run it on uvicorn at ``serve.host``:``serve.port``."""
    import uvicorn

    from pipeline.serve.app import build_app
    from pipeline.serve.service import Service

    host, port = str(cfg.serve.host), int(cfg.serve.port)
    token = str(cfg.serve.get("token") or "") or None
    hosts = allowed_hosts(host, cfg.serve.get("allowed_hosts"))
    exposed = check_bind(host, token, "recall serve", hosts)  # refused before loading
    service = Service(cfg)
    print(f"recall serve: namespace {service.namespace}, http://{host}:{port}", flush=True)
    warning = empty_namespace_warning(service.cache.namespaces(), service.namespace, cfg.cache_dir)
    for line in (exposed, warning):
        if line:
            print(line, file=sys.stderr, flush=True)
    app = build_app(service, token=token, hosts=hosts)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning")
    finally:
        service.close()


def lookup(cfg: DictConfig, own: dict) -> int:
    """Print the entry of ``text`` (in ``scope``) of the dataset's namespace as JSON; 1 if none."""
    from pipeline.recallcache import keys
    from pipeline.recallcache.reader import RecallCache
    from pipeline.recallcache.recipe import namespace_parts, recipe_hash
    from pipeline.run import clock

    if not own.get("text"):
        raise ConfigError("recall lookup needs text=<query text>")
    keys.require_utf8(own["text"][0], "text=")  # an argument's non-UTF-8 bytes: one line
    scope = own.get("scope")
    scope = scope[0] if scope and len(scope) == 1 else scope
    ns = keys.namespace(str(cfg.data.name), **namespace_parts(cfg))
    cache = RecallCache(cfg.cache_dir, ns)
    if ns not in cache.namespaces():
        raise ConfigError(
            f"{cfg.cache_dir}: no recall cache namespace {ns!r} (there: {cache.namespaces()}); "
            "run recall precompute with the same overrides, or pass namespace=<one of them>"
        )
    entry = cache.get(own["text"][0], scope)
    why = None if entry is not None else "no entry for this text and scope"
    cfg = clock.resolve(cfg, clock.served_time(cfg.cache_dir, ns, cache.generation))
    if entry is not None and entry["recipe"] != recipe_hash(cfg):
        why = "the entry was built by another code version; run recall precompute again"
    if why:
        print(json.dumps({"error": why}), file=sys.stderr)
        return 1
    print(json.dumps(entry, ensure_ascii=False, default=str))
    return 0


def overrides(args: list[str]) -> list[str]:
    """The Hydra overrides of ``args``: without ``text=``/``scope=``, host/port renamed to serve.*."""
    return split_args(args)[1]


def _main(cmd: str, args: list[str]) -> int:
    """``recall serve|lookup [overrides]``: compose the config (Hydra, guarded) and run ``cmd``."""
    from pipeline.cli.hydra_guard import launch

    own, rest = split_args(args)
    if cmd == "lookup":  # stdout is the entry: no Hydra logging, no run folder
        rest += ["hydra/job_logging=disabled", "hydra/hydra_logging=disabled"]
        rest += ["hydra.output_subdir=null", "hydra.run.dir=."]
    status = {"code": 0}

    def body(cfg: DictConfig) -> None:
        run = (lambda: serve(cfg)) if cmd == "serve" else (lambda: lookup(cfg, own))
        status["code"] = reported(run)

    launch(f"recall {cmd}", rest, body)
    return status["code"]


def serve_main(args: list[str]) -> int:
    """``recall serve [overrides]``: serve the recall cache until stopped; the exit status."""
    return _main("serve", args)


def lookup_main(args: list[str]) -> int:
    """``recall lookup [overrides] text=... [scope=...]``: print one entry; the exit status."""
    return _main("lookup", args)
