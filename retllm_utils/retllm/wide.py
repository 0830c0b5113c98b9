"""The wide build of the synthetic set: many more ways of saying the five relations, and other relations too.

Behind a config switch: `RetLLMConfig.phrasings = "wide"` (`synthetic.make_dataset` calls `make_rows`), which
notebooks 01–03 build and train on by default; "paper", the config's own default, builds the committed
data/retllm_synthetic byte for byte. The wide data is saved under runs/retllm/<profile>/data_wide, never in data/.

What it adds (RET-LLM is a general write-read memory, §1, §3; the paper trains on one template per query type):

- Shapes (`wide_phrasings.SHAPES`, one table fixing up front which are held out): active and passive voice,
  verbs and role nouns, the organisation as subject, possessives, relative clauses, time phrases, fillers, several
  facts in one sentence (coordinated clauses, gapping, two relations joined by a relative clause), lower-case and
  misspelt names, and questions in many wh-forms. Every row's `phrasing` is its shape's name, so metrics can be
  reported per shape; train / validation / test use the trained-on shapes, the paraphrase split only held-out ones.
- Multi-fact statements write every fact: one `[MEM_WRITE{s>>r>>o}]` per triple, in sentence order. RET-LLM's API
  (§3.2: "multiple write calls could be sequentially generated") and `api.format_retllm_write` / `parse_retllm`
  allow one triple per call, so a call with several triples would not parse; the paper build does the same.
- Names: the memory must store the person the user meant, so a call names what the text determines. Lower case
  (`lowercase`): the call has the canonical name; a person's name is lower-cased only when capitalising each word
  restores it ("ann lee" -> "Ann Lee"; "McCarthy", "O'Brien", "Van der Berg" stay as they are, since nothing in
  "mccarthy" says where its capitals go), a company always (the companies are one closed list every split shares,
  so "bmw" -> "BMW" is learnt). A misspelt company (`typo_company`) is written and queried by its list name, for
  the same reason. A misspelt person (`typo_name`) occurs only in questions, and the query copies it as typed: a
  new person's right spelling cannot be known from the text, and RET-LLM's read falls back to a fuzzy match when the
  exact term is not stored (§3.1), which finds the person; the row's reply and answer are that person's facts.
  Statements never misspell a person: nothing could recover the name, and storing the slip would store someone else.
- Re-DocRED sentences over other relations (`docred_mix`; the test split only), `docred_frac` of train / validation
  / test rows (capped by the pools: 265 / 33 / 75 sentences over 63 relations, documents split between them), and a
  new_relations split: all 57 sentences over `docred_mix.HELD_OUT_RELATIONS` (8 of the 11 occur), never trained on.
- Relations in the user's own words (`open_relations`): `open_rows` training rows over 22 relations stored as said
  ("Ann grew up in Lyon" -> (Ann, grew up in, Lyon)), appended to the train split, and an open_relations split
  (`n_open_test` rows) over 8 more relations held out of every training row.

Training questions draw their template at random within their shape; `train_questions="balanced"` gives each of a
relation's verbs its share instead (`VerbBalance`; measured in experiments/README.md, not adopted: it cost answers).
`multi_weight` gives the train split's multi-fact statement shapes that many turns each in its cycle of shapes
(measured in experiments/README.md, not adopted: two turns wrote them whole no more often and cost other statements).

Splits: SPLITS. `write_frac` (the train split: `train_write_frac`) and `no_match_frac` apply to the synthetic rows;
the Re-DocRED rows are writes on top (cpu: 150 of the first 1,500 train rows; with 40% of the other 1,350, 690 are
statements, 870 with the open rows; test 110 of 336), and the open rows come after them (cpu: 360, half statements).
Sizes on cpu (SmolLM2 tokenizer, chat template included): train 1,860 rows, 175,594 tokens per epoch, 94.4 per row
(the paper build: 146,545, 97.7), longest 277; paraphrase 120 rows (30 writes, 6 per held-out write shape; 90 reads,
17-25 per held-out read shape), new_relations 57 rows, 5,054 tokens; open_relations 96 rows (48 statements, 48
questions), 7,397 tokens.
"""

from __future__ import annotations

import random
import re
from typing import Any, Iterator, Sequence

