"""``recall serve``: hit lookups over HTTP and in process, misses with and without micro-batching,
against a per-request ``recall run`` of the same texts, all in one script.

    PYTHONPATH=. .venv/bin/python scripts/bench/bench_serve.py [--data sample] [--preset best]
        [--embed hashing] [--requests 8000] [--clients 32] [--misses 64] [--work /tmp/bench-serve]

Steps: ``recall precompute`` of the dataset into ``--work/cache``; ``recall serve`` in its own
process on 127.0.0.1 (an ephemeral port); ``--clients`` concurrent keep-alive HTTP/1.1 clients
(asyncio streams in this process) send ``--requests`` hit lookups in all (the dataset's plain
query texts in turn) and time each; then ``RecallCache.get`` and ``Service.recall`` hits in
process; then ``--misses`` new texts (the query texts with a suffix) through a ``Service`` from
``--clients`` threads at once, with micro-batching (``serve.batch_window_ms=5``) and without
(``serve.max_batch=1``); and ``runner.run`` of a one-query dataset per text for the first 8 of
them (the per-request ``recall run``: no interpreter start counted). Prints a table; loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import polars as pl
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from pipeline.contract.registry import call_target
from pipeline.recallcache import keys
from pipeline.run import precompute, runner
from pipeline.serve import RecallCache, Service

ROOT = Path(__file__).resolve().parents[2]


def overrides(a, work: Path) -> list[str]:
    return [
        f"data={a.data}",
        f"preset={a.preset}",
        f"embed={a.embed}",
        "device=cpu",
        "report=false",
        f"cache_dir={work / 'cache'}",
        f"out_dir={work / 'out'}",
    ]


def config(over: list[str], *extra: str):
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose("config", overrides=[*over, *extra])


def plain_texts(cfg) -> list[str]:
    q = call_target(cfg.data).queries
    rows = q.to_dicts()
    return [r["text"] for r in rows if keys.query_key(r["text"], r) == keys.text_key(r["text"])]


def pct(lat_s: list[float]) -> tuple[float, float]:
    ms = np.asarray(lat_s) * 1000
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


async def _client(host, port, bodies, n, lat, errors):
    reader, writer = await asyncio.open_connection(host, port)
    for i in range(n):
        body = bodies[i % len(bodies)]
        head = (
            f"POST /recall HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        t0 = time.perf_counter()
        writer.write(head + body)
        await writer.drain()
        status = await reader.readline()
        length = 0
        while (line := await reader.readline()) not in (b"\r\n", b""):
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        payload = await reader.readexactly(length)
        lat.append(time.perf_counter() - t0)
        if b" 200 " not in status or b'"cache":"hit"' not in payload:
            errors.append(status)
    writer.close()


async def _load(host, port, bodies, total, clients):
    lat, errors = [], []
    per = total // clients
    t0 = time.perf_counter()
    await asyncio.gather(*(_client(host, port, bodies, per, lat, errors) for _ in range(clients)))
    return lat, errors, time.perf_counter() - t0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_hits(a, over, texts) -> dict:
    port = free_port()
    cmd = [sys.executable, "-m", "pipeline.cli.main", "serve", *over, f"port={port}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.2)
        bodies = [json.dumps({"text": t}).encode() for t in texts]
        asyncio.run(_load("127.0.0.1", port, bodies, a.clients * 4, a.clients))  # warm up
        lat, errors, wall = asyncio.run(_load("127.0.0.1", port, bodies, a.requests, a.clients))
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    p50, p99 = pct(lat)
    return {"n": len(lat), "per_s": len(lat) / wall, "p50": p50, "p99": p99, "errors": len(errors)}


def in_process(fn, texts, n=20000) -> dict:
    lat = []
    for i in range(n):
        t0 = time.perf_counter()
        fn(texts[i % len(texts)])
        lat.append(time.perf_counter() - t0)
    p50, p99 = pct(lat)
    return {"n": n, "per_s": n / sum(lat), "p50": p50, "p99": p99, "errors": 0}


def miss_stream(cfg, texts, clients, **serve) -> tuple[dict, list]:
    service = Service(OmegaConf.merge(cfg, {"serve": serve}))
    service.recall(texts[0] + " warm-up")  # the model and the per-node-table memo, once
    lat = []

    def one(t):
        t0 = time.perf_counter()
        got = service.recall(t)
        lat.append(time.perf_counter() - t0)
        return got

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        got = list(pool.map(one, texts))
    wall = time.perf_counter() - t0
    batches = service.batcher.batches - 1
    service.close()
    assert all(g["cache"] == "miss" for g in got)
    p50, p99 = pct(lat)
    row = {"n": len(texts), "per_s": len(texts) / wall, "p50": p50, "p99": p99, "errors": 0}
    return row | {"batches": batches}, got


def per_request_run(cfg, texts, work: Path) -> dict:
    ds = call_target(cfg.data)
    lat = []
    for i, t in enumerate(texts):
        q = pl.DataFrame({"query_id": ["q"], "text": [t]})
        c = OmegaConf.merge(cfg, {"out_dir": str(work / f"run-{i}")})
        t0 = time.perf_counter()
        runner.run(c, c.out_dir, dataset=ds.part(q))
        lat.append(time.perf_counter() - t0)
    p50, p99 = pct(lat)
    return {"n": len(texts), "per_s": len(texts) / sum(lat), "p50": p50, "p99": p99, "errors": 0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="sample")
    ap.add_argument("--preset", default="best")
    ap.add_argument("--embed", default="hashing")
    ap.add_argument("--requests", type=int, default=8000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--misses", type=int, default=64)
    ap.add_argument("--work", default=None)
    a = ap.parse_args()
    work = Path(a.work or tempfile.mkdtemp(prefix="bench-serve-"))
    over = overrides(a, work)
    cfg = config(over)
    pre = precompute.precompute(cfg)
    texts = plain_texts(cfg)
    rows = {"hits over HTTP": http_hits(a, over, texts)}
    cache = RecallCache(cfg.cache_dir, pre["namespace"])
    rows["hits in process (RecallCache.get)"] = in_process(cache.get, texts)
    service = Service(cfg)
    rows["hits in process (Service.recall)"] = in_process(service.recall, texts)
    service.close()
    new = [f"{texts[i % len(texts)]} (asked again {i})" for i in range(a.misses)]
    batched, got_b = miss_stream(cfg, new, a.clients, batch_window_ms=5, max_batch=64)
    single, got_s = miss_stream(cfg, new, a.clients, batch_window_ms=0, max_batch=1)
    assert [g["rows"] for g in got_b] == [g["rows"] for g in got_s]  # one answer either way
    rows[f"misses, micro-batched ({batched['batches']} batches)"] = batched
    rows["misses, one at a time"] = single
    rows["per-request recall run (runner.run)"] = per_request_run(cfg, new[:8], work)
    print(f"{'path':<42}{'n':>7}{'per s':>10}{'p50 ms':>10}{'p99 ms':>10}{'errors':>8}")
    for name, r in rows.items():
        print(
            f"{name:<42}{r['n']:>7}{r['per_s']:>10.1f}{r['p50']:>10.3f}{r['p99']:>10.3f}"
            f"{r['errors']:>8}"
        )
    base = rows["per-request recall run (runner.run)"]["per_s"]
    print(f"micro-batched misses / one at a time: {batched['per_s'] / single['per_s']:.1f}x")
    print(f"micro-batched misses / per-request recall run: {batched['per_s'] / base:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
