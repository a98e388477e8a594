"""One OKS wiki page → its FTS5 rows, as OKS v0.6.5 builds them (``data=oks``).

Read from open-agent-power/open-knowledge-studio @ 6a281b47: ``store.py::parse_wiki_file``
(a page is a file that starts with ``---``; the text is split at the first two ``---``; the
middle is YAML, the rest stripped is the body) and ``search/fts5.py`` (``FTS5Backend.index``:
``_parse_md(title + "\\n\\n" + body)`` pulls fenced code out and collapses blank lines, then
``_split_md_nodes(title, body)`` cuts ``"# {title}\\n\\n{body}"`` at every heading line of levels
1–6 outside code fences; one row per node with the page's title, tags and code repeated). So the
first row holds the title twice (as its heading and as the first line of the body OKS passes to
``_parse_md``), and a page with a title and no body is one row, ``"# {title}\\n\\n{title}"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline.adapters.markdown import load_yaml
from pipeline.contract.errors import DataError

_FRONT = re.compile(r"^---\n(.*?)\n---\n?", re.DOTALL)  # fts5.py _RE_FRONT_MATTER
_CODE = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)  # fts5.py _RE_CODE_BLOCK
_HEADING = re.compile(r"^(#{1,6})\s+(.+)$")
_FENCE = re.compile(r"^```")


@dataclass
class Page:
    """A parsed page: its front matter, the body OKS keeps, and its FTS5 rows' texts."""

    meta: dict
    body: str  # parse_wiki_file: the text after the front matter, stripped
    title: str  # the FTS5 title column (str(meta["title"]), "" without one)
    tags: str  # the FTS5 tags column (a list joined by spaces, else str(tags))
    code: str  # the page's fenced code blocks, joined by newlines (every row's code column)
    nodes: list[str]  # the text of each node, node_idx = position


def split_page(text: str, where: str) -> tuple[dict, str] | None:
    """(front matter, body) the way ``parse_wiki_file`` reads a page; None for a file OKS skips
    (no leading ``---`` or no closing one). Invalid YAML or a non-mapping is a DataError (OKS
    skips such a page silently)."""
    if not text.startswith("---"):
        return None
    parts = text.split("---", 2)
    if len(parts) < 3:
        return None
    head = parts[1]
    first = 1 + head[: len(head) - len(head.lstrip())].count("\n")  # the line .strip() starts on
    fix = "fix the YAML between the first two '---' lines (OKS itself would skip this page)"
    meta = load_yaml(head.strip(), where, fix, first)
    if not isinstance(meta, dict):
        raise DataError(
            where,
            f"front matter is a {type(meta).__name__}, not a mapping",
            "write 'key: value' lines between the '---' lines",
            field="front matter",
        )
    return meta, parts[2].strip()


def _strip_code(text: str) -> tuple[str, str]:
    """(body without fenced code, blank-line runs collapsed, stripped; the code blocks joined)."""
    m = _FRONT.match(text)
    rest = text[m.end() :] if m else text
    code: list[str] = []

    def grab(mm: re.Match) -> str:
        code.append(mm.group(1).strip())
        return ""

    body = re.sub(r"\n{3,}", "\n\n", _CODE.sub(grab, rest)).strip()
    return body, "\n".join(code)


def split_nodes(title: str, body: str) -> list[str]:
    """Node texts: ``# {title}`` + intro, then each heading line (levels 1–6, outside fences) with
    the text up to the next heading; no heading → the whole text as one node."""
    if not body and not title:
        return [""]
    lines = (f"# {title}\n\n{body}" if title else body).split("\n")
    starts, in_code = [], False
    for i, line in enumerate(lines):
        s = line.strip()
        if _FENCE.match(s):
            in_code = not in_code
            continue
        if not in_code and s and _HEADING.match(s):
            starts.append(i)
    if not starts:
        return ["\n".join(lines).strip()]
    ends = starts[1:] + [len(lines)]
    return ["\n".join(lines[a:z]).strip() for a, z in zip(starts, ends)]


def _text(value) -> str:
    if isinstance(value, list):
        return " ".join(str(t) for t in value)
    return str(value)


def parse(text: str, where: str) -> Page | None:
    """The page OKS indexes from ``text`` (None when OKS skips the file)."""
    split = split_page(text, where)
    if split is None:
        return None
    meta, body = split
    title = str(meta.get("title", ""))
    tags = _text(meta.get("tags", ""))
    md_body, code = _strip_code(f"{title}\n\n{body}")
    return Page(meta, body, title, tags, code, split_nodes(title, md_body))