from ..api import format_retllm_read_query, format_retllm_read_reply, format_retllm_write
from ..paths import DATA
from . import open_relations
from .answers import answer_sentence, join_names, lookup
from .docred_mix import Statement, docred_row, load_statements, split_statements
from .generator import draw, load_names, name_pools, read_query, scene, scene_facts, slots
from .phrasings import JOIN_THREE, JOIN_TWO, RELATIONS
from .wide_lexicon import FILLERS, LEXICON, YEARS
from .wide_phrasings import clause_templates, gap_remnant, held_out_shapes, questions, statements, training_shapes

__all__ = [
    "SPLITS",
    "NOISE_SHAPES",
    "MULTI_SHAPES",
    "shape_plan",
    "recasable",
    "misspell",
    "verb_of",
    "VerbBalance",
    "make_rows",
    "open_people",
]

SPLITS = ("train", "validation", "test", "paraphrase", "new_relations", "open_relations")
NOISE_SHAPES = ("filler", "lowercase", "typo_company", "typo_name")  # said over a base shape's sentence
MULTI_SHAPES = ("coordinated", "gapping", "relative_two", "respectively")
_WRITE_BASES = ("template", "verb", "noun", "org_active", "passive", "possessive")
_READ_BASES = ("template", "who", "which", "what", "imperative")
# a multi-fact shape the scene size cannot hold is said in this single-group shape instead (the row says which)
_FALLBACK = {False: "verb", True: "new_verb"}


def shape_plan(
    rng: random.Random, slots: Sequence[tuple[str, str, bool]], held_out: bool, multi_weight: int = 1
) -> list[str]:
    """Each slot's shape: the shapes of its kind and query type (trained-on or held-out) cycled from a random start,
    so every (type, shape) gets about the same number of rows; `multi_weight` turns for each multi-fact shape, whose
    statements are often written in part."""
    start: dict[str, int] = {}
    seen: dict[str, int] = {}
    out = []
    for qtype, _, _ in slots:
        kind = "write" if qtype == "write" else "read"
        shapes = (held_out_shapes if held_out else training_shapes)(kind, qtype)
        cycle = [s for s in shapes for _ in range(multi_weight if s in MULTI_SHAPES else 1)]
        if qtype not in start:
            start[qtype] = rng.randrange(len(cycle))
        out.append(cycle[(start[qtype] + seen.get(qtype, 0)) % len(cycle)])
        seen[qtype] = seen.get(qtype, 0) + 1
    return out


# ------------------------------------------------------------------------------------------ names as typed
def recasable(name: str) -> bool:
    """Whether capitalising each word of the lower-cased name gives the name back."""
    return " ".join(w[:1].upper() + w[1:] for w in name.lower().split(" ")) == name


def _lower_name(name: str) -> str:
    return name.lower() if recasable(name) else name


def _distance(a: str, b: str) -> int:
    """Levenshtein distance."""
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def misspell(rng: random.Random, name: str, others: Sequence[str] = ()) -> str | None:
    """A typing slip in the longest word of `name`, never its first letter: two neighbours swapped, a letter dropped
    or doubled. The slip is nearer `name` than any of `others` (the scene's people, or the company list), so it
    still means `name`. None when no word has 5+ letters (short names are left alone) or no slip is unambiguous."""
    words = name.split(" ")
    k = max(range(len(words)), key=lambda j: (len(words[j]), -j))
    w = words[k]
    if len(w) < 5 or not w.isalpha():
        return None
    for _ in range(8):
        i = rng.randrange(1, len(w) - 1)
        op = rng.choice(("swap", "drop", "double"))
        if op == "swap" and w[i] != w[i + 1]:
            typed = w[:i] + w[i + 1] + w[i] + w[i + 2 :]
        elif op == "drop":
            typed = w[:i] + w[i + 1 :]
        else:
            typed = w[: i + 1] + w[i] + w[i + 1 :]
        slip = " ".join(words[:k] + [typed] + words[k + 1 :])
        if slip != name and all(_distance(slip, o) > _distance(slip, name) for o in others if o != name):
            return slip
    return None


def _say(rng: random.Random, kind: str, shape: str, template: str, fills: dict[str, str], lower: dict[str, str]):
    """The user's message: the template filled, wrapped in a filler or lower-cased as `shape` says."""
    if shape == "lowercase":
        marks = {k: f"\x00{k.lower()}\x00" for k in fills}
        text = template.format(**marks).lower()
        for k, v in lower.items():
            text = text.replace(f"\x00{k.lower()}\x00", v)
        return text
    text = template.format(**fills)
    if shape == "filler":
        prefix, suffix = rng.choice(FILLERS[kind])
        if prefix.endswith((", ", "that ")) and not template.startswith("{"):
            text = text[:1].lower() + text[1:]
        text = prefix + text + suffix
    return text


