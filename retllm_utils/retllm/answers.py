"""How RET-LLM's synthetic data set states facts, and reads them back (the answers notebooks 01–03 train and score).

`lookup` is the memory's exact-match reply to a query; `answer_sentence` the answer a reader gives from it, one
sentence per fact in the phrasings' words; `fact_sentence` one fact so; `stated_facts` the facts an answer states in
those words (evaluation's strict answer score); `join_names` lists people as a person would.
"""

from __future__ import annotations

import re
from typing import Sequence

from .phrasings import FORMS, PHRASE_KEY, RELATIONS

__all__ = ["NO_ANSWER", "join_names", "lookup", "answer_sentence", "fact_sentence", "stated_facts"]

NO_ANSWER = "I don't know."


def join_names(names: Sequence[str]) -> str:
    """'A', 'A and B', 'A, B, and C' (serial comma), as a person would list them."""
    names = list(names)
    if not names:
        raise ValueError("join_names needs at least one name")
    if len(names) <= 2:
        return " and ".join(names)
    return ", ".join(names[:-1]) + ", and " + names[-1]


def lookup(memory: Sequence[Sequence[str]], query: Sequence[str]) -> list[list[str]]:
    """The memory's exact-match reply: every triple agreeing with each non-empty query term, in memory order."""
    return [list(t) for t in memory if all(not q or q == x for q, x in zip(query, t))]


def answer_sentence(results: Sequence[Sequence[str]], *, grouped: bool = False) -> str:
    """The answer a reader gives from the memory's reply: one sentence per fact, in the reply's order.

    One sentence per fact makes answering a copy of the reply, which a small model does reliably; `grouped=True`
    gives one sentence per (relation, organisation) instead ("A, B, and C are customers of Pfizer."), the form the
    kit trained on before, which SmolLM2-135M merged and spliced on (org) and (rel) questions (notebook 03).
    """
    if not results:
        return NO_ANSWER
    groups: dict[tuple[str, str], list[str]] = {}
    if grouped:
        for s, r, o in results:
            groups.setdefault((r, o), []).append(s)
    out = []
    for (r, o), subjects in groups.items() if grouped else (((r, o), [s]) for s, r, o in results):
        forms = FORMS[PHRASE_KEY[r]]
        out.append(f"{join_names(subjects)} {forms.sg if len(subjects) == 1 else forms.pl} {o}.")
    return " ".join(out)


def fact_sentence(fact: Sequence[str]) -> str | None:
    """One fact as `answer_sentence` states it; None for a relation the data set has no words for (a controller's
    `answer_form`: answers then state only the reply's facts, in these words)."""
    s, r, o = fact
    key = PHRASE_KEY.get(r)
    return None if key is None else f"{s} {FORMS[key].sg} {o}."


_PREDICATE = {getattr(FORMS[k], n): phrase for k, phrase in RELATIONS.items() for n in ("sg", "pl")}
_STATEMENT = re.compile(r"(.+?) (" + "|".join(map(re.escape, _PREDICATE)) + r") (.+?)\.(?:\s+|$)")


def stated_facts(answer: str) -> set[tuple[str, str, str]]:
    """The (person, relation, organisation) facts an answer states in `answer_sentence`'s words (either form).

    Text in other words states nothing here, so a strict answer score (`evaluation.facts_correct`) needs the facts
    said as the data set says them; a sentence with a relation but the wrong people is caught, unlike by names.
    """
    facts = set()
    for m in _STATEMENT.finditer(answer):
        subj, pred, org = m.groups()
        for name in re.split(r", and |, | and ", subj):
            facts.add((name.strip(), _PREDICATE[pred], org.strip()))
    return facts
