"""Aliases in RET-LLM's fuzzy read, calibrated on Re-DocRED's mentions: the cosine an acronym needs (`fuzzy_alias`).

RET-LLM's fuzzy search (§3.2) is for surface variation of one entity, but the spelling check that keeps another
person from standing in (`memory.char_similarity`, calibrated by `fuzzy.matching` on `fuzzy.stress`) also refuses an
alias spelt differently: "USA" for a stored "United States". `memory.alias_form` recognises acronyms ("IBM" /
"International Business Machines", "USA" / "United States"); this module picks, per form, the cosine it needs.

Re-DocRED's `vertexSet` lists each entity's mentions, so two different mention strings of one entity are an alias
(a positive pair), and two entities of one type in one document whose strings are close (`close`: rapidfuzz ratio
>= 0.6, a shared word, or an acronym of the other) are not (a negative: "Vancouver" / "West Vancouver"). People
(PER) are scored as subjects, other names (ORG, LOC, MISC) as objects, each by its role's spelling check, as RET-LLM's
data puts them; dates and numbers (TIME, NUM) are no names and are left out. `measure` calibrates on the dev
documents and scores the test documents (held out), then `fuzzy.stress`' near misses with the chosen rule;
`fuzzy.alias_report.save` writes results/fuzzy_aliases.json and the table in results/thresholds.md from it.

    res = measure(load_embedder())          # chosen fuzzy_alias, calibration and held-out scores, near misses
    alias_report.save(res)
"""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterable, Mapping, NamedTuple, Sequence

import numpy as np
from rapidfuzz import fuzz, utils

from ..memory import ALIAS_FORMS, alias_form, char_similarity, name_words, role_value, stand_in_by
from ..models import unit
from ..paths import DATA
from .matching import GRID

__all__ = [
    "TYPE_ROLE",
    "CLOSE_RATIO",
    "MentionPair",
    "ScoredPair",
    "close",
    "mention_pairs",
    "load_pairs",
    "score_mention_pairs",
    "decide_pair",
    "calibrate_aliases",
    "evaluate",
    "word_subset",
    "other_paths",
    "near_misses",
    "company_collisions",
    "measure",
]

# Re-DocRED entity types that are names, and the role RET-LLM's data reads them in
TYPE_ROLE = {"PER": "subject", "ORG": "object", "LOC": "object", "MISC": "object"}
CLOSE_RATIO = 0.6  # a negative pair's strings: rapidfuzz ratio at least this, a shared word, or an acronym form
RESULTS_JSON = "fuzzy_aliases.json"


class MentionPair(NamedTuple):
    """Two mention strings of one document: of one entity (`same`, an alias) or of two entities of one type."""

    type: str  # Re-DocRED's entity type (PER, ORG, LOC, MISC)
    a: str
    b: str
    same: bool
    doc: int  # the document's index in its file (the first one the pair was seen in)


class ScoredPair(NamedTuple):
    """A pair with what the fuzzy read looks at: its role, the encoder's cosine, the role's spelling similarity and
    the alias form (`memory.alias_form`, None when neither string is an acronym of the other)."""

    pair: MentionPair
    role: str
    cosine: float
    char: float
    form: str | None


def _words(text: str) -> set[str]:
    return set(name_words(text))


def close(a: str, b: str) -> bool:
    """Strings a reader could take for one name: rapidfuzz ratio >= `CLOSE_RATIO` (case and punctuation folded), a
    shared word (not in `memory.ALIAS_SKIP`), or one an acronym of the other."""
    ratio = fuzz.ratio(a, b, processor=utils.default_process) / 100
    return ratio >= CLOSE_RATIO or bool(_words(a) & _words(b)) or alias_form(a, b) is not None


