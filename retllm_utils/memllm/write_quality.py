"""MemLLM memory-write quality (Table 4, appendices A and F; notebook 06): run the write model per focus sentence,
score its triples.

Decoding is `generation.write_call` (greedy, or late stopping with K cut points, the repeated-triple stop and the
unclosed-call rule; see its module doc); `write_document` runs it over a document's write rows and counts how the
calls ended in `stats`.

Precision and recall per document, micro-averaged: exact (the same three strings) and embedding-matched
(appendix F: a generated triple matches a gold one when subject and object reach cosine `tau_entity` and the
relation `tau_relation` under the memory's phrase encoder). A generated triple counts as correct if it matches
any gold triple of its document; a gold triple counts as found if any generated triple matches it.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..api import MemWrite, Triple, parse_memllm
from ..metrics import PRF
from .generation import ModelStep, write_call

__all__ = ["generate_write", "write_document", "PRF", "score_exact", "score_embedded", "PAPER_TABLE4"]

# MemLLM Table 4 (Mistral-7B write model on Re-DocRED dev): still empty, to be filled from the paper (a later task)
# as {setting: (precision, recall)}; notebook 06 prints them beside ours, "n/a" while missing.
PAPER_TABLE4: dict[str, tuple[float, float]] = {}


def generate_write(model: Any, tokenizer: Any, head: str, **kw: Any) -> str:
    """The write call a model produces after `head` (pretext + tagged sentence), "({MEM_WRITE-->...})" (notebook 05).

    Keywords as `generation.write_call`: late_stopping, max_new_tokens, stop_on_repeat, stats.
    """
    return write_call(ModelStep(model), tokenizer, head, **kw).text


def write_document(
    model: Any, tokenizer: Any, write_rows: Sequence[Mapping[str, Any]], **kw: Any
) -> tuple[list[Triple], list[str]]:
    """Triples the write model extracts from one document's write rows (`write_examples`), and the raw calls."""
    triples, raw = [], []
    for row in write_rows:
        call = generate_write(model, tokenizer, row["text"][: row["spans"][0][0]], **kw)
        raw.append(call)
        for c in parse_memllm(call):
            if isinstance(c, MemWrite):
                triples += [t for t in c.triples if t not in triples]
    return triples, raw


def _clean(triples: Iterable[Sequence[str]]) -> list[Triple]:
    return list(dict.fromkeys(Triple(*(str(x).strip() for x in t)) for t in triples))


def score_exact(pred: Iterable[Sequence[str]], gold: Iterable[Sequence[str]]) -> PRF:
    """One document: a triple is right when all three strings equal a gold triple's."""
    p, g = _clean(pred), _clean(gold)
    gs, ps = set(g), set(p)
    return PRF(sum(t in gs for t in p), len(p), sum(t in ps for t in g), len(g))


def score_embedded(
    pred: Iterable[Sequence[str]],
    gold: Iterable[Sequence[str]],
    embedder: Any,
    *,
    tau_entity: float,
    tau_relation: float,
) -> PRF:
    """One document, appendix F: matched when cos(subject), cos(object) >= tau_entity, cos(relation) >= tau_relation."""
    p, g = _clean(pred), _clean(gold)
    if not p or not g:
        return PRF(0, len(p), 0, len(g))
    phrases = sorted({x for t in p + g for x in t})
    vec = dict(zip(phrases, embedder.encode(phrases)))

    def cos(a: list[str], b: list[str]) -> np.ndarray:
        return np.stack([vec[x] for x in a]) @ np.stack([vec[x] for x in b]).T

    ok = (
        (cos([t.subject for t in p], [t.subject for t in g]) >= tau_entity - 1e-6)
        & (cos([t.object for t in p], [t.object for t in g]) >= tau_entity - 1e-6)
        & (cos([t.relation for t in p], [t.relation for t in g]) >= tau_relation - 1e-6)
    )
    return PRF(int(ok.any(1).sum()), len(p), int(ok.any(0).sum()), len(g))