# ------------------------------------------------------------------------------------------ statements
def scene_with(
    rng: random.Random,
    names: Iterator[str],
    split: str,
    companies: Sequence[str],
    scene_size: tuple[int, int],
    required: Sequence[tuple[str, str, int]],
) -> list[tuple[str, str, list[str]]]:
    """A scene whose first groups are `required` (relation, organisation, people), filled up to its size with
    groups of any relation at those organisations (and sometimes one more)."""
    need = sum(n for _, _, n in required)
    total = rng.randint(max(scene_size[0], need), max(scene_size[1], need))
    groups = [(r, o, [draw(names, split) for _ in range(n)]) for r, o, n in required]
    orgs = sorted({o for _, o, _ in required})
    extra = [c for c in companies if c not in orgs]
    if extra and rng.random() < 0.5:
        orgs.append(rng.choice(extra))
    left = total - need
    while left > 0:
        size = min(left, rng.choices((1, 2, 3), weights=(3, 2, 1))[0])
        groups.append((rng.choice(list(RELATIONS)), rng.choice(orgs), [draw(names, split) for _ in range(size)]))
        left -= size
    return groups


def _triples(groups) -> list[list[str]]:
    return [[p, RELATIONS[r], o] for r, o, people in groups for p in people]


def _coordinated(rng, names, split, companies, rel, scene_size):
    """2-3 clauses, each another (relation, organisation), the first `rel`; None when the scene has only one."""
    groups = scene(rng, names, split, companies, rel, "multi", scene_size)
    first = rng.choice([g for g in groups if g[0] == rel])
    chosen, pairs = [first], {first[:2]}
    for g in rng.sample(list(groups), len(groups)):
        if g[:2] not in pairs:
            chosen.append(g)
            pairs.add(g[:2])
    if len(chosen) == 1:
        return groups, None, None
    chosen = chosen[: rng.choice((2, 2, 3))]
    clauses = []
    for r, o, people in chosen:
        t = rng.choice(clause_templates(r, len(people) > 1)).removesuffix(".")
        clauses.append((t.format(P=join_names(people), O=o), t.endswith("{P}")))
    inner_people = any(ends for _, ends in clauses[:-1])
    if len(clauses) == 2:
        joins = JOIN_TWO if not inner_people else [j for j in JOIN_TWO if not j.startswith("{0} and")]
    else:
        joins = JOIN_THREE if not inner_people else [j for j in JOIN_THREE if ";" in j]
    return groups, rng.choice(joins).format(*(c for c, _ in clauses)), chosen


def _paired(rng, names, split, companies, rel, shape, scene_size):
    """gapping, relative_two or respectively: (scene, sentence, the groups it states in order); None if too small."""
    if shape == "respectively":
        k = rng.choice((2, 2, 3))
        required = [(rel, o, 1) for o in rng.sample(list(companies), k)]
    elif shape == "gapping":
        required = [(rel, o, rng.choice((1, 1, 2))) for o in rng.sample(list(companies), 2)]
    else:
        o = rng.choice(list(companies))
        other = rng.choice([r for r in RELATIONS if r != rel])
        required = [(rel, o, rng.choice((1, 1, 2))), (other, o, rng.choice((1, 1, 2)))]
    if sum(n for _, _, n in required) > scene_size[1]:
        return None
    groups = scene_with(rng, names, split, companies, scene_size, required)
    stated = groups[: len(required)]
    lex = LEXICON[rel]
    if shape == "respectively":
        options = [f"{{P}} {v[1]} {{O}}, respectively." for v in lex.verbs]
        options += [f"{{P}} are {n[1]} {{O}}, respectively." for n in lex.nouns]
        people, orgs = [g[2][0] for g in stated], [g[1] for g in stated]
        return groups, rng.choice(options).format(P=join_names(people), O=join_names(orgs)), stated
    (_, o1, p1), (r2, o2, p2) = stated
    i = int(len(p1) > 1)
    if shape == "gapping":
        verb = rng.choice([v[i] for v in lex.verbs] + [f"{('is', 'are')[i]} {n[i]}" for n in lex.nouns])
        return groups, f"{join_names(p1)} {verb} {o1}, and {join_names(p2)} {gap_remnant(verb)}{o2}.", stated
    verb = rng.choice(lex.verbs)[i]
    rest = rng.choice(LEXICON[r2].org_active)[int(len(p2) > 1)].removeprefix("{O} ").format(P=join_names(p2))
    return groups, f"{o1}, which {join_names(p1)} {verb}, {rest}", stated


