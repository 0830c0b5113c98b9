"""The memory benchmark's workload: n seeded triples, and the exact and fuzzy lookups asked of them.

Exact lookups give stored phrases verbatim, in the four query shapes with an entity (RET-LLM Table 1:
(per, rel), (rel, org), (per), (org)); a relation-only query returns ~n/100 triples and measures result
size, not lookup. Fuzzy lookups replace the subject (or object) of a stored triple by a near-miss
(`phrases.perturb`: dropped token, lower case, dropped or swapped letters) that is not itself stored,
so the memory must find the phrase through its index.
"""

from __future__ import annotations

import random

from benchmarks.phrases import make_triples, perturb

Triple3 = tuple[str, str, str]


def phrases_of(triples: list[Triple3]) -> tuple[list[str], list[str]]:
    """(distinct entities, distinct relations) in first-seen order."""
    ents = list(dict.fromkeys(x for s, _, o in triples for x in (s, o)))
    rels = list(dict.fromkeys(r for _, r, _ in triples))
    return ents, rels


def exact_queries(triples: list[Triple3], n_queries: int, seed: int) -> list[Triple3]:
    rng = random.Random(seed + 1)
    out = []
    for i in range(n_queries):
        s, r, o = triples[rng.randrange(len(triples))]
        out.append([(s, r, ""), ("", r, o), (s, "", ""), ("", "", o)][i % 4])
    return out


def fuzzy_queries(
    triples: list[Triple3], n_queries: int, seed: int, stored: set[str] | None = None
) -> list[tuple[Triple3, str]]:
    """(query, the stored phrase it was made from): (s', r, '') or ('', r, o') with s' / o' a near-miss."""
    stored = stored if stored is not None else set(phrases_of(triples)[0])
    rng = random.Random(seed + 2)
    out: list[tuple[Triple3, str]] = []
    while len(out) < n_queries:
        s, r, o = triples[rng.randrange(len(triples))]
        subject = len(out) % 2 == 0
        src = s if subject else o
        q = perturb(src, rng)
        if q == src or q in stored or not q.strip():
            continue
        out.append(((q, r, "") if subject else ("", r, q), src))
    return out


def workload(n: int, seed: int = 0, n_queries: int = 1000):
    """triples, exact queries, fuzzy (query, source) pairs, and every phrase the run will need vectors of."""
    triples = make_triples(n, seed)
    ents, rels = phrases_of(triples)
    exact = exact_queries(triples, n_queries, seed)
    fuzzy = fuzzy_queries(triples, n_queries, seed, set(ents))
    needed = ents + rels + [x for q, _ in fuzzy for x in q if x]
    return triples, exact, fuzzy, needed
