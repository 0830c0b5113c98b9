"""Who may stand in for a query term: the stress set (`fuzzy.stress`), the sweeps and the calibration of
`fuzzy.matching`, and the MiniLM defaults in thresholds.py held to what the calibration finds."""

import random

import numpy as np
import pytest
from rapidfuzz.distance import OSA

from retllm_utils.fuzzy import matching
from retllm_utils.fuzzy.matching import SIGNALS, Scored, calibrate, decide, sweep
from retllm_utils.fuzzy.stress import KINDS, misspell, name_pool, split_companies, split_paraphrases, stress_pairs
from retllm_utils.memory import char_similarity, first_passing
from retllm_utils.models import NgramEmbedder
from retllm_utils.retllm.phrasings import RELATIONS
from retllm_utils.thresholds import MINILM_THRESHOLDS


@pytest.fixture(scope="module")
def pools():
    return name_pool("validation"), name_pool("test")


@pytest.fixture(scope="module")
def small(pools):
    """A small calibration set scored with the hashed trigram encoder (no model: fast, deterministic)."""
    (orgs, _), (rels, _) = split_companies(), split_paraphrases()
    pairs = stress_pairs(pools[0], orgs, 0, n_stored=80, n_queries=60, paraphrases=rels)
    return matching.score_pairs(NgramEmbedder(), pairs)


# ---------------------------------------------------------------------------------------------- the stress set
def test_name_pools_are_disjoint_and_companies_split_in_halves(pools):
    val, test = pools
    assert val and test and not set(val) & set(test)
    cal, held = split_companies()
    assert len(cal) + len(held) == 90 and not set(cal) & set(held) and split_companies() == (cal, held)
    a, b = split_paraphrases()
    assert set(a) == set(b) == set(RELATIONS.values()) and all(not set(a[r]) & set(b[r]) for r in a)


def test_misspell_makes_one_or_two_letter_slips():
    rng = random.Random(0)
    for name in ["Caspian Nakashima", "Parisa Patel", "Oliver O'Brien", "Mai Berg"]:
        for edits in (1, 2):
            for _ in range(30):
                typo = misspell(name, rng, edits)
                assert typo != name and 1 <= OSA.distance(typo, name) <= edits
                assert typo.count(" ") == name.count(" ")  # letters only: the words stay
    assert misspell("Caspian Nakashima", random.Random(3)) == misspell("Caspian Nakashima", random.Random(3))


def test_stress_set_is_deterministic_and_labelled(pools):
    val, _ = pools
    orgs, _ = split_companies()
    pairs = stress_pairs(val, orgs, 0)
    assert pairs == stress_pairs(val, orgs, 0) and pairs != stress_pairs(val, orgs, 1)
    cases = {(p.kind, p.case) for p in pairs}
    assert cases == {
        ("person", "misspelling"),
        ("person", "other person"),
        ("organisation", "paraphrase"),
        ("organisation", "misspelling"),
        ("organisation", "other organisation"),
        ("relation", "relation paraphrase"),
        ("relation", "other relation"),
    }
    stored = pairs[0].stored
    people = [s for s in stored if s in set(val)]
    firsts, lasts = {n.split()[0] for n in people}, {n.split()[-1] for n in people}
    for p in pairs:
        assert p.query not in p.stored  # never an exact match: every query goes through the fuzzy rule
        assert (p.gold is None) == (p.case.startswith("other"))
        assert p.gold is None or p.gold in p.stored
        if p.case == "misspelling" and p.kind == "person":
            assert 1 <= OSA.distance(p.query, p.gold) <= 2
        if p.case == "other person":
            assert p.query in set(val) and (p.query.split()[0] in firsts or p.query.split()[-1] in lasts)
    orgs_stored = {p.gold for p in pairs if p.case == "paraphrase"}
    assert orgs_stored and orgs_stored <= set(orgs)
    for org in orgs_stored:  # every form of every stored company
        forms = {p.query for p in pairs if p.case == "paraphrase" and p.gold == org}
        assert forms == {f"{org} Inc.", f"{org} Corporation", f"{org} Group", f"the {org} company", org.lower()}
    # a paraphrase of a relation is asked once with its relation stored (gold) and once without it (None)
    para = [p for p in pairs if p.case == "relation paraphrase"]
    assert para and all(any(q.query == p.query and p.gold not in q.stored for q in pairs) for p in para)


