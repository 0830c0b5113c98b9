"""Backslash escapes in memory-API terms: a delimiter inside a term is escaped (``Washington\\, D.C.``), never split.

`api` formats and parses both dialects with these; each scan is one regular-expression pass, linear in the text.
"""

from __future__ import annotations

import functools
import re
from typing import Iterable

__all__ = ["escape", "split_unescaped", "unescape", "find_unescaped", "cut_spans"]


def escape(term: str, special: set[str]) -> str:
    """`term`, stripped, with a backslash before each character of `special`."""
    term = str(term).strip()
    return "".join("\\" + c if c in special else c for c in term)


@functools.lru_cache(maxsize=None)
def _escape_or(alternative: str) -> re.Pattern:
    """An escape (a backslash and the character after it) or `alternative`: one C-speed scan, no per-char loop."""
    return re.compile(r"\\.|" + alternative, re.S)


def split_unescaped(body: str, sep: str) -> list[str]:
    """Split on `sep` where it is not escaped; escapes are kept for `unescape`."""
    if "\\" not in body:
        return body.split(sep)
    parts, last = [], 0
    for m in _escape_or(re.escape(sep)).finditer(body):
        if m.group()[0] != "\\":
            parts.append(body[last : m.start()])
            last = m.end()
    parts.append(body[last:])
    return parts


_ESCAPED = re.compile(r"\\(.)", re.S)


def unescape(term: str) -> str:
    """A term as written, escapes undone and surrounding whitespace stripped."""
    return (_ESCAPED.sub(r"\1", term) if "\\" in term else term).strip()


@functools.lru_cache(maxsize=None)
def _plain_run(chars: str) -> re.Pattern:
    """Text free of `chars`, escapes included (a backslash never starts a run, so there is no backtracking)."""
    return re.compile(r"(?:[^\\" + re.escape(chars) + r"]+|\\.)*", re.S)


def find_unescaped(text: str, chars: str, start: int) -> int:
    """Index of the first unescaped character of `chars` at or after `start`, or -1."""
    pos = _plain_run(chars).match(text, start).end()
    return pos if pos < len(text) and text[pos] in chars else -1


def cut_spans(text: str, spans: Iterable) -> str:
    """`text` with the character ranges of `spans` (objects with `start` and `end`, in order) cut out."""
    out, i = [], 0
    for c in spans:
        out.append(text[i : c.start])
        i = c.end
    out.append(text[i:])
    return "".join(out)
