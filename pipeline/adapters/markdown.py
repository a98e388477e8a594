"""Parse one markdown note: YAML front matter, heading sections with line spans, [[wikilinks]]."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from pipeline.contract.errors import DataError

HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
WIKILINK = re.compile(r"\[\[([^\[\]|#]*)(?:#([^\[\]|]*))?(?:\|([^\[\]]*))?\]\]")


@dataclass
class Section:
    """One heading's section of a markdown note: its slug, line span, prose, code and outgoing links."""

    slug: str
    heading: str
    start_line: int  # 1-based, inclusive, in the original file
    end_line: int
    text: str  # heading line + prose, fenced code removed
    code: str  # contents of fenced code blocks
    links: list[tuple[str, str | None]] = field(default_factory=list)  # (target, anchor)


def slugify(text: str) -> str:
    """Lower-cased ``text`` with each run of non-word characters turned into one ``-`` (``section`` if empty)."""
    s = re.sub(r"[^\w]+", "-", text.strip().lower(), flags=re.UNICODE).strip("-")
    return s or "section"


class _BadDate(Exception):
    def __init__(self, line: int, value: str, why: str):
        super().__init__(why)
        self.line, self.value, self.why = line, value, why


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` whose impossible dates (``2024-02-30``) say where they are: PyYAML's
    own loader raises a bare ``ValueError`` for them."""


def _timestamp(loader, node):
    try:
        return yaml.SafeLoader.construct_yaml_timestamp(loader, node)
    except ValueError as exc:
        raise _BadDate(node.start_mark.line, node.value, str(exc)) from None


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp)


def load_yaml(text: str, where: str, fix: str, first_line: int) -> dict:
    """The YAML front matter ``text`` (its first line is line ``first_line`` of ``where``) as a
    dict ({} when empty); invalid YAML or an impossible date is a DataError naming the line (and
    the key of the date)."""
    try:
        loader = _Loader(text)  # a SafeLoader subclass; what yaml.load does with it
        try:
            return loader.get_single_data() or {}
        finally:
            loader.dispose()
    except _BadDate as exc:
        key = text.splitlines()[exc.line].split(":", 1)[0].strip().lstrip("- ")
        raise DataError(
            where,
            f"{exc.value!r} is not a possible date ({exc.why})",
            "write a real date as YYYY-MM-DD",
            row=f"line {exc.line + first_line}",
            field=key,
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        row = f"line {mark.line + first_line}" if mark is not None else f"line {first_line - 1}"
        raise DataError(
            where,
            f"front matter is not valid YAML ({getattr(exc, 'problem', exc)})",
            fix,
            row=row,
            field="front matter",
        ) from None


def split_front_matter(text: str, where: str) -> tuple[dict, list[str], int]:
    """Returns (front matter dict, body lines, number of lines the front matter used)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return {}, lines, 0
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        raise DataError(
            where,
            "front matter opened with '---' is never closed",
            "close it with a '---' line",
            row="line 1",
            field="front matter",
        )
    meta = load_yaml("\n".join(lines[1:end]), where, "fix the YAML between the '---' lines", 2)
    if not isinstance(meta, dict):
        raise DataError(
            where,
            f"front matter is a {type(meta).__name__}, not a mapping",
            "write 'key: value' lines",
            row="line 2",
            field="front matter",
        )
    return meta, lines[end + 1 :], end + 1


def parse_sections(body: list[str], offset: int, title: str) -> list[Section]:
    """One section per heading (any level); text before the first heading is an 'intro' section."""
    sections: list[Section] = []
    cur: dict | None = None
    in_fence = False

    def close(end_line: int) -> None:
        if cur is None:
            return
        prose = "\n".join(cur["prose"]).strip()
        if cur["heading"] is None and not prose and not cur["code"]:
            return
        text = (f"{cur['heading']}\n{prose}" if cur["heading"] else prose).strip()
        links = [
            (m.group(1).strip(), (m.group(2) or "").strip() or None)
            for m in WIKILINK.finditer("\n".join(cur["prose"]))
        ]
        sections.append(
            Section(
                cur["slug"],
                cur["heading"] or title,
                cur["start"],
                end_line,
                text,
                "\n".join(cur["code"]).strip(),
                links,
            )
        )

    for i, line in enumerate(body):
        lineno = offset + i + 1
        if FENCE.match(line):
            in_fence = not in_fence
            if cur is None:
                cur = {"slug": "intro", "heading": None, "start": lineno, "prose": [], "code": []}
            continue
        m = None if in_fence else HEADING.match(line)
        if m:
            close(lineno - 1)
            cur = {
                "slug": slugify(m.group(2)),
                "heading": m.group(2).strip(),
                "start": lineno,
                "prose": [],
                "code": [],
            }
            continue
        if cur is None:
            if not line.strip():
                continue
            cur = {"slug": "intro", "heading": None, "start": lineno, "prose": [], "code": []}
        (cur["code"] if in_fence else cur["prose"]).append(line)
    close(offset + len(body))
    seen: dict[str, int] = {}
    for s in sections:  # unique slugs within a note: second "notes" heading becomes "notes-2"
        n = seen.get(s.slug, 0) + 1
        seen[s.slug] = n
        if n > 1:
            s.slug = f"{s.slug}-{n}"
    return sections