def mention_pairs(docs: Iterable[Mapping[str, Any]], types: Mapping[str, str] = TYPE_ROLE) -> list[MentionPair]:
    """Positives: two mention strings of one entity; negatives: mentions of two entities of one type in one
    document, `close` in spelling. Strings equal once case and punctuation are folded are dropped (no spelling
    tells them apart); each unordered pair of strings counts once, the first document it is seen in kept. An
    entity's type is its first mention's; only `types` are kept."""
    seen: set[tuple] = set()
    out = []

    def add(t: str, a: str, b: str, same: bool, doc: int) -> None:
        key = (same, t, *sorted((a, b)))
        if key not in seen and utils.default_process(a) != utils.default_process(b):
            seen.add(key)
            out.append(MentionPair(t, a, b, same, doc))

    for i, doc in enumerate(docs):
        ents = [(e[0]["type"], list(dict.fromkeys(m["name"] for m in e))) for e in doc["vertexSet"]]
        ents = [(t, names) for t, names in ents if t in types]
        for t, names in ents:
            for a, b in itertools.combinations(names, 2):
                add(t, a, b, True, i)
        for (t, names), (t2, names2) in itertools.combinations(ents, 2):
            if t == t2:
                for a, b in itertools.product(names, names2):
                    if close(a, b):
                        add(t, a, b, False, i)
    return out


def load_pairs(split: str) -> list[MentionPair]:
    """`mention_pairs` of data/redocred/{split}_revised.json ("dev" or "test")."""
    from ..memllm.docred import load_docred

    return mention_pairs(load_docred(DATA / "redocred" / f"{split}_revised.json"))


def score_mention_pairs(embedder: Any, pairs: Sequence[MentionPair]) -> list[ScoredPair]:
    """Each pair's cosine under the encoder (each string encoded once), its role's spelling similarity, its form."""
    texts = list(dict.fromkeys(s for p in pairs for s in (p.a, p.b)))
    vecs = unit(np.asarray(embedder.encode(texts), np.float32)) if texts else np.zeros((0, 1), np.float32)
    at = {t: i for i, t in enumerate(texts)}
    out = []
    for p in pairs:
        role = TYPE_ROLE[p.type]
        cos = float(vecs[at[p.a]] @ vecs[at[p.b]])
        out.append(ScoredPair(p, role, cos, char_similarity(p.a, p.b, role), alias_form(p.a, p.b)))
    return out


def decide_pair(s: ScoredPair, thresholds: Mapping[str, Any]) -> str | None:
    """Whether the memory's rule (`memory.stand_in_by`) lets one string stand in for the other: "spelling", an
    alias form, or None. `thresholds` as an embedder's (`fuzzy`, `fuzzy_char`, `fuzzy_alias`)."""
    return stand_in_by(
        s.pair.a,
        s.pair.b,
        s.cosine,
        s.char,
        role_value(thresholds["fuzzy"], s.role),
        role_value(thresholds["fuzzy_char"], s.role),
        thresholds.get("fuzzy_alias", {}),
    )


def calibrate_aliases(
    scored: Sequence[ScoredPair],
    thresholds: Mapping[str, Any],
    min_precision: float = 0.9,
    margin: float = 0.02,
    grid: Sequence[float] = GRID,
) -> dict[str, float]:
    """Per alias form, the lowest cosine on `grid` at which the pairs the form would let through (those the spelling
    check refuses) are aliases at least `min_precision` of the time, there and `margin` lower. A form with no
    such cosine, or no pair, is left out: it never stands in."""
    off = {**thresholds, "fuzzy_alias": {}}
    chosen = {}
    for form in ALIAS_FORMS:
        mine = [s for s in scored if s.form == form and decide_pair(s, off) is None]
        cos = np.array([s.cosine for s in mine])
        same = np.array([s.pair.same for s in mine], bool)
        if not len(mine):
            continue

        def precision(t: float) -> float:
            kept = cos >= t - 1e-9
            return float(same[kept].mean()) if kept.any() else 1.0

        ok = [float(t) for t in grid if precision(t) >= min_precision and precision(t - margin) >= min_precision]
        if ok and (cos >= ok[0] - 1e-9).any():
            chosen[form] = ok[0]
    return chosen


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def evaluate(scored: Sequence[ScoredPair], thresholds: Mapping[str, Any]) -> dict[str, Any]:
    """The rule with `thresholds` against the spelling check alone (`fuzzy_alias` {}), per role and over all pairs:
    alias recall (positives let through), false stand-ins (negatives let through, their share of the negatives),
    and what the alias path alone added, per form."""
    off = {**thresholds, "fuzzy_alias": {}}
    out: dict[str, Any] = {}
    for group in ("subject", "object", "all"):
        mine = [s for s in scored if group in ("all", s.role)]
        pos, neg = [s for s in mine if s.pair.same], [s for s in mine if not s.pair.same]
        row: dict[str, Any] = {"positives": len(pos), "negatives": len(neg)}
        for name, th in (("spelling", off), ("with_aliases", thresholds)):
            right = sum(decide_pair(s, th) is not None for s in pos)
            false = sum(decide_pair(s, th) is not None for s in neg)
            row[name] = {
                "right": right,
                "false": false,
                "alias_recall": _rate(right, len(pos)),
                "false_rate": _rate(false, len(neg)),
            }
        for form in ALIAS_FORMS:
            added = [s for s in mine if decide_pair(s, thresholds) == form]
            row[form] = {
                "positives": sum(s.form == form and s.pair.same for s in mine),
                "negatives": sum(s.form == form and not s.pair.same for s in mine),
                "added_right": sum(s.pair.same for s in added),
                "added_false": sum(not s.pair.same for s in added),
            }
        out[group] = row
    return out


