"""A labelled stress set for RET-LLM's fuzzy read: near misses of stored phrases that must, or must not, stand in.

People are misspelt stored names (gold: the name) or other people sharing a first or last name (none may stand in);
companies are stored ones in other forms ("Pfizer Inc.") or misspelt, and companies not stored; relations are
paraphrases of the five relations and relations none may stand in for. Drawn from the synthetic data set's name
pools (`retllm.synthetic`), so calibration (validation people) and test (test people) never share a person.
`fuzzy.matching` scores and calibrates on it.
"""

from __future__ import annotations

import random
from typing import Mapping, NamedTuple, Sequence

from ..paths import DATA
from ..retllm.config import RetLLMConfig
from ..retllm.phrasings import RELATIONS
from ..retllm.synthetic import _name_pools, load_names

__all__ = [
    "KINDS",
    "ROLE",
    "RELATION_PARAPHRASES",
    "OTHER_RELATIONS",
    "ORG_FORMS",
    "Pair",
    "name_pool",
    "split_companies",
    "split_paraphrases",
    "misspell",
    "stress_pairs",
]

KINDS = ("person", "organisation", "relation")
# RET-LLM: people >> rel >> companies
ROLE = {"person": "subject", "organisation": "object", "relation": "relation"}

# Other words for the five relations (RET-LLM's own statements in `phrasings.FORMS`, plus near forms).
# fmt: off
RELATION_PARAPHRASES = {
    RELATIONS["employment"]: ("employee of", "works for", "works at", "employed at", "is employed by",
                              "staff member of"),
    RELATIONS["manager"]: ("manages", "manager at", "is a manager of", "managing", "managers of", "manager in"),
    RELATIONS["investor"]: ("invests in", "invested in", "investor of", "shareholder in", "holds shares in",
                            "investors in"),
    RELATIONS["founder"]: ("founded", "co-founder of", "co-founded", "started", "is a founder of", "founders of"),
    RELATIONS["customer"]: ("client of", "customer at", "buys from", "shops at", "is a customer of", "customers of"),
}
# Relations none of the five may stand in for: inverses (the direction flips the fact) and unrelated ones.
OTHER_RELATIONS = ("employs", "managed by", "founded by", "supplier of", "competitor of", "sued by", "owned by",
                   "partner of", "lives in", "married to", "sibling of", "auditor of")
# fmt: on
# How a user may name a stored company ("{}" is its name).
ORG_FORMS = ("{} Inc.", "{} Corporation", "{} Group", "the {} company", "{lower}")


class Pair(NamedTuple):
    """One stress query: `gold` is the stored phrase that should stand in for `query`, None when none may."""

    kind: str  # person | organisation | relation
    # misspelling, other person, paraphrase, other organisation, relation paraphrase, other relation
    case: str
    query: str
    gold: str | None
    # the phrases of the query's index (people and companies share one, as in the memory)
    stored: tuple[str, ...]


def name_pool(split: str, seed: int = 0, profile: str = "cpu") -> list[str]:
    """The people of one split of the synthetic data set (`synthetic._name_pools`, `make_dataset`'s default scene
    size): disjoint across splits, so thresholds calibrated on "validation" are measured on new people."""
    p = RetLLMConfig.for_profile(profile)
    sizes = {"train": p.n_train, "validation": p.n_val, "test": p.n_test, "paraphrase": p.n_paraphrase}
    first, last = load_names(DATA / "first_names.txt"), load_names(DATA / "last_names.txt")
    return _name_pools(seed, first, last, sizes, (3, 8))[split]


def split_companies(seed: int = 0) -> tuple[list[str], list[str]]:
    """data/companies.txt in two seeded halves (calibration, test): the data set shares companies across splits."""
    companies = sorted(load_names(DATA / "companies.txt"))
    random.Random(f"matching/companies/{seed}").shuffle(companies)
    half = len(companies) // 2
    return companies[:half], companies[half:]


