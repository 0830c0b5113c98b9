"""Coordinated names written alike: "Ann Lee and Bo Chen work at BMW" says one fact of each listed name. A 135M
model writing such a list sometimes stops a name short (`[MEM_WRITE{Ann Lee>>employed by>>BMW}]` and no call for Bo
Chen). `coordinated_writes` gives the facts the list implies and the turn did not write: each unwritten name of a
list takes the one (role, relation, other term) that the list's written names share. An extension beyond the paper
(`RetLLMController(coordinated_writes=True)`), off by default; notebook 03 scores a statement's writes with the rule's
(`stored exact`) beside the model's own calls.
"""

from __future__ import annotations

import re
from typing import Sequence

from ..api import Triple

__all__ = ["name_lists", "coordinated_writes"]

# a capitalised word ("Kapoor-Shah", "O'Neil", "eBay"), and the lower-case particles a name may hold between two
_CAP = r"(?:[A-Z]|[a-z]+[A-Z])\w*(?:[-'’]\w+)*"
_PARTICLES = r"(?:&|van|von|der|den|de|da|del|du|di|la|le)"
_NAME = re.compile(rf"{_CAP}(?:\s+(?:{_PARTICLES}\s+)*{_CAP})*")
# what stands between two names of one list: a comma, "and", or both
_JOIN = re.compile(r"\s*,\s*(?:and\s+)?|\s+and\s+")


def name_lists(text: str) -> list[list[str]]:
    """Every list of two or more capitalised names joined by commas and "and" (an "and" at least once: "Paris,
    France" is no list), in text order."""
    runs = list(_NAME.finditer(text))
    lists, cur, joined_by_and = [], [], False
    for prev, run in zip([None, *runs], runs):
        gap = text[prev.end() : run.start()] if prev is not None else None
        if gap is not None and _JOIN.fullmatch(gap):
            cur.append(run.group())
            joined_by_and |= "and" in gap
            continue
        if len(cur) >= 2 and joined_by_and:
            lists.append(cur)
        cur, joined_by_and = [run.group()], False
    if len(cur) >= 2 and joined_by_and:
        lists.append(cur)
    return lists


def coordinated_writes(text: str, written: Sequence[Sequence[str]]) -> list[Triple]:
    """The facts a list of names in `text` implies and `written` lacks: a name no write holds takes the list's
    written names' one shared (role, relation, other term); a list whose written names differ in it (e.g. "A and B
    manage X and Y, respectively") or have none gives nothing."""
    named = {_key(x) for t in written for x in (t[0], t[2])}
    out: list[Triple] = []
    for names in name_lists(text):
        keys = {_key(n) for n in names}
        have = {_key(n) for n in names if _key(n) in named}
        missing = [n for n in names if _key(n) not in named]
        if not have or not missing:
            continue
        shared = {
            (role, t[1], t[2 - role])
            for t in written
            for role in (0, 2)
            if _key(t[role]) in have and _key(t[2 - role]) not in keys
        }
        if len(shared) != 1:
            continue
        role, rel, other = shared.pop()
        for n in missing:
            t = Triple(n, rel, other) if role == 0 else Triple(other, rel, n)
            if t not in out:
                out.append(t)
    return out


def _key(name: str) -> str:
    """A name as a list and a call may both say it: case folded, a leading "the" dropped ("the NFL", "NFL")."""
    n = name.casefold().strip()
    return n[4:] if n.startswith("the ") else n
