"""Open relations: simple statements over relations the five people–company ones lack, said in the user's words.

A general memory (RET-LLM §1, §3) should store "Ann lives in Lyon" as `(Ann, lives in, Lyon)`: the relation is the
predicate as the user said it (present or past tense, singular), so a relation never seen in training can still be
written by copying it, and answered back as "Ann lives in Lyon.". Re-DocRED sentences (`docred_mix`) teach other
relations too, but under Wikidata's names ("place of death"), which a model cannot guess for a relation it never saw.

`RELATIONS` lists each relation once: the predicate, its subject and object kinds, and a question about the subject.
`HELD_OUT` are never in a training row: `rows(..., held_out=True)` states and asks only those, so what they score is
generalisation to unseen relations. Each statement states one fact or (three in ten about a person) two facts about
one subject ("Ann lives in Lyon and speaks Welsh."), one `[MEM_WRITE{..}]` per fact in sentence order; three messages
in ten, statements or questions, are wrapped in a filler ("By the way, ...").
Each question is read back from a scene of a few facts, the asked one among them (a tenth ask what is not stored).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Sequence

from ..api import format_retllm_read_query, format_retllm_read_reply, format_retllm_write
from .answers import NO_ANSWER, lookup
from .wide_lexicon import FILLERS

__all__ = [
    "OpenRelation",
    "RELATIONS",
    "MORE_RELATIONS",
    "HELD_OUT",
    "ENTITIES",
    "relations",
    "question",
    "answer",
    "rows",
]


@dataclass(frozen=True)
class OpenRelation:
    """One relation: the predicate (also the stored relation), the kinds of its two terms, a question on {X}."""

    predicate: str
    subject: str
    object: str
    question: str


# fmt: off
RELATIONS = (
    # trained on
    OpenRelation("grew up in", "person", "city", "Which city did {X} grow up in?"),
    OpenRelation("moved to", "person", "city", "Which city did {X} move to?"),
    OpenRelation("died in", "person", "city", "Which city did {X} die in?"),
    OpenRelation("works in", "person", "city", "Which city does {X} work in?"),
    OpenRelation("emigrated to", "person", "country", "Which country did {X} emigrate to?"),
    OpenRelation("visited", "person", "country", "Which country did {X} visit?"),
    OpenRelation("represents", "person", "country", "Which country does {X} represent?"),
    OpenRelation("is friends with", "person", "person", "Who is {X} friends with?"),
    OpenRelation("is engaged to", "person", "person", "Who is {X} engaged to?"),
    OpenRelation("is the brother of", "person", "person", "Who is {X} the brother of?"),
    OpenRelation("is the neighbour of", "person", "person", "Who is {X} the neighbour of?"),
    OpenRelation("mentored", "person", "person", "Who did {X} mentor?"),
    OpenRelation("admires", "person", "person", "Who does {X} admire?"),
    OpenRelation("graduated from", "person", "school", "Which school did {X} graduate from?"),
    OpenRelation("teaches at", "person", "school", "Which school does {X} teach at?"),
    OpenRelation("supports", "person", "team", "Which team does {X} support?"),
    OpenRelation("coaches", "person", "team", "Which team does {X} coach?"),
    OpenRelation("speaks", "person", "language", "Which language does {X} speak?"),
    OpenRelation("is learning", "person", "language", "Which language is {X} learning?"),
    OpenRelation("is located in", "city", "country", "Which country is {X} located in?"),
    OpenRelation("is the capital of", "city", "country", "Which country is {X} the capital of?"),
    OpenRelation("is based in", "team", "city", "Which city is {X} based in?"),
    # held out: never in a training row
    OpenRelation("lives in", "person", "city", "Which city does {X} live in?"),
    OpenRelation("was born in", "person", "city", "Which city was {X} born in?"),
    OpenRelation("is a citizen of", "person", "country", "Which country is {X} a citizen of?"),
    OpenRelation("is married to", "person", "person", "Who is {X} married to?"),
    OpenRelation("is the sister of", "person", "person", "Who is {X} the sister of?"),
    OpenRelation("studied at", "person", "school", "Which school did {X} study at?"),
    OpenRelation("plays for", "person", "team", "Which team does {X} play for?"),
    OpenRelation("is the mayor of", "person", "city", "Which city is {X} the mayor of?"),
)
# more relations to train on, added by `rows(..., more=True)` (experiments/open_relations.py --more-relations): does
# seeing more predicates teach the held-out ones better? None is in notebook 01's build.
MORE_RELATIONS = (
    OpenRelation("retired to", "person", "city", "Which city did {X} retire to?"),
    OpenRelation("commutes to", "person", "city", "Which city does {X} commute to?"),
    OpenRelation("is visiting", "person", "city", "Which city is {X} visiting?"),
    OpenRelation("travelled to", "person", "country", "Which country did {X} travel to?"),
    OpenRelation("fled from", "person", "country", "Which country did {X} flee from?"),
    OpenRelation("is the ambassador to", "person", "country", "Which country is {X} the ambassador to?"),
    OpenRelation("is dating", "person", "person", "Who is {X} dating?"),
    OpenRelation("is the cousin of", "person", "person", "Who is {X} the cousin of?"),
    OpenRelation("is the father of", "person", "person", "Who is {X} the father of?"),
    OpenRelation("hired", "person", "person", "Who did {X} hire?"),
    OpenRelation("replaced", "person", "person", "Who did {X} replace?"),
    OpenRelation("trusts", "person", "person", "Who does {X} trust?"),
    OpenRelation("dropped out of", "person", "school", "Which school did {X} drop out of?"),
    OpenRelation("lectures at", "person", "school", "Which school does {X} lecture at?"),
    OpenRelation("applied to", "person", "school", "Which school did {X} apply to?"),
    OpenRelation("is the director of", "person", "school", "Which school is {X} the director of?"),
    OpenRelation("left", "person", "team", "Which team did {X} leave?"),
    OpenRelation("scouts for", "person", "team", "Which team does {X} scout for?"),
    OpenRelation("writes in", "person", "language", "Which language does {X} write in?"),
    OpenRelation("translates from", "person", "language", "Which language does {X} translate from?"),
    OpenRelation("is allergic to", "person", "food", "What is {X} allergic to?"),
    OpenRelation("cooks", "person", "food", "What does {X} cook?"),
    OpenRelation("is twinned with", "city", "city", "Which city is {X} twinned with?"),
    OpenRelation("borders", "country", "country", "Which country does {X} border?"),
    OpenRelation("trains in", "team", "city", "Which city does {X} train in?"),
    OpenRelation("was founded in", "team", "city", "Which city was {X} founded in?"),
)
HELD_OUT = ("lives in", "was born in", "is a citizen of", "is married to", "is the sister of", "studied at",
            "plays for", "is the mayor of")

ENTITIES = {
    "city": ("Lyon", "Porto", "Osaka", "Denver", "Leeds", "Bergen", "Cork", "Tampere", "Graz", "Lille", "Bologna",
             "Seville", "Kraków", "Brno", "Utrecht", "Ghent", "Aarhus", "Malmö", "Curitiba", "Medellín", "Pune",
             "Daegu", "Perth", "Halifax", "Tucson", "Omaha", "Nantes", "Bremen", "Lviv", "Izmir"),
    "country": ("France", "Portugal", "Japan", "Canada", "Norway", "Ireland", "Finland", "Austria", "Italy", "Spain",
                "Poland", "Brazil", "Colombia", "India", "Kenya", "Chile", "Vietnam", "Egypt", "Peru", "Greece"),
    "school": ("Oberlin College", "Trinity College Dublin", "the University of Leeds", "Kyoto University",
               "McGill University", "Uppsala University", "Rice University", "the Sorbonne", "ETH Zurich",
               "Bowdoin College", "the University of Ghana", "Tufts University", "Leiden University",
               "the University of Otago"),
    "team": ("Leeds United", "FC Porto", "the Denver Nuggets", "Celtic", "Ajax", "the Boston Bruins", "AS Roma",
             "Benfica", "the Chicago Cubs", "Olympique Lyonnais", "the Perth Scorchers", "Rosenborg"),
    "food": ("peanuts", "shellfish", "paella", "sushi", "pierogi", "ramen", "falafel", "goulash", "kimchi",
             "risotto", "sesame", "lentil soup"),
    "language": ("Welsh", "Basque", "Swahili", "Tagalog", "Icelandic", "Catalan", "Yoruba", "Gaelic", "Quechua",
                 "Maltese", "Estonian", "Hindi"),
}
# fmt: on


def relations(held_out: bool, more: bool = False) -> list[OpenRelation]:
    """The held-out relations, or those trained on (with `MORE_RELATIONS` after them if `more`)."""
    return [r for r in RELATIONS if (r.predicate in HELD_OUT) == held_out] + list(MORE_RELATIONS if more else ())


def question(triple: Sequence[str]) -> str:
    """The question that reads a fact's object back: its relation's question about its subject."""
    return next(r.question for r in RELATIONS + MORE_RELATIONS if r.predicate == triple[1]).format(X=triple[0])


def answer(results: Sequence[Sequence[str]]) -> str:
    """The answer from a reply: each fact as the user would say it ("Ann lives in Lyon.")."""
    return " ".join(f"{s} {r} {o}." for s, r, o in results) if results else NO_ANSWER


def _term(rng: random.Random, kind: str, people: Sequence[str], avoid: Sequence[str] = ()) -> str:
    pool = people if kind == "person" else ENTITIES[kind]
    return rng.choice([x for x in pool if x not in avoid] or list(pool))


def _fact(rng: random.Random, rel: OpenRelation, people: Sequence[str], subject: str | None = None) -> list[str]:
    s = subject or _term(rng, rel.subject, people)
    return [s, rel.predicate, _term(rng, rel.object, people, avoid=(s,))]


def _say(rng: random.Random, kind: str, text: str) -> str:
    """Three messages in ten wrapped in a filler (the wide build's), so the predicate is not always the second word."""
    if rng.random() >= 0.3:
        return text
    prefix, suffix = rng.choice(FILLERS[kind])
    if prefix.endswith((", ", "that ")) and kind == "read":
        text = text[:1].lower() + text[1:]
    return prefix + text + suffix


def _row(
    split: str, i: int, kind: str, shape: str, user: str, api: str, reply: str, ans: str, query, triples, memory
) -> dict[str, Any]:
    return {
        "id": f"{split}-open-{i:05d}",
        "kind": kind,
        "query_type": "write" if kind == "write" else "per_rel",
        "relation": triples[0][1] if triples else query[1],
        "phrasing": shape,
        "user": user,
        "api": api,
        "reply": reply,
        "answer": ans,
        "query": list(query),
        "triples": [list(t) for t in triples],
        "memory": [list(t) for t in memory],
        "scene": i,
    }


def rows(
    n: int,
    people: Sequence[str],
    *,
    held_out: bool,
    seed: int,
    split: str = "train",
    write_frac: float = 0.5,
    more: bool = False,
) -> list[dict[str, Any]]:
    """`n` rows (`synthetic.features`' columns) over the held-out or the trained-on relations, writes first; the same
    arguments give the same rows. Writes: shape "open_single" or "open_two" (two facts of one subject); reads:
    "open_question" over a scene of 2-5 facts, a tenth of them asking what the scene lacks. `more`: the trained-on
    relations with `MORE_RELATIONS` (not with `held_out`)."""
    rng = random.Random(f"retllm-open/{seed}/{split}/{held_out}")
    rels, out = relations(held_out, more and not held_out), []
    person_subject = [r for r in rels if r.subject == "person"]
    n_write = round(n * write_frac)
    for i in range(n):
        rel = rels[i % len(rels)]
        if i < n_write:
            fact = _fact(rng, rel, people)
            facts, text = [fact], f"{fact[0]} {rel.predicate} {fact[2]}."
            others = [r for r in person_subject if r.object != rel.object and r is not rel]
            if rel.subject == "person" and others and rng.random() < 0.3:
                second = _fact(rng, rng.choice(others), people, subject=fact[0])
                facts.append(second)
                text = f"{fact[0]} {rel.predicate} {fact[2]} and {second[1]} {second[2]}."
            scene = [_fact(rng, rng.choice(rels), people) for _ in range(rng.randint(0, 3))]
            shape = "open_two" if len(facts) == 2 else "open_single"
            out.append(
                _row(
                    split,
                    i,
                    "write",
                    shape,
                    _say(rng, "write", text),
                    format_retllm_write(facts),
                    "",
                    "",
                    [],
                    facts,
                    [t for t in scene if t not in facts],
                )
            )
            continue
        fact = _fact(rng, rel, people)
        scene = [fact] + [_fact(rng, rng.choice(rels), people) for _ in range(rng.randint(1, 4))]
        if rng.random() < 0.1:
            scene = [t for t in scene if not (t[0] == fact[0] and t[1] == fact[1])]
        rng.shuffle(scene)
        query = [fact[0], rel.predicate, ""]
        results = lookup(scene, query)
        out.append(
            _row(
                split,
                i,
                "read",
                "open_question",
                _say(rng, "read", rel.question.format(X=fact[0])),
                format_retllm_read_query(query),
                format_retllm_read_reply(results),
                answer(results),
                query,
                results,
                scene,
            )
        )
    return out
