"""RET-LLM's synthetic people–company data set (§3.3, Tables 1–2), seeded and byte-reproducible (notebook 01).

Every person has exactly one relation with one organisation. Each example sees a small *scene*: a few
people (3–8 by default) and their facts, which are the whole memory for that example, so a `(rel)` or
`(org)` query has a few results rather than hundreds. People are drawn afresh for every scene and the
splits draw from disjoint name pools, so test people never occur in training (companies are shared).

Splits: train, validation and test say everything with the `phrasings` training tables (FORMS, QUESTIONS);
paraphrase (issue 14) is a held-out test split in words the generator never trains on: new verbs, the passive
voice, several facts in one statement (different relations or organisations; the gold write is every triple in
sentence order), and questions of every type in new words, some with a typo outside the names. Its gold `api`,
`reply`, `answer`, `query`, `triples` and `memory` are made as the test split's are, so it is scored the same way.

A row (one `datasets.Dataset` row per example)::

    user      the user's message (a statement for writes, a question for reads)
    api       what the model generates: write calls, or a read query ending in ':'
    reply     what the memory appends to a read (`{..};{..}]`, or `]`); '' for writes
    answer    the answer sentence for reads ("I don't know." when nothing matched); '' for writes
    id, kind ("read"/"write"), query_type (QUERY_TYPES or "write"),
    relation  a RELATIONS key: the relation asked about, written (a multi-fact statement's first clause's), or
              (for per/org reads) of the target fact
    phrasing  how the user's message is said (PHRASINGS): "template" in train/validation/test; in paraphrase,
              writes "new_verb", "passive" or "multi_fact", reads "new_question" or "typo"
    query     [subject, relation, object] with '' for unknown terms; [] for writes
    triples   reads: the memory's results; writes: the gold triples written
    memory    the memory before the example, in insertion order (the scene; for a write, without the
              triples it writes); a read's `triples` are its exact matches in that order
    scene     the scene's number within its split (one scene per example)
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any, Iterator, Sequence

from ..api import format_retllm_read_query, format_retllm_read_reply, format_retllm_write
from ..paths import DATA, atomic_dir, check_profile, run_dir
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
from .profiles import PROFILES

__all__ = [
    "RELATIONS",
    "QUERY_TYPES",
    "SPLITS",
    "PHRASINGS",
    "NO_ANSWER",
    "features",
    "load_names",
    "join_names",
    "lookup",
    "answer_sentence",
    "fact_sentence",
    "stated_facts",
    "make_dataset",
    "save_dataset",
    "dataset_dir",
    "dataset_meta",
    "load_synthetic",
]

QUERY_TYPES = ("per", "per_org", "per_rel", "org", "rel", "org_rel")  # RET-LLM Table 1, in its order
SPLITS = ("train", "validation", "test", "paraphrase")
# The `phrasing` column's values: the training tables' words, then the paraphrase split's shapes (writes, reads).
PHRASINGS = ("template", "new_verb", "passive", "multi_fact", "new_question", "typo")
_WRITE_SHAPES = ("new_verb", "passive", "multi_fact")
_READ_SHAPES = ("new_question", "new_question", "typo")  # a third of the paraphrase reads have a typo
NO_ANSWER = "I don't know."

_SPECIAL = set("\\{}[]>;")  # API delimiters: a name containing one would need escaping, so refuse it


# Column order of every split; the training notebook and the controller read these names.
_COLUMNS = (
    "id",
    "kind",
    "query_type",
    "relation",
    "phrasing",
    "user",
    "api",
    "reply",
    "answer",
    "query",
    "triples",
    "memory",
    "scene",
)


def features():
    """The column types (explicit, so empty lists and empty splits keep their types)."""
    from datasets import Features, List, Value

    triples = List(List(Value("string")))
    types = {"query": List(Value("string")), "triples": triples, "memory": triples, "scene": Value("int64")}
    return Features({c: types.get(c, Value("string")) for c in _COLUMNS})


# ------------------------------------------------------------------------------------------ names, text
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


# ------------------------------------------------------------------------------------------ generation
def _name_pools(
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


def _draw(names: Iterator[str], split: str) -> str:
    try:
        return next(names)
    except StopIteration:
        raise ValueError(f"the {split} split ran out of people: add names to the lists or lower its size") from None


def _slots(rng: random.Random, n: int, write_frac: float, no_match_frac: float) -> list[tuple[str, str, bool]]:
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


def _shapes(rng: random.Random, slots: Sequence[tuple[str, str, bool]]) -> list[str]:
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


def _scene(
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
        groups.append((r, o, [_draw(names, split) for _ in range(size)]))
        left -= size
    return groups


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


def _example(
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
    groups = _scene(rng, names, split, companies, rel, need, scene_size)
    facts = [[p, RELATIONS[r], o] for r, o, people in groups for p in people]
    # Memory order: statement by statement, facts of one (relation, organisation) kept together, so a reply
    # lists them in the runs the answer sentence names them in.
    first_seen = {}
    for r, o, _ in groups:
        first_seen.setdefault((r, o), len(first_seen))
    memory = sorted(facts, key=lambda t: first_seen[(PHRASE_KEY[t[1]], t[2])])
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
    target = rng.choice([f for f in facts if f[1] == RELATIONS[rel]] or facts)
    x, o = target[0], target[2]
    if not match:
        scene_orgs = sorted({f[2] for f in facts})
        if qtype == "per":
            x = _draw(names, split)  # someone the memory has never heard of
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


def make_dataset(
    seed: int = 0,
    n_train: int = 1500,
    n_val: int = 150,
    n_test: int = 336,
    n_paraphrase: int = 120,
    *,
    write_frac: float = 0.25,
    no_match_frac: float = 0.1,
    scene_size: Sequence[int] = (3, 8),
    first_names: Sequence[str] | None = None,
    last_names: Sequence[str] | None = None,
    companies: Sequence[str] | None = None,
):
    """The data set as a `datasets.DatasetDict` (SPLITS); the same arguments give the same rows.

    `write_frac` of each split are write examples; reads are split evenly over the six query types, and
    `no_match_frac` of each type's reads find nothing (reply ']', answer NO_ANSWER). The paraphrase split
    (`n_paraphrase` rows) is built like test, in the words of the PARAPHRASE_* tables (module docstring). Name lists
    default to data/first_names.txt, data/last_names.txt, data/companies.txt.
    """
    from datasets import Dataset, DatasetDict

    if not 0 <= write_frac <= 1 or not 0 <= no_match_frac <= 1:
        raise ValueError(f"write_frac and no_match_frac must lie in [0, 1], got {write_frac}, {no_match_frac}")
    scene_size = tuple(scene_size)
    if len(scene_size) != 2 or not 1 <= scene_size[0] <= scene_size[1]:
        raise ValueError(f"scene_size must be (min, max) with 1 <= min <= max, got {scene_size}")
    sizes = {"train": n_train, "validation": n_val, "test": n_test, "paraphrase": n_paraphrase}
    if any(n < 0 for n in sizes.values()):
        raise ValueError(f"split sizes must be >= 0, got {sizes}")
    first = list(first_names) if first_names is not None else load_names(DATA / "first_names.txt")
    last = list(last_names) if last_names is not None else load_names(DATA / "last_names.txt")
    companies = sorted(companies if companies is not None else load_names(DATA / "companies.txt"))
    if len(companies) < 4:
        raise ValueError(f"need at least 4 companies (a scene uses up to 3, plus one it lacks), got {len(companies)}")
    pools = _name_pools(seed, first, last, sizes, scene_size)
    out = {}
    for split in SPLITS:
        rng = random.Random(f"retllm-synthetic/{seed}/{split}")  # str seeds hash the same on every run
        names = iter(pools[split])
        slots = _slots(rng, sizes[split], write_frac, no_match_frac)
        shapes = _shapes(rng, slots) if split == "paraphrase" else ["template"] * len(slots)
        rows = [
            _example(rng, names, split, companies, i, slot, scene_size, shape)
            for i, (slot, shape) in enumerate(zip(slots, shapes))
        ]
        # from_dict, not from_list, so an empty split (size 0) still has every column (from_list([]) has none)
        out[split] = Dataset.from_dict({c: [r[c] for r in rows] for c in _COLUMNS}, features=features())
    return DatasetDict(out)


# ------------------------------------------------------------------------------------------ saving, loading
def save_dataset(dd, out_dir: str | Path, meta: dict[str, Any] | None = None) -> Path:
    """`save_to_disk` plus one `{split}.jsonl` per split (byte-identical for the same rows), and `build.json`.

    Written to a temporary folder first and swapped in at the end: a failure leaves the old data set whole.
    """
    import datasets

    out_dir = Path(out_dir)
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # a bar per split would be left in every notebook output
    try:
        with atomic_dir(out_dir, replace=True) as tmp:
            dd.save_to_disk(str(tmp))
            for split, ds in dd.items():
                with open(tmp / f"{split}.jsonl", "w", encoding="utf-8", newline="\n") as f:
                    for row in ds:
                        f.write(json.dumps(row, ensure_ascii=False) + "\n")
            if meta is not None:
                (tmp / "build.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    finally:
        if bars:
            datasets.enable_progress_bars()
    return out_dir


def dataset_dir(profile: str = "cpu") -> Path:
    """Where a profile's data set lives: data/retllm_synthetic/ for cpu (committed), else under runs/."""
    return DATA / "retllm_synthetic" if check_profile(profile) == "cpu" else run_dir("retllm", profile, "data")