def split_paraphrases(seed: int = 0) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """`RELATION_PARAPHRASES` in two seeded halves per relation (calibration, test), so the test phrasings are new."""
    rng = random.Random(f"matching/relations/{seed}")
    halves: tuple[dict[str, list[str]], dict[str, list[str]]] = ({}, {})
    for rel, phrases in RELATION_PARAPHRASES.items():
        phrases = rng.sample(list(phrases), len(phrases))
        halves[0][rel], halves[1][rel] = phrases[: len(phrases) // 2], phrases[len(phrases) // 2 :]
    return halves


def misspell(name: str, rng: random.Random, edits: int = 1) -> str:
    """`name` with `edits` letter edits (deletion, substitution, transposition, doubled letter): a typing slip.

    A transposition needs two different letters side by side; where there are none, the letter is doubled.
    """
    chars = list(name)
    for _ in range(edits):
        letters = [i for i, c in enumerate(chars) if c.isalpha()]
        i = rng.choice(letters)
        op = rng.choice(("delete", "substitute", "transpose", "double"))
        if op == "delete":
            del chars[i]
        elif op == "substitute":
            new = rng.choice([c for c in "abcdefghijklmnopqrstuvwxyz" if c != chars[i].lower()])
            chars[i] = new.upper() if chars[i].isupper() else new
        elif op == "transpose" and i + 1 < len(chars) and chars[i + 1].isalpha() and chars[i + 1] != chars[i]:
            chars[i], chars[i + 1] = chars[i + 1], chars[i]
        else:
            chars.insert(i + 1, chars[i].lower())
    return "".join(chars)


def stress_pairs(
    names_people: Sequence[str],
    companies: Sequence[str],
    seed: int = 0,
    *,
    n_stored: int = 200,
    n_queries: int = 150,
    paraphrases: Mapping[str, Sequence[str]] = RELATION_PARAPHRASES,
) -> list[Pair]:
    """A labelled stand-in stress set, the same for the same arguments: near misses that must or must not resolve.

    People: `n_stored` of `names_people` are stored; queries are `n_queries` misspellings of stored names (1-2
    edits, gold: the name) and `n_queries` other people of the pool sharing a first or last name with a stored one
    (gold None). Companies: half are stored; queries are `ORG_FORMS` of the stored and a one-edit misspelling of each
    stored name of 5 letters or more (gold: the company), and each other company, plain and in one form (None).
    People and companies are stored in one index, as in the memory. Relations: every paraphrase with all of
    `paraphrases`' relations stored (gold: its relation) and with its own relation missing (None: a cross-relation
    confusion), and `OTHER_RELATIONS` (None).
    """
    rng = random.Random(f"matching/stress/{seed}")
    pool = list(dict.fromkeys(names_people))
    people = rng.sample(pool, min(n_stored, len(pool) // 2))
    stored_people = set(people)
    orgs = sorted(companies)
    rng.shuffle(orgs)
    stored_orgs, other_orgs = orgs[: len(orgs) // 2], orgs[len(orgs) // 2 :]
    entities = tuple(people + stored_orgs)
    taken = set(pool) | set(entities)
    pairs = []
    for name in rng.sample(people, min(n_queries, len(people))):
        for _ in range(20):  # a slip that happens to spell another name of the pool is no misspelling
            typo = misspell(name, rng, rng.choice((1, 1, 2)))
            if typo not in taken and typo.casefold() != name.casefold():
                pairs.append(Pair("person", "misspelling", typo, name, entities))
                break
    firsts, lasts = {n.split()[0] for n in people}, {n.split()[-1] for n in people}
    others = [n for n in pool if n not in stored_people and (n.split()[0] in firsts or n.split()[-1] in lasts)]
    for name in rng.sample(others, min(n_queries, len(others))):
        pairs.append(Pair("person", "other person", name, None, entities))
    for org in stored_orgs:
        for form in ORG_FORMS:
            pairs.append(Pair("organisation", "paraphrase", form.format(org, lower=org.lower()), org, entities))
        if sum(c.isalpha() for c in org) >= 5:  # one slip in "BP" or "IBM" leaves another name, not a typo
            pairs.append(Pair("organisation", "misspelling", misspell(org, rng), org, entities))
    for org in other_orgs:
        pairs.append(Pair("organisation", "other organisation", org, None, entities))
        form = rng.choice(ORG_FORMS)
        pairs.append(Pair("organisation", "other organisation", form.format(org, lower=org.lower()), None, entities))
    relations = tuple(paraphrases)
    for rel, phrases in paraphrases.items():
        without = tuple(r for r in relations if r != rel)
        for phrase in phrases:
            pairs.append(Pair("relation", "relation paraphrase", phrase, rel, relations))
            pairs.append(Pair("relation", "other relation", phrase, None, without))
    for phrase in OTHER_RELATIONS:
        pairs.append(Pair("relation", "other relation", phrase, None, relations))
    return pairs
