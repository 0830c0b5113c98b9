"""How good must a written memory be to help? Memories of controlled recall and precision (ours, beyond the paper).

The paper scores one written memory (MW[dev], recall 0.578 at precision 0.425; Table 4). `memory_at` builds a
memory from the dev documents' gold triples with a chosen recall (the share of each document's gold triples kept,
drawn at random) and precision (wrong triples added until kept / all = precision). Wrong triples look like the write
model's errors: half keep a gold triple's two entities under another relation of Re-DocRED's, half swap one entity
for another entity of the same document and type (PER, LOC, ORG, TIME, NUM, MISC); none is a gold triple. Notebook 07
scores row ③'s definition (the read model's own queries at the gold positions, both branches mixed) on each.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

import numpy as np

from ..api import Triple
from .docred import DocView, gold_triples

__all__ = ["memory_at"]


def _wrong(
    rng: np.random.Generator, gold: Sequence[Triple], truth: set[Triple], typed: Mapping[str, list[str]], types: dict
) -> tuple[Triple, str] | None:
    """One wrong triple shaped like a write model's error, or None when this document offers none."""
    relations = sorted({t.relation for t in truth})
    for _ in range(20):
        t = gold[rng.integers(len(gold))]
        if rng.random() < 0.5:
            r = relations[rng.integers(len(relations))]
            cand, kind = Triple(t.subject, r, t.object), "wrong relation"
        else:
            side = "subject" if rng.random() < 0.5 else "object"
            pool = [e for e in typed.get(types.get(getattr(t, side)), []) if e not in (t.subject, t.object)]
            if not pool:
                continue
            e = pool[rng.integers(len(pool))]
            cand = Triple(e, t.relation, t.object) if side == "subject" else Triple(t.subject, t.relation, e)
            kind = "wrong entity"
        if cand not in truth:
            return cand, kind
    return None


def memory_at(
    docs: Sequence[Mapping[str, Any]],
    rel_names: Mapping[str, str],
    *,
    recall: float,
    precision: float,
    seed: int = 0,
) -> tuple[list[Triple], Counter]:
    """Triples for a memory with this recall and precision over `docs`' gold triples, and what they are made of."""
    if not (0 <= recall <= 1 and 0 < precision <= 1):
        raise ValueError(f"recall must be in [0, 1] and precision in (0, 1]; got {recall}, {precision}")
    out, n = [], Counter()
    for d, doc in enumerate(docs):
        rng = np.random.default_rng([seed, d, int(recall * 1000), int(precision * 1000)])
        view = DocView.of(doc)
        gold = [t for _, t in gold_triples(doc, rel_names, view)]
        n["gold"] += len(gold)
        if not gold:
            continue
        kept = [gold[i] for i in sorted(rng.choice(len(gold), round(recall * len(gold)), replace=False))]
        types = {view.names[e]: ent[0].get("type") for e, ent in enumerate(doc["vertexSet"])}
        typed: dict[str, list[str]] = {}
        for name, ty in types.items():
            typed.setdefault(ty, []).append(name)
        truth, wrong = set(gold), []
        for _ in range(round(len(kept) * (1 - precision) / precision)):
            w = _wrong(rng, gold, truth | set(wrong), typed, types)
            if w is None:
                break
            wrong.append(w[0])
            n[w[1]] += 1
        n["kept"] += len(kept)
        out += kept + wrong
    return out, n