# ---------------------------------------------------------------------------------------------- rules, sweeps
def _scored(kind, gold, *cands):
    return Scored(kind, "test", "query", gold, list(cands))


def test_decide_rules():
    s = _scored("person", "Caspian", ("Romilly", 0.76, 0.2), ("Caspian", 0.63, 0.86))
    assert decide(s, "vector", 0.75) == "Romilly" and decide(s, "vector", 0.8) is None
    assert decide(s, "char", 0.7) == "Caspian" and decide(s, "char", 0.9) is None
    assert decide(s, "combined", 0.7, vector=0.5) == "Caspian"  # the nearer fails the spelling check
    assert decide(s, "combined", 0.7, vector=0.7) is None  # the right one is below the cosine floor
    assert decide(s, "combined", 0.1, vector=0.5) == "Romilly"  # both pass: the nearest
    assert first_passing(s.candidates, 0.5, 0.7) == 1
    with pytest.raises(ValueError, match="signal"):
        decide(s, "cosine", 0.5)


def test_vectorised_sweep_agrees_with_decide():
    rng = random.Random(0)
    scores = []
    for i in range(200):
        cands = [(f"e{rng.randrange(8)}", rng.random(), rng.random()) for _ in range(rng.randint(0, 5))]
        cands.sort(key=lambda c: -c[1])
        gold = rng.choice([None, "e0", "e1", "e2"])
        scores.append(Scored("person", "x", f"q{i}", gold, cands))
    thresholds = [0.0, 0.2, 0.5, 0.77, 1.0]
    for signal in SIGNALS:
        for vector in (0.0, 0.4):
            rows = sweep(scores, "person", signal, thresholds, vector)
            for t, row in zip(thresholds, rows):
                picked = [(decide(s, signal, t, vector), s.gold) for s in scores]
                assert row["right"] == sum(p is not None and p == g for p, g in picked)
                assert row["false"] == sum(p is not None and p != g for p, g in picked)
                assert row["recall"] == pytest.approx(row["right"] / sum(s.gold is not None for s in scores))


def test_calibrate_takes_the_middle_of_the_safe_band():
    """Two wrong candidates at cosine 0.50 and 0.60, right ones at 0.81 and 0.90: a threshold must exceed 0.60 even
    0.02 lower, so the safe band of full recall is [0.63, 0.81]; its middle is 0.72."""
    scores = [
        _scored("relation", None, ("a", 0.50, 0.1)),
        _scored("relation", None, ("b", 0.60, 0.1)),
        _scored("relation", "c", ("c", 0.81, 0.9)),
        _scored("relation", "d", ("d", 0.90, 0.9)),
    ]
    th = calibrate(scores)["relation"]
    assert th["vector"]["threshold"] == pytest.approx(0.72)
    assert sweep(scores, "relation", "vector", [0.72])[0] == {
        "threshold": 0.72,
        "precision": 1.0,
        "recall": 1.0,
        "false": 0,
        "right": 2,
    }
    assert sweep(scores, "relation", "vector", [0.55])[0]["false"] == 1
    # a wrong candidate scoring like the right ones: no safe threshold keeps them, all recall is given up
    scores.append(_scored("relation", None, ("e", 0.95, 0.95)))
    assert calibrate(scores)["relation"]["vector"]["threshold"] > 0.95


