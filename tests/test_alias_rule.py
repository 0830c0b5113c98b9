"""experiments/alias_rule.py, the learned alias rule tried against the memory's fuzzy-read rule: its features and fit
on tiny fixtures, and the committed experiments/results/alias_rule.json (within its bound, not adopted, the probe
pairs, a refit on the dev pairs, the table in experiments/README.md)."""

import importlib.util
import json
import sys

import pytest

from retllm_utils.fuzzy.aliases import MentionPair, ScoredPair
from retllm_utils.paths import ROOT
from retllm_utils.thresholds import MINILM_THRESHOLDS


def _load():
    spec = importlib.util.spec_from_file_location("alias_rule", ROOT / "experiments" / "alias_rule.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("alias_rule", mod)
    spec.loader.exec_module(mod)
    return mod


alias_rule = _load()
RESULT = ROOT / "experiments" / "results" / "alias_rule.json"


@pytest.fixture(scope="module")
def committed():
    return json.loads(RESULT.read_text())


@pytest.fixture(scope="module")
def kit_minilm():
    from retllm_utils.models import load_embedder

    return load_embedder()


def _pair(a, b, same, cosine, role):
    return ScoredPair(MentionPair("PER" if role == "subject" else "ORG", a, b, same, 0), role, cosine, 0.0, None)


LEARN = [  # close pairs of both kinds per role; STRICT's spelling check lets only the word-subset objects through
    _pair("Obama", "Barack Obama", True, 0.80, "subject"),
    _pair("Smuts", "Jan Smuts", True, 0.72, "subject"),
    _pair("Morricone", "Ennio Morricone", True, 0.78, "subject"),
    _pair("Obama", "Michelle Obama", False, 0.70, "subject"),
    _pair("Luis Roche", "Marcel Roche", False, 0.85, "subject"),
    _pair("Steve Jobs", "Steve Wozniak", False, 0.58, "subject"),
    _pair("USA", "United States", True, 0.89, "object"),
    _pair("NYC", "New York City", True, 0.92, "object"),
    _pair("Blue Note", "Blue Note Records", True, 0.80, "object"),
    _pair("Wii", "Wii Wheel", False, 0.76, "object"),
    _pair("South Africa", "South West Africa", False, 0.93, "object"),
    _pair("East Shore", "West Shore", False, 0.50, "object"),
]
STRICT = {
    "fuzzy": {"subject": 0.2, "object": 0.1},
    "fuzzy_char": {"subject": 0.99, "object": 0.99},
    "fuzzy_alias": {},
}


def test_pair_features_are_the_same_either_way_round():
    for s in LEARN:
        a = alias_rule.pair_features(s.pair.a, s.pair.b, s.cosine)
        b = alias_rule.pair_features(s.pair.b, s.pair.a, s.cosine)
        assert a == pytest.approx(b) and len(a) == len(alias_rule.PAIR_FEATURES)


def test_fit_pair_rule_refits_to_the_same_coefficients():
    pytest.importorskip("sklearn")
    assert alias_rule.fit_pair_rule(LEARN) == alias_rule.fit_pair_rule(list(LEARN))


def test_learned_rule_keeps_its_false_bound_on_the_calibration_pairs():
    """A threshold chosen for false <= bound lets through at most bound x negatives there (0 of 3 at 0.01); "all"
    sums the roles; a looser bound never lets fewer through."""
    pytest.importorskip("sklearn")
    res = alias_rule.learned_rule(LEARN, LEARN, STRICT, bounds=(0.01, 0.5))
    assert res["points"] == [0.01, 0.5, "matched"]
    for setup in res["setups"].values():
        cal = setup["rows"]["calibration"]
        for role in ("subject", "object"):
            low, high, _ = cal[role]
            assert low["added_false"] <= 0.01 * low["negatives"] and high["added_false"] <= 0.5 * high["negatives"]
            assert high["added_right"] >= low["added_right"]
        for a, b, every in zip(cal["subject"], cal["object"], cal["all"]):
            assert every["right"] == a["right"] + b["right"] and every["negatives"] == a["negatives"] + b["negatives"]
        assert set(setup["fits"]) == {"subject", "object"}


def test_committed_trial_stays_within_its_bound_was_not_adopted_and_is_the_readmes_table(committed):
    """experiments/results/alias_rule.json: the rule it was tried against is the memory's (MINILM_THRESHOLDS);
    every setup's own false stand-ins on the calibration documents stay within the bound it was chosen for (the
    held-out documents need not: that is what the trial measures); no setup passed the adoption test, so the memory's
    thresholds keep no learned rule; experiments/README.md shows the table `alias_rule.table` makes of the JSON."""
    assert committed["fuzzy_alias"] == MINILM_THRESHOLDS["fuzzy_alias"]
    assert committed["spelling_check"] == {k: MINILM_THRESHOLDS[k] for k in ("fuzzy", "fuzzy_char")}
    bound = committed["points"][0]
    for setup in committed["setups"].values():
        for role in ("subject", "object"):
            cal = setup["rows"]["calibration"][role][0]
            assert cal["added_false"] <= bound * cal["negatives"]
    assert committed["adopted"] is False
    assert not any(c["passes"] for st in committed["setups"].values() for c in st["checks"].values())
    assert set(MINILM_THRESHOLDS) == {"tau_entity", "tau_relation", "tau_triple", "fuzzy", "fuzzy_char", "fuzzy_alias"}
    assert alias_rule.table(committed) in (ROOT / "experiments" / "README.md").read_text()


@pytest.mark.parametrize("setup", list(alias_rule.SETUPS))
def test_committed_setups_decide_the_probes_as_recorded(committed, kit_minilm, setup):
    """Each fitted setup at its first false bound decides the probe pairs ("USA" / "United States", "Pierre Patel" /
    "Parisa Patel", ...) as the JSON records, and never lets "Pierre Patel" stand in for "Parisa Patel"."""
    import numpy as np

    from retllm_utils.memory import char_similarity
    from retllm_utils.models import unit

    accept = alias_rule.learned_accept(committed["setups"][setup]["fits"], 0, setup, MINILM_THRESHOLDS)
    first = committed["setups"][setup]["checks"][str(committed["points"][0])]["probes"]
    for (a, b, role, alias), (ra, rb, _, recorded) in zip(alias_rule.PROBE_PAIRS, first, strict=True):
        va, vb = unit(np.asarray(kit_minilm.encode([a, b]), np.float32))
        assert (ra, rb) == (a, b)
        assert accept(a, b, float(va @ vb), char_similarity(a, b, role), role) is recorded, (a, b)
        assert alias or not recorded, (a, b)


def test_learned_rule_refits_to_the_committed_coefficients(committed, kit_minilm):
    """Refitting the candidate ("path") on the calibration documents' people gives the committed subject fit:
    coefficients, intercept and thresholds. People only (895 strings to encode against 3,253 for all): the fixture's
    objects stand in for the object pairs, whose fit is not compared."""
    pytest.importorskip("sklearn")
    from retllm_utils.fuzzy.aliases import TYPE_ROLE, load_pairs, score_mention_pairs

    people = [p for p in load_pairs(committed["splits"]["calibration"]) if TYPE_ROLE[p.type] == "subject"]
    cal = score_mention_pairs(kit_minilm, people) + [s for s in LEARN if s.role == "object"]
    refit = alias_rule.learned_rule(cal, cal[:0], MINILM_THRESHOLDS, bounds=tuple(committed["points"][:-1]))
    fit, done = refit["setups"]["path"]["fits"]["subject"], committed["setups"]["path"]["fits"]["subject"]
    assert list(fit["coefficients"]) == list(alias_rule.PAIR_FEATURES)
    # the solver stops at its tolerance, so another CPU's rounding moves the fit slightly: an Intel Xeon refit one
    # coefficient 1.3e-6 away from the AMD EPYC's committed one (a changed feature or data set moves it by far more)
    assert list(fit["coefficients"].values()) == pytest.approx(list(done["coefficients"].values()), abs=1e-5)
    assert fit["intercept"] == pytest.approx(done["intercept"], abs=1e-5)
    assert fit["thresholds"] == pytest.approx(done["thresholds"], abs=1e-6)
    # and the subjects' rows on the calibration documents, as committed
    assert (
        refit["setups"]["path"]["rows"]["calibration"]["subject"]
        == committed["setups"]["path"]["rows"]["calibration"]["subject"]
    )
