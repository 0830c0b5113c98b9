"""The shapes of the wide phrasings (`RetLLMConfig.phrasings = "wide"`), trained on or held out, in one table.

`SHAPES` names every construction a wide example is said in, once, and fixes up front whether training ever sees it
(`held_out`): the paraphrase split of the wide build uses only held-out shapes, train / validation / test only the
others, so a model's score on the paraphrase split measures generalisation to constructions, per shape (each row's
`phrasing` is its shape's name). `statements` and `questions` give a shape's templates from `wide_lexicon`'s words;
`MARKERS` are the regular expressions that find a held-out construction in any text (tests check that no training
template or row matches one, and `docred_mix` keeps Re-DocRED sentences that do out of training).

Templates name the people {P} and organisation {O} of a statement (and {P2}, {O2} for a second fact), the asked-about
person {X} and organisation {O} of a question, and a year {Y}. Multi-fact shapes (`coordinated`, `gapping`,
`relative_two`, `respectively`) are put together by `wide` from these pieces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .generator import QUERY_TYPES
from .phrasings import FORMS, QUESTIONS
from .wide_lexicon import GENERIC, LEXICON

__all__ = [
    "Shape",
    "SHAPES",
    "QUERY_TYPES",
    "PER_TYPES",
    "training_shapes",
    "held_out_shapes",
    "statements",
    "questions",
    "CLAUSE_SHAPES",
    "clause_templates",
    "gap_remnant",
    "MARKERS",
    "held_out_marker",
]

PER_TYPES = ("per", "per_org", "org")  # the types whose questions do not depend on the relation
_W = ("write",)
_R = ("read",)
_WR = ("write", "read")
_ALL = QUERY_TYPES
_NO_REL = ("per", "per_org", "org", "per_rel", "org_rel")


@dataclass(frozen=True)
class Shape:
    """A construction: the kinds and query types it says, whether training ever sees it, an example."""

    kinds: tuple[str, ...]  # "write", "read"
    types: tuple[str, ...]  # "write" and / or query types
    held_out: bool
    what: str


# fmt: off
SHAPES = {
    # trained on (train, validation and test splits) ------------------------------------------------------------
    "template": Shape(_WR, _W + _ALL, False, "the paper build's own tables (phrasings.FORMS, QUESTIONS)"),
    "verb": Shape(_W, _W, False, "active, the person the subject: 'Ann works at Pfizer.'"),
    "noun": Shape(_W, _W, False, "a role noun: 'Ann is an employee of Pfizer.'"),
    "org_active": Shape(_W, _W, False, "active, the organisation the subject: 'Pfizer hired Ann.'"),
    "passive": Shape(_W, _W, False, "be-passive: 'Ann was hired by Pfizer.', 'Pfizer was founded by Ann.'"),
    "possessive": Shape(_WR, _W + _NO_REL, False, "'Ann's employer is Pfizer.', 'Who are Pfizer's founders?'"),
    "relative": Shape(_W, _W, False, "a relative clause: 'Pfizer is the company that employs Ann.'"),
    "time": Shape(_W, _W, False, "a time phrase, not stored: 'Ann has worked at Pfizer since 2019.'"),
    "coordinated": Shape(_W, _W, False, "2-3 clauses, other relations or organisations: 'Ann works at Pfizer, and "
                         "Bo founded BMW.'"),
    "gapping": Shape(_W, _W, False, "coordinated objects, the verb said once: 'Ann works at Pfizer, and Bo at BMW.'"),
    "relative_two": Shape(_W, _W, False, "two relations in one sentence: 'Pfizer, which Ann founded, employs Bo.'"),
    "who": Shape(_R, ("per", "org", "rel", "org_rel"), False, "'Who has ties to Pfizer?', 'Who works at Pfizer?'"),
    "which": Shape(_R, _ALL, False, "'Which people work at Pfizer?', 'Which company does Ann work for?'"),
    "what": Shape(_R, _ALL, False, "'What company does Ann work for?', 'What is Ann to Pfizer?'"),
    "where": Shape(_R, ("per", "per_rel"), False, "'Where does Ann work?'"),
    "imperative": Shape(_R, _ALL, False, "'Name everyone who works at Pfizer.', 'List all employees.'"),
    "filler": Shape(_WR, _W + _ALL, False, "a training sentence in a filler: 'By the way, ...', '... Thanks!'"),
    "lowercase": Shape(_WR, _W + _ALL, False, "a training sentence typed in lower case; the call canonical"),
    "typo_company": Shape(_WR, _W + ("per_org", "org", "org_rel"), False,
                          "the company misspelt; the call names it as the company list does"),
    "typo_name": Shape(_R, ("per", "per_org", "per_rel"), False,
                       "the person misspelt; the query copies it as typed, the memory's fuzzy read finds the person"),
    "redocred": Shape(_W, _W, False, "a Re-DocRED test-split sentence, its gold triples (docred_mix)"),
    # held out (only in the paraphrase split) -------------------------------------------------------------------
    "new_verb": Shape(_WR, _W + _ALL, True, "held-out words: 'Ann draws a salary from Pfizer.', "
                      "'Who is affiliated with Pfizer?'"),
    "get_passive": Shape(_W, _W, True, "get-passive: 'Ann got hired by Pfizer.'"),
    "cleft": Shape(_W, _W, True, "a cleft: 'It is Pfizer that Ann works at.', 'It is Ann who founded Pfizer.'"),
    "inversion": Shape(_W, _W, True, "fronted 'Among': 'Among Pfizer's employees is Ann.'"),
    "respectively": Shape(_W, _W, True, "pairs: 'Ann and Bo work at Pfizer and BMW, respectively.'"),
    "embedded": Shape(_R, _ALL, True, "an embedded question: 'Do you know who works at Pfizer?'"),
    "pied_piping": Shape(_R, _NO_REL, True, "a preposition before the wh-word: 'For which company does Ann work?'"),
    "yes_no": Shape(_R, _ALL, True, "a yes/no question, answered with the facts: 'Does anyone work at Pfizer?'"),
}
# fmt: on

# A held-out construction, found in any text (case ignored; a filler prefix stripped first for questions).
MARKERS = {
    "new_verb": re.compile(
        r"\b("
        + "|".join(
            sorted(
                {re.escape(w) for lex in LEXICON.values() for v in lex.held_verbs for w in v[:2]}
                | {re.escape(v[2].split("{X} ")[1]) for lex in LEXICON.values() for v in lex.held_verbs}
                | {re.escape(w) for lex in LEXICON.values() for n in lex.held_nouns for w in n}
                | {re.escape(w) for lex in LEXICON.values() for w in lex.held_roles}
            )
        )
        + r"|affiliat\w*)\b",
        re.I,
    ),
    "get_passive": re.compile(r"\b(get|gets|got)\b", re.I),
    "cleft": re.compile(r"^it (is|was) .* (that|who) ", re.I),
    "inversion": re.compile(r"^among\b", re.I),
    "respectively": re.compile(r"\brespectively\b", re.I),
    "embedded": re.compile(r"^(do you know|can you tell me|i wonder)\b", re.I),
    "pied_piping": re.compile(r"^(for|at|in|of|by|with|to|from) (which|whom|what)\b", re.I),
    "yes_no": re.compile(r"^(is|are|does|do|did|has|have) ", re.I),
}


def held_out_marker(text: str) -> str | None:
    """The first held-out shape whose marker `text` matches, or None."""
    return next((name for name, m in MARKERS.items() if m.search(text)), None)


def training_shapes(kind: str, qtype: str = "write") -> tuple[str, ...]:
    """The trained-on shapes that say `kind` (and, for reads, `qtype`), in table order; 'redocred' excluded."""
    return tuple(
        n for n, s in SHAPES.items() if not s.held_out and kind in s.kinds and qtype in s.types and n != "redocred"
    )


def held_out_shapes(kind: str, qtype: str = "write") -> tuple[str, ...]:
    return tuple(n for n, s in SHAPES.items() if s.held_out and kind in s.kinds and qtype in s.types)


def _agree(plural: bool, sg: str, pl: str) -> str:
    return pl if plural else sg


def statements(shape: str, rel: str, plural: bool) -> tuple[str, ...]:
    """The templates ({P}, {O}, {Y}) that state one (relation, organisation) group in `shape`; () where none."""
    lex, i, be = LEXICON[rel], int(plural), _agree(plural, "is", "are")
    if shape == "template":
        return FORMS[rel].write_pl if plural else FORMS[rel].write_sg
    if shape in ("verb", "new_verb"):
        verbs, nouns = (lex.verbs, ()) if shape == "verb" else (lex.held_verbs, lex.held_nouns)
        return tuple(f"{{P}} {v[i]} {{O}}." for v in verbs) + tuple(f"{{P}} {be} {n[i]} {{O}}." for n in nouns)
    if shape == "noun":
        return tuple(f"{{P}} {be} {n[i]} {{O}}." for n in lex.nouns)
    if shape in ("org_active", "passive", "possessive", "time", "get_passive"):
        return tuple(t[i] for t in getattr(lex, shape))
    if shape == "relative":
        who = _agree(plural, "the person who", "the people who")
        return tuple(f"{{O}} is the company that {t[i].removeprefix('{O} ')}" for t in lex.org_active) + tuple(
            f"{{P}} {be} {who} {v[i]} {{O}}." for v in lex.verbs
        )
    if shape == "cleft":
        return tuple(f"It is {{O}} that {{P}} {v[i]}." for v in lex.verbs) + tuple(
            f"It is {{P}} who {v[i]} {{O}}." for v in lex.verbs
        )
    if shape == "inversion":
        return tuple(f"Among {{O}}'s {r} {be} {{P}}." for r in lex.roles) + tuple(
            f"Among the {r} of {{O}} {be} {{P}}." for r in lex.roles
        )
    return ()


# the single-group shapes a clause of a `coordinated` statement is said in (each starts with a name)
CLAUSE_SHAPES = ("template", "verb", "noun", "org_active", "passive")


def clause_templates(rel: str, plural: bool) -> tuple[str, ...]:
    return tuple(t for s in CLAUSE_SHAPES for t in statements(s, rel, plural))


_PREPOSITIONS = {"at", "for", "in", "of", "from", "into", "to", "with"}


def gap_remnant(verb: str) -> str:
    """What a gapped second clause keeps of `verb`: its last word if a preposition ("works at" -> "at "), else ''."""
    last = verb.rsplit(" ", 1)[-1]
    return f"{last} " if last in _PREPOSITIONS else ""


def _rel_questions(shape: str, qtype: str, rel: str) -> tuple[str, ...]:
    """Questions of the relation-dependent types (per_rel {X}, rel, org_rel {O})."""
    lex = LEXICON[rel]
    verbs, nouns, roles = lex.verbs, lex.nouns, lex.roles
    if shape == "new_verb":
        verbs, nouns, roles = lex.held_verbs, lex.held_nouns, lex.held_roles
        shape = {"per_rel": "which", "rel": "who", "org_rel": "who"}[qtype]
    out: dict[str, tuple[str, ...]] = {}
    if shape == "who":
        out = {
            "rel": tuple(f"Who {v[0]} which company?" for v in verbs) + tuple(f"Who are the {r}?" for r in roles),
            "org_rel": tuple(f"Who {v[0]} {{O}}?" for v in verbs) + tuple(f"Who is {n[0]} {{O}}?" for n in nouns),
        }
    elif shape == "which":
        out = {
            "per_rel": tuple(f"Which company {v[2]}?" for v in verbs),
            "rel": tuple(f"Which people {v[1]} a company?" for v in verbs),
            "org_rel": tuple(f"Which people {v[1]} {{O}}?" for v in verbs)
            + tuple(f"Which people are {n[1]} {{O}}?" for n in nouns),
        }
    elif shape == "what":
        out = {
            "per_rel": tuple(f"What {w} {v[2]}?" for v in verbs for w in ("company", "firm")),
            "rel": tuple(f"What people {v[1]} some company?" for v in verbs),
            "org_rel": tuple(f"What people {v[1]} {{O}}?" for v in verbs),
        }
    elif shape == "where":
        out = {"per_rel": lex.where}
    elif shape == "imperative":
        out = {
            "per_rel": tuple(f"Name the company {{X}} {v[0]}." for v in verbs),
            "rel": tuple(f"Name everyone who {v[0]} a company." for v in verbs)
            + tuple(f"{a} {r}." for r in roles for a in ("List all", "Give me all the")),
            "org_rel": tuple(f"Name everyone who {v[0]} {{O}}." for v in verbs)
            + tuple(f"List the {r} of {{O}}." for r in roles),
        }
    elif shape == "possessive":
        out = {"per_rel": lex.poss_per_rel, "org_rel": lex.poss_org_rel}
    elif shape == "embedded":
        out = {
            "per_rel": tuple(f"{a} which company {{X}} {v[0]}{e}" for v in verbs for a, e in _EMBED),
            "rel": tuple(f"I wonder who {v[0]} a company." for v in verbs)
            + tuple(f"Can you tell me who the {r} are?" for r in roles),
            "org_rel": tuple(f"{a} who {v[0]} {{O}}{e}" for v in verbs for a, e in _EMBED)
            + tuple(f"Can you tell me who {{O}}'s {r} are?" for r in roles),
        }
    elif shape == "pied_piping":
        out = {"per_rel": lex.pied_per_rel, "org_rel": lex.pied_org_rel}
    elif shape == "yes_no":
        yes = [v[2][:1].upper() + v[2][1:] for v in verbs]  # "Does {X} work at"
        out = {
            "per_rel": tuple(f"{q} a company?" for q in yes),
            "rel": tuple(f"{q.replace('{X}', 'anyone')} a company?" for q in yes)
            + tuple(f"Are there any {r}?" for r in roles),
            "org_rel": tuple(f"{q.replace('{X}', 'anyone')} {{O}}?" for q in yes),
        }
    return out.get(qtype, ())


_EMBED = (("Do you know", "?"), ("I wonder", "."))


def questions(shape: str, qtype: str, rel: str) -> tuple[str, ...]:
    """The question templates of `shape` for `qtype` ({X}, {O}; `rel` for the relation-dependent types)."""
    if shape == "template":
        return QUESTIONS[qtype] if qtype in QUESTIONS else getattr(FORMS[rel], qtype)
    if qtype in PER_TYPES:
        return GENERIC.get(shape, {}).get(qtype, ())
    return _rel_questions(shape, qtype, rel)