def _write(rng, names, split, companies, rel, shape, scene_size):
    """(scene groups, user message, triples written in sentence order, the shape it was said in)."""
    if shape == "coordinated":
        groups, user, stated = _coordinated(rng, names, split, companies, rel, scene_size)
        if user is not None:
            return groups, user, _triples(stated), shape
        shape = _FALLBACK[False]  # a scene of one (relation, organisation): scene_size allows only that
    elif shape in MULTI_SHAPES:
        made = _paired(rng, names, split, companies, rel, shape, scene_size)
        if made is not None:
            groups, user, stated = made
            return groups, user, _triples(stated), shape
        shape = _FALLBACK[shape == "respectively"]
    groups = scene(rng, names, split, companies, rel, "has", scene_size)
    r, o, people = rng.choice([g for g in groups if g[0] == rel])
    base = rng.choice(_WRITE_BASES) if shape in NOISE_SHAPES else shape
    template = rng.choice(statements(base, r, len(people) > 1))
    fills = {"P": join_names(people), "O": o, "Y": rng.choice(YEARS)}
    lower = {"P": join_names([_lower_name(p) for p in people]), "O": o.lower(), "Y": fills["Y"]}
    if shape == "typo_company":
        typed = misspell(rng, o, companies)
        if typed is None:
            shape = base
        else:
            fills["O"] = typed
    return groups, _say(rng, "write", shape, template, fills, lower), _triples([(r, o, people)]), shape


# ------------------------------------------------------------------------------------------ rows
def verb_of(rel: str, template: str) -> int | None:
    """Which of `rel`'s trained verbs (`LEXICON[rel].verbs`) a template says, by its longest form found as whole
    words ("co-founded" before "founded"); None for a template without one (a noun, a role, a possessive)."""
    best, at = 0, None
    for k, forms in enumerate(LEXICON[rel].verbs):
        for f in forms:
            if len(f) > best and re.search(rf"(?<![\w-]){re.escape(f)}(?![\w-])", template, re.I):
                best, at = len(f), k
    return at


