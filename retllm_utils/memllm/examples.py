"""MemLLM's write rows from Re-DocRED: notebook 04 (building the data); MemLLM §3.2, §3.3.1, App. D.

The MemLLM data modules: `docred` reads Re-DocRED (documents, `DocView`, gold triples, lookups); `examples` (this
one) builds the write rows (§3.3.1, App. D); `reads` builds the read rows (§3.3.2, App. B–C) and the dev documents
notebook 07 scores (§4.1); `dataset` makes the DatasetDict of them (`make_dataset`, notebook 04's build cell),
says where it is saved and loads it for notebooks 05–06 (`load_or_build`). Text and spans index a document's plain
text as `docred.DocView` gives it.

Write example, one per focus sentence (official format, no spaces around the tags)::

    pretext + "({USER_ST})" + sentence + "({USER_END})" + "({MEM_WRITE-->h>>r>>t;h>>r>>t})" + end token

The loss covers ``({MEM_WRITE-->…})`` and the end token. A relation label is written once, in sentence
``max(max(evidence), first(h), first(t))`` where first(e) is the sentence of e's first mention: the latest
evidence sentence, delayed until both entities have appeared. 57% of Re-DocRED's labels have no evidence
(the revision added them); the official pipeline asks an LLM which sentence states them (App. D). Here
`empty_evidence` decides: "co_sentence" (default) takes the first sentence that mentions both entities as
evidence (none: the rule above without evidence), "first_mention" uses no evidence, "drop" skips the label.
As in the paper, 85% of the no-relation sentences are dropped (`drop_empty`); as in the official code, so is a
sentence with 32 triples or more (`max_triples`).

Rows are tokenizer-independent: `text`, `spans` (supervised [start, end) character spans) and `add_eos`;
`render(tokenizer, row)` appends the end token and gives what `training.tokenize_with_spans` takes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..api import USER_END, USER_ST, format_memllm_write
from ..memory import Q_THR
from .docred import DocView, gold_triples

__all__ = [
    "Q_THR",
    "MAX_TRIPLES",
    "EMPTY_EVIDENCE",
    "relation_sentence",
    "write_examples",
    "build_write_rows",
    "doc_rng",
]

MAX_TRIPLES = 32  # official write training keeps sentences with fewer triples than this
EMPTY_EVIDENCE = ("co_sentence", "first_mention", "drop")


# ----------------------------------------------------------------------------------------------- writes
def relation_sentence(view: DocView, label: Mapping[str, Any], empty_evidence: str = "co_sentence") -> int | None:
    """The focus sentence whose write call holds this label: max(max(evidence), first(h), first(t)); see module doc."""
    if empty_evidence not in EMPTY_EVIDENCE:
        raise ValueError(f"empty_evidence must be one of {EMPTY_EVIDENCE}, got {empty_evidence!r}")
    h, t = label["h"], label["t"]
    evidence = list(label.get("evidence") or [])
    if not evidence:
        if empty_evidence == "drop":
            return None
        if empty_evidence == "co_sentence":
            evidence = [s for s, ents in enumerate(view.sent_entities) if h in ents and t in ents][:1]
    return max(evidence + [view.first[h][3], view.first[t][3]])


def write_examples(
    doc: Mapping[str, Any],
    rel_names: Mapping[str, str],
    *,
    doc_idx: int = 0,
    split: str = "",
    max_pretext_chars: int | None = None,
    empty_evidence: str = "co_sentence",
) -> list[dict]:
    """One write row per sentence (no-relation sentences included; `build_write_rows` drops most of them)."""
    view = DocView.of(doc)
    by_sent: dict[int, list] = {}
    for k, t in gold_triples(doc, rel_names, view):
        lab = doc["labels"][k]
        s = relation_sentence(view, lab, empty_evidence)
        if s is None:
            continue
        # order inside the call by where the later of the two entities is mentioned in the sentence (official)
        lo, hi = view.sent_start[s], view.sent_start[s + 1]
        pos = [
            min((m[0] for m in view.mentions if m[2] == e and lo <= m[0] < hi), default=hi)
            for e in (lab["h"], lab["t"])
        ]
        by_sent.setdefault(s, []).append((max(pos), k, t))
    rows = []
    for s in range(len(doc["sents"])):
        triples = [t for *_, t in sorted(by_sent.get(s, []))]
        pretext, start = view.pretext(view.sent_start[s], max_pretext_chars)
        head = pretext + USER_ST + view.sentence(s) + USER_END
        text = head + format_memllm_write(triples)
        rows.append(
            {
                "id": f"{split}-{doc_idx}-w{s}",
                "doc_idx": doc_idx,
                "title": doc.get("title", ""),
                "sent_id": s,
                "text": text,
                "spans": [[len(head), len(text)]],
                "add_eos": True,
                "triples": [list(t) for t in triples],
                "n_triples": len(triples),
                "pretext_start_word": start,
            }
        )
    return rows


def doc_rng(seed: int, doc_idx: int, salt: int) -> np.random.Generator:
    """One generator per (seed, document, purpose): a document's examples do not depend on which others are built."""
    return np.random.default_rng([seed, doc_idx, salt])


def build_write_rows(
    docs: Sequence[Mapping[str, Any]],
    rel_names: Mapping[str, str],
    doc_ids: Iterable[int],
    *,
    split: str,
    seed: int = 0,
    drop_empty: float = 0.85,
    max_pretext_chars: int | None = None,
    empty_evidence: str = "co_sentence",
    max_triples: int | None = MAX_TRIPLES,
) -> tuple[list[dict], Counter]:
    """Write rows of the chosen documents, and counts.

    Each no-relation sentence is kept with probability 1 - drop_empty (the paper drops 85%); a sentence with
    `max_triples` triples or more is dropped (official: fewer than 32), as its call alone would fill the context.
    Counts include the gold triples with and without an evidence sentence (what `empty_evidence="drop"` keeps).
    """
    if not 0 <= drop_empty <= 1:
        raise ValueError(f"drop_empty must be in [0, 1], got {drop_empty}")
    rows, n = [], Counter()
    for d in doc_ids:
        doc = docs[d]
        rng = doc_rng(seed, d, 1)
        n["documents"] += 1
        n["labels"] += len(doc["labels"])
        n["labels_without_evidence"] += sum(1 for lab in doc["labels"] if not lab.get("evidence"))
        for k, _t in gold_triples(doc, rel_names):
            ev = bool(doc["labels"][k].get("evidence"))
            n["gold_triples_with_evidence" if ev else "gold_triples_without_evidence"] += 1
        for row in write_examples(
            doc, rel_names, doc_idx=d, split=split, max_pretext_chars=max_pretext_chars, empty_evidence=empty_evidence
        ):
            n["sentences"] += 1
            if max_triples is not None and row["n_triples"] >= max_triples:
                n["dropped_too_many_triples"] += 1
                n["triples_dropped_with_them"] += row["n_triples"]
                continue
            n["triples_written"] += row["n_triples"]
            if row["n_triples"] == 0:
                n["sentences_without_relation"] += 1
                if rng.random() < drop_empty:
                    n["dropped_no_relation"] += 1
                    continue
            n["write_examples"] += 1
            n["write_examples_with_relations" if row["n_triples"] else "write_examples_without_relations"] += 1
            rows.append(row)
    return rows, n
