"""The seeded generator behind `synthetic.make_dataset`: name pools, each split's examples, scenes, statements and
questions (RET-LLM §3.3, Tables 1–2).

Every person has exactly one relation with one organisation. Each example sees a small *scene*: a few people
(`scene_size`) and their facts, which are the whole memory for that example, so a `(rel)` or `(org)` query has a few
results rather than hundreds. People are drawn afresh for every scene, from a pool of the split's own (`name_pools`),
so test people never occur in training (companies are shared). `slots` fixes each split's exact mix of query types,
relations and misses; `shapes` the paraphrase split's phrasings; `example` draws one row's scene and says it.
`scene`, `scene_facts` and `read_query` are the steps `wide` (the wide build) shares with it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..api import format_retllm_read_query, format_retllm_read_reply, format_retllm_write
from .answers import answer_sentence, join_names, lookup
from .phrasings import (
    FORMS,
    JOIN_THREE,
    JOIN_TWO,
    PARAPHRASE_FORMS,
    PARAPHRASE_QUESTIONS,
    PARAPHRASE_TYPOS,
    PHRASE_KEY,
    QUESTIONS,
    RELATIONS,
)

__all__ = [
    "QUERY_TYPES",
    "load_names",
    "name_pools",
    "slots",
    "shapes",
    "draw",
    "scene",
    "scene_facts",
    "read_query",
    "example",
]

QUERY_TYPES = ("per", "per_org", "per_rel", "org", "rel", "org_rel")  # RET-LLM Table 1, in its order
_WRITE_SHAPES = ("new_verb", "passive", "multi_fact")
_READ_SHAPES = ("new_question", "new_question", "typo")  # a third of the paraphrase reads have a typo
_SPECIAL = set("\\{}[]>;")  # API delimiters: a name containing one would need escaping, so refuse it


def load_names(path: str | Path) -> list[str]:
    """One name per line (blank lines and '#' comments skipped); refuses duplicates and API delimiters."""
    path = Path(path)
    names, seen = [], {}
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        name = line.strip()
        if not name or name.startswith("#"):
            continue
        bad = sorted(set(name) & _SPECIAL)
        if bad:
            raise ValueError(f"{path}:{i}: {name!r} contains API delimiter(s) {''.join(bad)!r}")
        if name in seen:
            raise ValueError(f"{path}:{i}: duplicate name {name!r} (first on line {seen[name]})")
        seen[name] = i
        names.append(name)
    if not names:
        raise ValueError(f"{path}: no names")
    return names


def name_pools(
    seed: int, first: Sequence[str], last: Sequence[str], sizes: dict[str, int], scene_size: tuple[int, int]
) -> dict[str, list[str]]:
    """Disjoint shuffled full-name pools: test first, then validation, then paraphrase; train takes the rest.

    Test, validation and paraphrase reserve the most a split can consume (a full scene plus one outsider per
    example), so their people depend only on the seed and the sizes of the splits before them (test: its own;
    validation: test's and its own; paraphrase: those and its own), never on n_train. A size missing from `sizes`
    counts as 0 (callers written before the paraphrase split get the pools they had).
    """
    people = sorted({f"{given} {family}" for given in first for family in last})
    random.Random(seed).shuffle(people)
    per_example = scene_size[1] + 1
    pools, start = {}, 0
    for split in ("test", "validation", "paraphrase"):
        pools[split] = people[start : start + sizes.get(split, 0) * per_example]
        start += len(pools[split])
    need = start + sizes["train"] * (sum(scene_size) // 2 + 1)
    if need > len(people):
        raise ValueError(
            f"the name lists give {len(people)} distinct people, but these sizes need about {need}: "
            f"add names to the lists or lower the sizes"
        )
    pools["train"] = people[start:]
    return pools


def draw(names: Iterator[str], split: str) -> str:
    try:
        return next(names)
    except StopIteration:
        raise ValueError(f"the {split} split ran out of people: add names to the lists or lower its size") from None


def slots(rng: random.Random, n: int, write_frac: float, no_match_frac: float) -> list[tuple[str, str, bool]]:
    """(query_type or 'write', relation key, matches) for each example: exact type counts, relations cycled."""
    n_write = round(n * write_frac)
    n_read, k = n - n_write, len(QUERY_TYPES)
    n_miss = round(n_read * no_match_frac)
    remainder_first = list(QUERY_TYPES)
    rng.shuffle(remainder_first)  # which types get the odd miss when misses don't divide evenly
    counts = {"write": (n_write, 0)}
    for i, t in enumerate(QUERY_TYPES):
        counts[t] = (n_read // k + (i < n_read % k), n_miss // k + (remainder_first.index(t) < n_miss % k))
    slots = []
    for qtype, (count, misses) in counts.items():
        order = list(RELATIONS)
        rng.shuffle(order)
        slots += [(qtype, order[i % len(order)], i >= min(misses, count)) for i in range(count)]
    rng.shuffle(slots)
    return slots


def shapes(rng: random.Random, slots: Sequence[tuple[str, str, bool]]) -> list[str]:
    """The paraphrase split's phrasing of each slot: cycled within each query type from a random start, so every
    type gets each of its shapes about equally (writes: a third multi-fact; reads: a third with a typo)."""
    start: dict[str, int] = {}
    seen: dict[str, int] = {}
    out = []
    for qtype, _, _ in slots:
        cycle = _WRITE_SHAPES if qtype == "write" else _READ_SHAPES
        if qtype not in start:
            start[qtype] = rng.randrange(len(cycle))
        out.append(cycle[(start[qtype] + seen.get(qtype, 0)) % len(cycle)])
        seen[qtype] = seen.get(qtype, 0) + 1
    return out


def scene(
    rng: random.Random,
    names: Iterator[str],
    split: str,
    companies: Sequence[str],
    rel: str,
    need: str,
    scene_size: tuple[int, int],
) -> list[tuple[str, str, list[str]]]:
    """Groups (relation key, organisation, people) of a new scene.

    need: 'has' (some group has `rel`), 'lacks' (no fact with `rel`), 'other' (the first group has another relation),
    'multi' ('has', and a second group with another (relation, organisation), when the scene has room for two).
    A scene uses 1–3 organisations and 2–3 relations, so `(org)` and `(rel)` queries find several facts.
    """
    others = [r for r in RELATIONS if r != rel]
    first = others[rng.randrange(len(others))] if need in ("lacks", "other") else rel
    pool = [r for r in RELATIONS if r != first and not (need == "lacks" and r == rel)]
    rels = [first] + rng.sample(pool, rng.choice((1, 2)))
    orgs = rng.sample(list(companies), rng.choice((1, 2, 2, 3)))
    left = rng.randint(*scene_size)
    groups = []
    while left > 0:
        r = rels[0] if not groups else rels[rng.randrange(len(rels))]
        size = min(left, rng.choices((1, 2, 3, 4), weights=(4, 3, 2, 1))[0])
        o = orgs[rng.randrange(len(orgs))]
        if need == "multi" and not groups and left > 1:
            size = min(size, left - 1)  # leave room for a second group
        elif need == "multi" and len(groups) == 1 and (r, o) == groups[0][:2]:
            r, o = rng.choice([(r2, o2) for r2 in rels for o2 in orgs if (r2, o2) != groups[0][:2]])
        groups.append((r, o, [draw(names, split) for _ in range(size)]))
        left -= size
    return groups


def scene_facts(groups: Sequence[tuple[str, str, list[str]]]) -> tuple[list[list[str]], list[list[str]]]:
    """A scene's facts in group order, and the memory: statement by statement, facts of one (relation,
    organisation) kept together, so a reply lists them in the runs the answer sentence names them in."""
    facts = [[p, RELATIONS[r], o] for r, o, people in groups for p in people]
    first_seen: dict[tuple[str, str], int] = {}
    for r, o, _ in groups:
        first_seen.setdefault((r, o), len(first_seen))
    return facts, sorted(facts, key=lambda t: first_seen[(PHRASE_KEY[t[1]], t[2])])


def read_query(
    rng: random.Random,
    names: Iterator[str],
    split: str,
    companies: Sequence[str],
    slot: tuple[str, str, bool],
    facts: Sequence[Sequence[str]],
) -> tuple[list[str], str, str]:
    """A read slot's gold query over a scene's facts (a miss made to miss), and the person and organisation its
    question names (`x`, `o`; a type that names neither still gets them, unused)."""
    qtype, rel, match = slot
    target = rng.choice([f for f in facts if f[1] == RELATIONS[rel]] or facts)
    x, o = target[0], target[2]
    if not match:
        scene_orgs = sorted({f[2] for f in facts})
        if qtype == "per":
            x = draw(names, split)  # someone the memory has never heard of
        elif qtype == "per_org":
            o = rng.choice([c for c in scene_orgs if c != o] or [c for c in companies if c != o])
        elif qtype == "per_rel":
            x = rng.choice([f[0] for f in facts if f[1] != RELATIONS[rel]])  # need='other' made one
        elif qtype == "org":
            o = rng.choice([c for c in companies if c not in scene_orgs])
        elif qtype == "org_rel":
            o = rng.choice(scene_orgs)
    phrase = RELATIONS[rel]
    query = {
        "per": [x, "", ""],
        "per_org": [x, "", o],
        "per_rel": [x, phrase, ""],
        "org": ["", "", o],
        "rel": ["", phrase, ""],
        "org_rel": ["", phrase, o],
    }[qtype]
    return query, x, o


def _clause(rng: random.Random, rel: str, org: str, people: Sequence[str]) -> tuple[str, bool]:
    """One fact-group as a clause of a multi-fact statement (a write template, training or new, without its full
    stop), and whether it ends in the people."""
    many = len(people) > 1
    forms, para = FORMS[rel], PARAPHRASE_FORMS[rel]
    templates = [
        *(forms.write_pl if many else forms.write_sg),
        *(para.write_pl if many else para.write_sg),
        *(para.passive_pl if many else para.passive_sg),
    ]
    template = rng.choice(templates).removesuffix(".")
    return template.format(P=join_names(people), O=org), template.endswith("{P}")


def _multi_fact(rng: random.Random, groups: Sequence[tuple[str, str, list[str]]], rel: str):
    """A statement of 2–3 of the scene's groups, each of another (relation, organisation), the first with `rel`;
    the groups in sentence order. None when the scene has a single (relation, organisation)."""
    first = rng.choice([g for g in groups if g[0] == rel])
    chosen, pairs = [first], {first[:2]}
    for g in rng.sample(list(groups), len(groups)):
        if g[:2] not in pairs:
            chosen.append(g)
            pairs.add(g[:2])
    if len(chosen) == 1:
        return None
    chosen = chosen[: rng.choice((2, 2, 3))]
    clauses = [_clause(rng, r, o, people) for r, o, people in chosen]
    inner_people = any(ends for _, ends in clauses[:-1])
    if len(clauses) == 2:
        joins = JOIN_TWO if not inner_people else [j for j in JOIN_TWO if not j.startswith("{0} and")]
    else:
        joins = JOIN_THREE if not inner_people else [j for j in JOIN_THREE if ";" in j]
    return rng.choice(joins).format(*(c for c, _ in clauses)), chosen


def example(
    rng: random.Random,
    names: Iterator[str],
    split: str,
    companies: Sequence[str],
    i: int,
    slot: tuple[str, str, bool],
    scene_size: tuple[int, int],
    phrasing: str = "template",
) -> dict[str, Any]:
    """One row; `phrasing` picks the tables its user message is said from ("template": the training ones)."""
    qtype, rel, match = slot
    need = "multi" if phrasing == "multi_fact" else "has"
    if not match:
        need = {"rel": "lacks", "org_rel": "lacks", "per_rel": "other"}.get(qtype, "has")
    groups = scene(rng, names, split, companies, rel, need, scene_size)
    facts, memory = scene_facts(groups)
    row = {"id": f"{split}-{i:05d}", "kind": "read", "query_type": qtype, "relation": rel, "scene": i}
    if qtype == "write":
        multi = _multi_fact(rng, groups, rel) if phrasing == "multi_fact" else None
        if multi is None:
            if phrasing == "multi_fact":
                phrasing = "new_verb"  # a scene of one (relation, organisation): scene_size allows only that
            r, o, people = rng.choice([g for g in groups if g[0] == rel])
            triples = [[p, RELATIONS[r], o] for p in people]
            sg = len(people) == 1
            if phrasing == "template":
                template = rng.choice(FORMS[r].write_sg if sg else FORMS[r].write_pl)
            else:
                para = PARAPHRASE_FORMS[r]
                if phrasing == "passive":
                    template = rng.choice(para.passive_sg if sg else para.passive_pl)
                else:
                    template = rng.choice(para.write_sg if sg else para.write_pl)
            user = template.format(P=join_names(people), O=o)
        else:
            user, chosen = multi
            triples = [[p, RELATIONS[r], o] for r, o, people in chosen for p in people]  # in sentence order
        row.update(
            kind="write",
            phrasing=phrasing,
            user=user,
            api=format_retllm_write(triples),
            reply="",
            answer="",
            query=[],
            triples=triples,
            memory=[t for t in memory if t not in triples],
        )
        return row
    query, x, o = read_query(rng, names, split, companies, slot, facts)
    if phrasing == "template":
        table = QUESTIONS[qtype] if qtype in QUESTIONS else getattr(FORMS[rel], qtype)
    elif qtype in PARAPHRASE_QUESTIONS:
        table = (PARAPHRASE_TYPOS if phrasing == "typo" else PARAPHRASE_QUESTIONS)[qtype]
    else:
        table = getattr(PARAPHRASE_FORMS[rel], ("typo_" if phrasing == "typo" else "") + qtype)
    template = rng.choice(table)
    results = lookup(memory, query)
    if bool(results) != match:
        raise AssertionError(f"generator bug: {qtype} query {query} on {memory} gave {results}")
    row.update(
        phrasing=phrasing,
        user=template.format(X=x, O=o),
        api=format_retllm_read_query(query),
        reply=format_retllm_read_reply(results),
        answer=answer_sentence(results),
        query=query,
        triples=results,
        memory=memory,
    )
    return row