def word_subset(a: str, b: str) -> bool:
    """One string's words (not in `memory.ALIAS_SKIP`) a proper subset of the other's: "Obama" / "Barack Obama"."""
    wa, wb = _words(a), _words(b)
    return bool(wa and wb) and (wa < wb or wb < wa)


def other_paths(
    scored: Sequence[ScoredPair], thresholds: Mapping[str, Any], cosines: Sequence[float] = (0.5, 0.7, 0.8, 0.85, 0.9)
) -> dict[str, dict[str, list]]:
    """Ways to let more aliases through that the rule does not take, measured: of the pairs `thresholds` refuses,
    per role, those in a word-subset form ("Obama" / "Barack Obama") and any pair, at each cosine floor: how many
    would pass and the share of them that are aliases ([cosine, pairs, alias share])."""
    refused = [s for s in scored if decide_pair(s, thresholds) is None]
    out: dict[str, dict[str, list]] = {}
    for role in ("subject", "object"):
        mine = [s for s in refused if s.role == role]
        for name, group in (("word subset", [s for s in mine if word_subset(s.pair.a, s.pair.b)]), ("any", mine)):
            cos, same = np.array([s.cosine for s in group]), np.array([s.pair.same for s in group], bool)
            rows = []
            for t in cosines:
                kept = cos >= t
                rows.append([t, int(kept.sum()), float(same[kept].mean()) if kept.any() else None])
            out.setdefault(role, {})[name] = rows
    return out


def near_misses(
    embedder: Any,
    thresholds: Mapping[str, Any],
    seed: int = 0,
    accept: Callable[[str, str, float, float, str], bool] | None = None,
) -> dict[str, dict[str, int]]:
    """`fuzzy.stress`' test set (test people, the held-out half of the companies and relation phrasings) read
    with the memory's rule, aliases on: per kind and case, pairs, right and false stand-ins (the nearest of the
    `memory.FUZZY_CANDIDATES` nearest by cosine that `memory.stand_in_by` lets through, as `MemoryReads` does).
    `accept(query, stored, cosine, char, role)`, when given, decides instead of `stand_in_by`: a rule on trial
    (experiments/alias_rule.py)."""
    from .matching import score_pairs
    from .stress import ROLE, name_pool, split_companies, split_paraphrases, stress_pairs

    (_, orgs), (_, rels) = split_companies(seed), split_paraphrases(seed)
    scored = score_pairs(embedder, stress_pairs(name_pool("test", seed), orgs, seed, paraphrases=rels))
    out: dict[str, dict[str, int]] = {}
    for s in scored:
        role = ROLE[s.kind]
        vector, char = role_value(thresholds["fuzzy"], role), role_value(thresholds["fuzzy_char"], role)
        alias = thresholds.get("fuzzy_alias", {})
        cands = s.candidates if char > 0 else s.candidates[:1]  # as MemoryReads: without a check the nearest decides
        if accept is None:
            pick = next((t for t, c, ch in cands if stand_in_by(s.query, t, c, ch, vector, char, alias)), None)
        else:
            pick = next((t for t, c, ch in cands if accept(s.query, t, c, ch, role)), None)
        row = out.setdefault(f"{s.kind}: {s.case}", {"pairs": 0, "right": 0, "false": 0})
        row["pairs"] += 1
        row["right"] += pick is not None and pick == s.gold
        row["false"] += pick is not None and pick != s.gold
    return out


