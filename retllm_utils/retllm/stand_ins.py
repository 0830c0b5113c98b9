"""False stand-ins: a fuzzy read that let a stored phrase answer for a term it does not mean (notebook 03's rate).

A stand-in is right when it is the gold query's term, the entity the gold reply names in that role, or the one stored
name a misspelt gold term is nearest to: the wide build's questions keep a person's typo in their gold query
(`wide.misspell` makes each slip nearer its name than any other person of the scene), and a no-match question about
that person has an empty gold reply.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

__all__ = ["false_substitutions"]

_ROLE = {"subject": 0, "relation": 1, "object": 2}


def _meant(term: str, names: set[str]) -> set[str]:
    """The one stored name a misspelt `term` is nearest to, by edits (the data set's slips are built that way:
    `wide.misspell`), if it is within two; a tie or nothing that near: none."""
    from rapidfuzz.distance import OSA

    dist = {n: OSA.distance(term, n) for n in names}
    best = min(dist.values(), default=3)
    near = [n for n, d in dist.items() if d == best]
    return set(near) if best <= 2 and len(near) == 1 else set()


def false_substitutions(subs: Sequence[Mapping[str, Any]], row: Mapping[str, Any]) -> list[str]:
    """Accepted stand-ins that are neither the gold query's term, nor the gold reply's entity in that role, nor the
    stored name the gold term misspells (a question about a misspelt person may find nothing: a no-match read)."""
    gold = row["query"] or ["", "", ""]
    ok = {(i, t[i]) for t in row.get("triples") or () for i in range(3)} | set(enumerate(gold))
    memory = row.get("memory") or ()
    ok |= {(i, m) for i in (0, 2) if gold[i] for m in _meant(gold[i], {t[i] for t in memory})}
    return [
        f"{s['term']} -> {s['stored']}" for s in subs if s["accepted"] and (_ROLE[s["role"]], s["stored"]) not in ok
    ]