def test_calibrate_finds_no_false_substitution_on_its_own_data(small):
    th = calibrate(small, margin=0.02)
    for kind in KINDS:
        for signal in SIGNALS:
            t = th[kind][signal]
            thr, vec = (t["char"], t["vector"]) if signal == "combined" else (t["threshold"], 0.0)
            assert sweep(small, kind, signal, [thr], vec)[0]["false"] == 0, (kind, signal)
            assert sweep(small, kind, signal, [thr - 0.02], vec - 0.02)[0]["false"] == 0, (kind, signal)
    # not by refusing everything: typos of people resolve, and the calibrated rule does better than the paper's
    person = sweep(small, "person", "combined", [th["person"]["combined"]["char"]], th["person"]["combined"]["vector"])
    assert person[0]["recall"] > 0.5
    assert sweep(small, "person", "vector", [0.0])[0]["false"] > 0  # the set does hold traps


def test_plot_pr_returns_a_figure(small):
    fig = matching.plot_pr(small, calibrate(small))
    assert len(fig.axes) == 3 and [ax.get_title().split()[0] for ax in fig.axes] == list(KINDS)
    assert len(fig.axes[0].lines) >= 6  # recall and precision per signal, and the chosen thresholds


# ---------------------------------------------------------------------------------------------- MiniLM
@pytest.fixture(scope="module")
def minilm():
    from retllm_utils.models import load_embedder

    return load_embedder()


def test_char_similarity_on_the_issue_examples():
    assert char_similarity("Pierre Patel", "Parisa Patel", "subject") < 0.3  # another person, same surname
    assert char_similarity("Caspin Nakashima", "Caspian Nakashima", "subject") > 0.8  # a typo
    assert char_similarity("Caspin Nakashima", "Romilly Nakashima", "subject") < 0.3
    assert char_similarity("the Pfizer company", "Pfizer", "object") == 1.0
    assert char_similarity("Moderna", "Pfizer", "object") < 0.5


def test_organisations_are_compared_word_for_word():
    """Legal forms and word order do not count; a name whose words are some of the other's, or whose number
    differs, is refused outright."""
    th = MINILM_THRESHOLDS["fuzzy_char"]["object"]
    assert char_similarity("Pfizer Inc.", "Pfizer Group", "object") == 1.0
    assert char_similarity("Congress of Tucuman", "Tucuman Congress", "object") == 1.0
    assert char_similarity("Pfzier", "Pfizer", "object") >= th  # a typo
    assert char_similarity("Johnson & Eohnson", "Johnson & Johnson", "object") >= th  # a typo of a repeated word
    assert char_similarity("Brussels", "Brussels Midi", "object") == 0.0  # a station of the city, not the city
    assert char_similarity("Bantu", "Bantu homeland", "object") == 0.0
    assert char_similarity("South West Africa", "South Africa", "object") == 0.0  # however short the added word
    assert char_similarity("Pangaea II", "Pangaea", "object") == 0.0
    assert char_similarity("Halo", "Halo 3", "object") == 0.0
    assert char_similarity("District 211", "District 214", "object") == 0.0
    assert char_similarity("Inc.", "Inc", "object") == 1.0  # a name of legal-form words only is compared whole


def test_minilm_defaults_are_what_calibration_finds(minilm):
    """thresholds.MINILM_THRESHOLDS' fuzzy read is `measure`'s choice on the validation pool, and on the test pool it
    makes no wrong stand-in where the paper's rule makes many."""
    res = matching.measure(minilm)
    assert res["memory"] == {k: MINILM_THRESHOLDS[k] for k in ("fuzzy", "fuzzy_char")}
    rows = {(r["kind"], r["rule"].split(" ")[0]): r for r in res["table"]}
    for kind in ("person", "organisation"):
        assert rows[(kind, "combined,")]["false"] == 0
        assert rows[(kind, "combined,")]["recall"] >= rows[(kind, "old")]["recall"]
    assert rows[("relation", "vector,")]["false"] == 0
    assert rows[("person", "old")]["false"] >= 10  # the paper's rule lets other people stand in
    assert rows[("person", "combined,")]["recall"] >= 0.75
    assert np.isfinite(res["thresholds"]["person"]["combined"]["char"])