def company_collisions(embedder: Any, thresholds: Mapping[str, Any]) -> list[list]:
    """Every company of data/companies.txt, plain and in each `fuzzy.stress.ORG_FORMS` form, that is an acronym form
    of another company ("Lego Group" / "LG"): [query, stored, form, cosine, stands in], the stored one standing in
    when the query's own company is not stored. The stress set meets such a pair only when its draw does."""
    from ..retllm.synthetic import load_names
    from .stress import ORG_FORMS

    companies = sorted(load_names(DATA / "companies.txt"))
    found = []
    for org in companies:
        queries = dict.fromkeys([org] + [f.format(org, lower=org.lower()) for f in ORG_FORMS])
        found += [(q, other, alias_form(q, other)) for q in queries for other in companies if other != org]
    found = [f for f in found if f[2] is not None]
    if not found:
        return []
    vecs = unit(np.asarray(embedder.encode([t for f in found for t in f[:2]]), np.float32))
    cos = (vecs[0::2] * vecs[1::2]).sum(axis=1)
    alias = thresholds.get("fuzzy_alias", {})
    out = []
    for (q, other, form), c in zip(found, cos):
        passes = stand_in_by(q, other, float(c), char_similarity(q, other, "object"), 2.0, 2.0, alias) is not None
        out.append([q, other, form, round(float(c), 3), passes])
    return out


def _examples(scored: Sequence[ScoredPair], thresholds: Mapping[str, Any], n: int = 12) -> dict[str, list]:
    """Held-out pairs to read: the alias path's false stand-ins (all), the spelling check's and aliases still refused
    (the first `n` of each, in document order)."""

    def show(s: ScoredPair) -> list:
        return [s.pair.type, s.pair.a, s.pair.b, round(s.cosine, 3)]

    alias_false = [show(s) for s in scored if not s.pair.same and decide_pair(s, thresholds) in ALIAS_FORMS]
    spelling_false = [show(s) for s in scored if not s.pair.same and decide_pair(s, thresholds) == "spelling"]
    missed = [show(s) for s in scored if s.pair.same and decide_pair(s, thresholds) is None]
    return {"alias_false": alias_false, "spelling_false": spelling_false[:n], "refused_aliases": missed[:n]}


def measure(
    embedder: Any,
    calibration: str = "dev",
    held_out: str = "test",
    thresholds: Mapping[str, Any] | None = None,
    min_precision: float = 0.9,
    seed: int = 0,
) -> dict[str, Any]:
    """Choose `fuzzy_alias` on the `calibration` documents (`calibrate_aliases`, the spelling check as
    `thresholds`, default the embedder's), score the rule on the `held_out` documents and on `fuzzy.stress`'
    near misses, each against the spelling check alone. One encoding pass over every string (about 8k)."""
    base = dict(thresholds if thresholds is not None else embedder.thresholds)
    cal_pairs, test_pairs = load_pairs(calibration), load_pairs(held_out)
    scored = score_mention_pairs(embedder, cal_pairs + test_pairs)
    cal, test = scored[: len(cal_pairs)], scored[len(cal_pairs) :]
    chosen = calibrate_aliases(cal, base, min_precision=min_precision)
    rule = {**base, "fuzzy_alias": chosen}
    known = {(s.pair.same, *sorted((s.pair.a, s.pair.b))) for s in cal}
    return {
        "embedder": getattr(embedder, "name", type(embedder).__name__),
        "splits": {"calibration": calibration, "held_out": held_out},
        "spelling_check": {k: base[k] for k in ("fuzzy", "fuzzy_char")},
        "min_precision": min_precision,
        "fuzzy_alias": chosen,
        "calibration": evaluate(cal, rule),
        "held_out": evaluate(test, rule),
        "other_paths": {"calibration": other_paths(cal, rule), "held_out": other_paths(test, rule)},
        # held-out pairs whose two strings are a calibration pair too (another document)
        "held_out_seen_in_calibration": sum((s.pair.same, *sorted((s.pair.a, s.pair.b))) in known for s in test),
        "near_misses": {
            "spelling": near_misses(embedder, {**base, "fuzzy_alias": {}}, seed),
            "with_aliases": near_misses(embedder, rule, seed),
        },
        "examples": _examples(test, rule),
        "company_collisions": company_collisions(embedder, rule),
    }