def dataset_meta(
    seed: int = 0,
    n_train: int = 1500,
    n_val: int = 150,
    n_test: int = 336,
    n_paraphrase: int = 120,
    *,
    write_frac: float = 0.25,
    no_match_frac: float = 0.1,
    scene_size: Sequence[int] = (3, 8),
) -> dict[str, Any]:
    """The build settings as JSON-ready `make_dataset` keyword arguments (saved as build.json beside the data)."""
    return {
        "seed": seed,
        "n_train": n_train,
        "n_val": n_val,
        "n_test": n_test,
        "n_paraphrase": n_paraphrase,
        "write_frac": write_frac,
        "no_match_frac": no_match_frac,
        "scene_size": [int(x) for x in scene_size],
    }


def load_synthetic(profile: str = "cpu", seed: int = 0):
    """The profile's saved DatasetDict (default settings); built and saved first if missing or built otherwise."""
    from datasets import load_from_disk

    path = dataset_dir(profile)
    sizes = PROFILES[check_profile(profile)]
    meta = dataset_meta(seed, **{k: sizes[k] for k in ("n_train", "n_val", "n_test", "n_paraphrase")})
    build = path / "build.json"
    if build.is_file() and json.loads(build.read_text(encoding="utf-8")) == meta:
        return load_from_disk(str(path))
    dd = make_dataset(**meta)
    save_dataset(dd, path, meta)
    return dd
