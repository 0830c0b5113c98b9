"""The write model's triples in Re-DocRED's official submission format, scored as its `evaluation.py` scores them.

A relation-extraction system submits a list of facts ``{"title", "h_idx", "t_idx", "r", "evidence"}``: entity
indices into the document's `vertexSet`, a Wikidata P-id (`rel_info.json`) and the sentences that state it. The
write model writes strings, so each subject and object is resolved to an entity of its document:

1. exact: the string equals a mention's `name` or its words in the text, of exactly one entity;
2. normalised: the same after case folding and dropping everything but letters and digits (quotes, spaces around
   DocRED's tokens: ``Wilfried "Willi " Schneider`` is ``wilfriedwillischneider``), again of exactly one entity.

A string that matches no entity, or several, is not guessed: the fact is dropped and counted
(`Export.dropped`), as is a relation name that is not one of Re-DocRED's 96. Scores follow the official
`evaluation.py`: a submitted fact is correct when (title, r, h_idx, t_idx) is a gold label; precision over the
distinct submitted facts, recall over the gold labels of the submitted documents. Ign F1 (facts seen in the train
split left out) needs the train split, which the kit does not have.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from ..metrics import PRF

__all__ = ["Export", "export_document", "export_documents", "score_submission", "PUBLISHED_DEV_F1"]

# For scale: a supervised document-level RE model on Re-DocRED dev, trained on Re-DocRED's train split. KD-DocRE,
# F1 78.51 (Tan et al., 2022, "Revisiting DocRED", arXiv 2205.12696, as listed by Papers with Code).
PUBLISHED_DEV_F1 = {"model": "KD-DocRE (trained on Re-DocRED train)", "F1": 0.7851, "source": "arXiv 2205.12696"}

_NOT_WORD = re.compile(r"[\W_]+")


def _norm(s: str) -> str:
    return _NOT_WORD.sub("", s.casefold())


@dataclass
class Export:
    """Submitted facts and what could not be submitted, by reason."""

    facts: list[dict] = field(default_factory=list)
    dropped: Counter = field(default_factory=Counter)
    unmatched: list[tuple[str, str | None]] = field(default_factory=list)  # (string, a mention it overlaps, if any)


def _entity_index(doc: Mapping[str, Any]) -> tuple[dict[str, set[int]], dict[str, set[int]]]:
    """Mention strings -> entities: exact (names and text spans) and normalised."""
    words = [w for s in doc["sents"] for w in s]
    starts = [0]
    for s in doc["sents"]:
        starts.append(starts[-1] + len(s))
    exact: dict[str, set[int]] = {}
    for e, ent in enumerate(doc["vertexSet"]):
        for m in ent:
            a = starts[m["sent_id"]]
            for s in (" ".join(str(m["name"]).split()), " ".join(words[a + m["pos"][0] : a + m["pos"][1]])):
                exact.setdefault(s, set()).add(e)
    norm: dict[str, set[int]] = {}
    for s, es in exact.items():
        norm.setdefault(_norm(s), set()).update(es)
    return exact, norm


def _resolve(s: str, exact: Mapping[str, set[int]], norm: Mapping[str, set[int]]) -> int | str:
    """The entity index of `s`, or why there is none ("unmatched", "ambiguous")."""
    for table, key in ((exact, " ".join(s.split())), (norm, _norm(s))):
        es = table.get(key)
        if es:
            return next(iter(es)) if len(es) == 1 else "ambiguous"
    return "unmatched"


def export_document(
    doc: Mapping[str, Any],
    written: Iterable[tuple[int, Sequence[str]]],
    rel_ids: Mapping[str, str],
) -> Export:
    """One document's facts from (sentence id, triple) pairs the write model wrote; `rel_ids`: name -> P-id."""
    exact, norm = _entity_index(doc)
    out, facts = Export(), {}
    for sent, (s, r, o) in written:
        if r not in rel_ids:
            out.dropped["relation not in rel_info"] += 1
            continue
        h, t = _resolve(s, exact, norm), _resolve(o, exact, norm)
        if isinstance(h, str) or isinstance(t, str):
            out.dropped[f"entity {h if isinstance(h, str) else t}"] += 1
            for x, r_ in ((s, h), (o, t)):
                if r_ == "unmatched":
                    near = next(
                        (m for m in exact if x.casefold() in m.casefold() or m.casefold() in x.casefold()), None
                    )
                    out.unmatched.append((x, near))
            continue
        if h == t:
            out.dropped["subject and object one entity"] += 1
            continue
        key = (h, t, rel_ids[r])
        facts.setdefault(key, set()).add(sent)
    out.facts = [
        {"title": doc["title"], "h_idx": h, "t_idx": t, "r": r, "evidence": sorted(ev)}
        for (h, t, r), ev in facts.items()
    ]
    return out


def export_documents(
    docs: Sequence[Mapping[str, Any]],
    written: Mapping[int, Iterable[tuple[int, Sequence[str]]]],
    rel_names: Mapping[str, str],
) -> Export:
    """All written documents' facts; `rel_names`: P-id -> name (`docred.relation_names`)."""
    rel_ids = {name: pid for pid, name in rel_names.items()}
    out = Export()
    for d, pairs in written.items():
        one = export_document(docs[d], pairs, rel_ids)
        out.facts += one.facts
        out.dropped += one.dropped
        out.unmatched += one.unmatched
    return out


def score_submission(facts: Sequence[Mapping[str, Any]], docs: Iterable[Mapping[str, Any]]) -> PRF:
    """Official `evaluation.py` precision / recall over the given (submitted) documents' gold labels."""
    gold = {(d["title"], lab["r"], lab["h"], lab["t"]) for d in docs for lab in d.get("labels", [])}
    return PRF.of_sets(((f["title"], f["r"], f["h_idx"], f["t_idx"]) for f in facts), gold)
