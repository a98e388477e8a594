"""Write a synthetic OKS instance in OKS v0.6.5's on-disk format, for parity runs.

    python scripts/parity/oks_store.py OUT_DIR [--pages 60] [--queries 40] [--seed 1]
        [--search-backend fts5|native|fusion|legacy|none] [--varied]

Layout and fields as open-agent-power/open-knowledge-studio @ 6a281b47 keeps them
(``assets/_meta/frontmatter-schema.md``, ``cli/knowledge_studio/store.py``): ``wiki/<area>/<slug>.md``
pages with YAML front matter (title, type or the legacy category, area, status, importance,
confidence, created, pinned, archived, tags as a list or a comma string, review {lesson,
decision_correct, outcome}, relates_to/relationship, superseded_by), bodies with headings of
levels 1–3, fenced code, Chinese, English and mixed text; ``wiki/INDEX.md`` (OKS skips it);
``.oks/access.json`` {slug: uses}; ``profiles/goals/*.md``; and ``queries.jsonl`` (query_id,
text) made from the pages' words. Same seed → the same bytes. ``--search-backend`` is the
``settings/recall.yaml`` value (``none``: the key left out, OKS's code default ``native``);
``--varied`` adds what only OKS's native scorer reads: reviews with ``decision_correct: false``
and ``outcome: failure``, ``superseded`` pages, generic titles (Overview, 概述, ...), and a second
active goal (without it, the bytes are those of earlier versions for a seed).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

EN = (
    "cache latency retry queue index shard replica token parser schema backup deploy rollback "
    "metric alert trace budget timeout lock migration snapshot vector embedding recall ranking "
    "prompt context session agent memory decay graph node edge cluster batch stream buffer "
    "kernel thread socket proxy gateway router policy quota audit a x v2 C++ e-mail don't"
).split()
ZH = (
    "缓存 延迟 重试 队列 索引 分片 副本 解析 备份 部署 回滚 指标 告警 链路 预算 超时 锁 迁移 快照 "
    "向量 召回 排序 提示词 上下文 会话 智能体 记忆 衰减 图谱 节点 集群 批处理 数据流 线程 网关 策略 "
    "配额 审计 性能优化 自然语言处理 知识库 数据库 服务器 的 了 是"
).split()
TYPES = ["concept", "strategy", "anti-pattern", "reference", None]
AREAS = ["computing", "ops", "research", "写作"]


def _words(rng: random.Random, n: int, zh: float) -> str:
    out = []
    for _ in range(n):
        out.append(rng.choice(ZH) if rng.random() < zh else rng.choice(EN))
    sep = "" if zh > 0.9 else " "
    return sep.join(out)


GENERIC = ["Overview", "README", "概述", "Summary", "index"]


def _review(rng: random.Random, varied: bool) -> str:
    if not varied:
        return "review:\n  decision_correct: true\n  outcome: success"
    correct, outcome = rng.choice(["true", "false"]), rng.choice(["success", "failure"])
    return f"review:\n  decision_correct: {correct}\n  outcome: {outcome}"


def _front(
    rng: random.Random, i: int, title: str | None, slugs: list[str], varied: bool = False
) -> str:
    meta = []
    if title is not None:
        meta.append(f"title: {json.dumps(title, ensure_ascii=False)}")
    t = rng.choice(TYPES)
    if t is not None:
        meta.append(f"{'category' if rng.random() < 0.2 else 'type'}: {t}")
    meta.append(f"area: {rng.choice(AREAS)}")
    statuses = ["active", "active", "provisional", "stale", None, "dropped"]
    status = rng.choice(statuses + (["superseded"] if varied else []))
    if status:
        meta.append(f"status: {status}")
    if rng.random() < 0.8:
        meta.append(f"importance: {rng.choice([0.2, 0.5, 0.7, 0.9, 1])}")
    meta.append(f"confidence: {rng.choice([0.6, 0.8, 0.95])}")
    meta.append(f"created: '2026-{rng.randint(1, 11):02d}-{rng.randint(1, 28):02d}'")
    if rng.random() < 0.2:
        meta.append("pinned: true")
    if rng.random() < 0.1:
        meta.append("archived: true")
    tags = rng.sample(EN[:30] + ZH[:20], rng.randint(0, 3))
    if tags and rng.random() < 0.5:
        meta.append(f"tags: {json.dumps(', '.join(tags), ensure_ascii=False)}")
    elif tags:
        meta.append("tags: [" + ", ".join(json.dumps(t, ensure_ascii=False) for t in tags) + "]")
    if rng.random() < 0.3:
        lesson = _words(rng, 5, 0.5)
        meta.append(_review(rng, varied))
        meta.append(f"  lesson: {json.dumps(lesson, ensure_ascii=False)}")
    if slugs and rng.random() < 0.15:
        meta.append(f"relates_to: {rng.choice(slugs)}\nrelationship: enriches")
    return "---\n" + "\n".join(meta) + "\n---\n"


def _body(rng: random.Random, zh: float) -> str:
    parts = [_words(rng, rng.randint(3, 25), zh)]
    for _ in range(rng.randint(0, 4)):
        level = rng.choice(["#", "##", "##", "###"])
        parts.append(f"{level} {_words(rng, rng.randint(1, 3), zh)}")
        parts.append(_words(rng, rng.randint(0, 30), zh))
        if rng.random() < 0.2:
            parts.append("```python\n# not a heading\nretry(cache, timeout=3)\n```")
    if rng.random() < 0.1:
        parts.append("\n\n\n" + _words(rng, 4, zh))
    return "\n\n".join(parts) + "\n"


def write_store(
    out: Path,
    pages: int,
    queries: int,
    seed: int,
    backend: str = "fts5",
    varied: bool = False,
) -> list[str]:
    """Write the instance under ``out``; returns the page slugs."""
    rng = random.Random(seed)
    wiki = out / "wiki"
    slugs: list[str] = []
    texts: list[str] = []
    for i in range(pages):
        zh = rng.choice([0.0, 0.0, 0.5, 1.0])
        title = None if rng.random() < 0.05 else _words(rng, rng.randint(1, 4), zh)
        if varied and rng.random() < 0.1:
            title = rng.choice(GENERIC)
        slug = f"page-{i:03d}"
        body = "" if rng.random() < 0.08 else _body(rng, zh)
        path = wiki / rng.choice(AREAS[:3]) / f"{slug}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_front(rng, i, title, slugs, varied) + "\n" + body, encoding="utf-8")
        slugs.append(slug)
        texts.append(f"{title or ''} {body}")
    (wiki / "INDEX.md").write_text("---\ntitle: Index\n---\n\n" + " ".join(slugs) + "\n")
    (wiki / "no-front-matter.md").write_text("cache latency notes without front matter\n")
    (out / ".oks").mkdir(parents=True, exist_ok=True)
    uses = {s: rng.randint(1, 9) for s in rng.sample(slugs, len(slugs) // 4)}
    (out / ".oks" / "access.json").write_text(json.dumps(uses, indent=2))
    # `oks init` copies assets/settings/recall.yaml, which selects fts5 (its code default is native)
    (out / "settings").mkdir(parents=True, exist_ok=True)
    (out / "settings" / "recall.yaml").write_text(
        "recall:\n  floor: 0.7\n  topn: 3\n  minlen: 6\n  cooldown: 10\n"
        + ("" if backend == "none" else f"search_backend: {backend}\n")
        + "inject:\n  budget_chars: 4000\n  per_page_chars: 200\n  title_only_floor: 0.5\n"
    )
    goals = out / "profiles" / "goals"
    goals.mkdir(parents=True, exist_ok=True)
    (goals / f"{slugs[3]}.md").write_text(
        "---\ntitle: Ship recall\ntype: goal\nstatus: active\ndomains: [computing]\n"
        "keywords: [recall, 缓存]\n---\n\nGoal body.\n",
        encoding="utf-8",
    )
    if varied:
        (goals / "ship-docs.md").write_text(
            "---\ntitle: Ship docs\ntype: goal\nstatus: active\ndomains: [ops, 写作]\n"
            "keywords: [deploy, 索引]\n---\n\nGoal body.\n",
            encoding="utf-8",
        )
    with open(out / "queries.jsonl", "w", encoding="utf-8") as fh:
        for q in range(queries):
            src = texts[rng.randrange(len(texts))].split()
            pick = rng.sample(src, min(len(src), rng.randint(1, 4))) if src else ["缓存"]
            cjk = all("\u4e00" <= c <= "\u9fff" for w in pick for c in w)
            text = "".join(pick) if cjk and rng.random() < 0.5 else " ".join(pick)
            fh.write(json.dumps({"query_id": f"q{q:03d}", "text": text}, ensure_ascii=False) + "\n")
    return slugs


def main() -> None:
    """Command line: see the module docstring."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("out")
    ap.add_argument("--pages", type=int, default=60)
    ap.add_argument("--queries", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument(
        "--search-backend", default="fts5", choices=["fts5", "native", "fusion", "legacy", "none"]
    )
    ap.add_argument("--varied", action="store_true", help="native-only fields (module docstring)")
    a = ap.parse_args()
    write_store(Path(a.out), a.pages, a.queries, a.seed, a.search_backend, a.varied)
    print(
        f"wrote an OKS instance to {a.out}: {a.pages} pages, {a.queries} queries in "
        f"{Path(a.out) / 'queries.jsonl'}, search_backend {a.search_backend}"
    )


if __name__ == "__main__":
    main()