class VerbBalance:
    """A training question's verb chosen as the one its (type, relation) has said least so far, among those its shape
    has templates for: the template is drawn as before, and one that says a verb is swapped for a template of that
    verb. Drawn, the verbs follow the shapes' template lists and chance (the paper's templates say "manage"): the cpu
    build's manager questions said "manage" 14 times and "run(s)" 4; balanced, each verb gets its share."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.used = rng, {}

    def __call__(self, key: tuple[str, str], options: Sequence[str]) -> str:
        template = self.rng.choice(options)
        _, rel = key
        if rel not in LEXICON or verb_of(rel, template) is None:
            return template
        by_verb: dict[int, list[str]] = {}
        for t in options:
            if (v := verb_of(rel, t)) is not None:
                by_verb.setdefault(v, []).append(t)
        used = self.used.setdefault(key, [0] * len(LEXICON[rel].verbs))
        fewest = min(used[v] for v in by_verb)
        verb = self.rng.choice(sorted(v for v in by_verb if used[v] == fewest))
        used[verb] += 1
        return self.rng.choice(by_verb[verb])


def _example(rng, names, split, companies, i, slot, shape, scene_size, pick=None) -> dict[str, Any]:
    qtype, rel, match = slot
    row = {"id": f"{split}-{i:05d}", "kind": "read", "query_type": qtype, "relation": rel, "scene": i}
    if qtype == "write":
        groups, user, triples, shape = _write(rng, names, split, companies, rel, shape, scene_size)
        memory = scene_facts(groups)[1]
        row.update(kind="write", phrasing=shape, user=user, api=format_retllm_write(triples), reply="", answer="")
        row.update(query=[], triples=triples, memory=[t for t in memory if t not in triples])
        return row
    need = "has" if match else {"rel": "lacks", "org_rel": "lacks", "per_rel": "other"}.get(qtype, "has")
    groups = scene(rng, names, split, companies, rel, need, scene_size)
    facts, memory = scene_facts(groups)
    query, x, o = read_query(rng, names, split, companies, slot, facts)
    base, needs = shape, {"typo_company": "{O}", "typo_name": "{X}"}.get(shape, "")  # the name a typo goes in
    if shape in NOISE_SHAPES:
        base = rng.choice([b for b in _READ_BASES if any(needs in t for t in questions(b, qtype, rel))])
    options = [t for t in questions(base, qtype, rel) if needs in t]
    template = rng.choice(options) if pick is None else pick((qtype, rel), options)
    results = lookup(memory, query)
    if bool(results) != match:
        raise AssertionError(f"generator bug: {qtype} query {query} on {memory} gave {results}")
    fills = {"X": x, "O": o}
    typed = list(query)
    if shape in ("typo_company", "typo_name"):
        key = "O" if shape == "typo_company" else "X"
        others = companies if key == "O" else sorted({f[0] for f in facts})
        slip = misspell(rng, fills[key], others)
        if slip is None:
            shape = base
        else:
            fills[key] = slip
            typed[0] = slip if key == "X" else typed[0]
    lower = {"X": _lower_name(x), "O": o.lower()}
    row.update(
        phrasing=shape,
        user=_say(rng, "read", shape, template, fills, lower),
        api=format_retllm_read_query(typed),
        reply=format_retllm_read_reply(results),
        answer=answer_sentence(results),
        query=typed,
        triples=results,
        memory=memory,
    )
    return row


def make_rows(
    config: Any,
    first: Sequence[str],
    last: Sequence[str],
    companies: Sequence[str],
    stmts: Sequence[Statement] | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Every split's rows (SPLITS; `synthetic.features`' columns) for a wide `RetLLMConfig`; the same config gives the
    same rows. `stmts`: the Re-DocRED statements (default: `docred_mix.load_statements()`, the test split)."""
    c = config
    sizes = {"train": c.n_train, "validation": c.n_val, "test": c.n_test, "paraphrase": c.n_paraphrase}
    pools = name_pools(c.seed, first, last, sizes, c.scene_size)
    docred = split_statements(load_statements() if stmts is None else stmts, c.seed)
    out = {}
    for split in SPLITS[:4]:
        rng = random.Random(f"retllm-wide/{c.seed}/{split}")
        names, n = iter(pools[split]), sizes[split]
        pool = docred[split] if split != "paraphrase" else []
        picked = rng.sample(pool, min(round(n * c.docred_frac), len(pool)))
        at = set(rng.sample(range(n), len(picked)))
        share = c.train_write_frac if split == "train" else c.write_frac
        syn_slots = slots(rng, n - len(picked), share, c.no_match_frac)
        weight = c.multi_weight if split == "train" else 1
        plan = iter(zip(syn_slots, shape_plan(rng, syn_slots, held_out=split == "paraphrase", multi_weight=weight)))
        stated = iter(picked)
        pick = VerbBalance(rng) if split == "train" and c.train_questions == "balanced" else None
        rows = []
        for i in range(n):
            if i in at:
                rows.append(docred_row(next(stated), split, i))
            else:
                slot, shape = next(plan)
                rows.append(_example(rng, names, split, companies, i, slot, shape, c.scene_size, pick))
        out[split] = rows
    held = docred["new_relations"]
    k = len(held) if c.n_new_relations is None else min(c.n_new_relations, len(held))
    chosen = random.Random(f"retllm-wide/{c.seed}/new_relations").sample(held, k)
    out["new_relations"] = [docred_row(st, "new_relations", i) for i, st in enumerate(chosen)]
    # relations in the user's words: training rows appended (the trainer shuffles), and an evaluation split over the
    # held-out open relations
    people = open_people(c, first, last)
    out["train"] += open_relations.rows(c.open_rows, people["train"], held_out=False, seed=c.seed, split="train")
    out["open_relations"] = open_relations.rows(
        c.n_open_test, people["test"], held_out=True, seed=c.seed, split="open_test"
    )
    return out


def open_people(
    config: Any, first: Sequence[str] | None = None, last: Sequence[str] | None = None
) -> dict[str, list[str]]:
    """Whom the open-relation rows are about: train people from the far end of the train pool (the synthetic train rows
    draw from its start), test people for evaluation; experiments/open_relations.py builds its variants from these.
    `first`, `last`: the name lists (default: data/first_names.txt, data/last_names.txt)."""
    c = config
    first = load_names(DATA / "first_names.txt") if first is None else first
    last = load_names(DATA / "last_names.txt") if last is None else last
    sizes = {"train": c.n_train, "validation": c.n_val, "test": c.n_test, "paraphrase": c.n_paraphrase}
    pools = name_pools(c.seed, first, last, sizes, c.scene_size)
    return {"train": pools["train"][::-1][:2000], "test": pools["test"]}
