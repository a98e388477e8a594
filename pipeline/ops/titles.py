"""Find node titles inside texts in one pass (Aho–Corasick), shared by mention links and anchors."""

from __future__ import annotations

import re
from typing import Callable

_WORD = re.compile(r"\w")


class TitleFinder:
    """Titles (trimmed, at least ``min_len`` characters, folded by ``fold``) → the nodes carrying them."""

    def __init__(
        self, titles: list[str | None], min_len: int = 2, fold: Callable[[str], str] = str
    ) -> None:
        import ahocorasick

        self.fold = fold
        self.nodes: dict[str, list[int]] = {}
        for i, t in enumerate(titles):
            if t and len(t.strip()) >= min_len:
                self.nodes.setdefault(fold(t.strip()), []).append(i)
        self.auto = ahocorasick.Automaton()
        for t in self.nodes:
            self.auto.add_word(t, t)
        if self.nodes:
            self.auto.make_automaton()

    def __bool__(self) -> bool:
        return bool(self.nodes)

    def find(self, text: str | None, whole_word: bool = False) -> list[str]:
        """The distinct titles occurring in ``text`` (sorted); substrings unless ``whole_word``."""
        if not self.nodes:
            return []
        s = self.fold(text or "")
        hits = set()
        for end, t in self.auto.iter(s):
            start = end - len(t) + 1
            if whole_word and (
                (start > 0 and _WORD.match(s[start - 1]))
                or (end + 1 < len(s) and _WORD.match(s[end + 1]))
            ):
                continue
            hits.add(t)
        return sorted(hits)
