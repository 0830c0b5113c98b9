"""A learned alias rule for RET-LLM's fuzzy read, tried against the memory's rule on Re-DocRED mention pairs.

The memory lets a stored name stand in for a query when the encoder's cosine and the role's spelling check agree, or
when one is an acronym of the other at the cosine `fuzzy.aliases` calibrated (`fuzzy_alias`). That rule keeps alias
recall low (0.110 of Re-DocRED's held-out aliases), so this tries a logistic regression per role over 12
features of the two strings and their MiniLM cosine (`PAIR_FEATURES`), fit on the dev documents' mention pairs
(`fuzzy.aliases.load_pairs`: two mention strings of one entity are an alias, two entities of one type with `close`
strings a negative) in three places (`SETUPS`): "path" beside the spelling check, in place of the alias path, on
the `close` pairs the spelling check refuses; "path_ungated" the same without the `close` gate; "alone" in place of
the whole rule, on `close` pairs. Its decision threshold is chosen on the dev pairs per point: each bound on its own
false stand-ins (`FALSE_BOUNDS`, a share of the role's negatives) and "matched" (the current rule's dev recall).
Each setup is scored as a whole rule on the test documents (held out), on `fuzzy.stress`' near misses read as the
memory reads them (`fuzzy.aliases.near_misses` with the learned decision) and on four probe pairs, and passes the
adoption test (`learned_trial`) only if it clearly adds held-out recall or removes false stand-ins without letting
a near miss stand in or losing a right stand-in of the stress set. None passes: the memory keeps its rule.

    .venv/bin/python experiments/alias_rule.py   # -> experiments/results/alias_rule.json, prints the table
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
from rapidfuzz import fuzz, utils

from retllm_utils.fuzzy.aliases import (
    ScoredPair,
    calibrate_aliases,
    close,
    decide_pair,
    evaluate,
    load_pairs,
    near_misses,
    score_mention_pairs,
    word_subset,
)
from retllm_utils.memory import (
    alias_form,
    char_similarity,
    name_similarity,
    name_words,
    role_value,
    spelling_similarity,
    stand_in_by,
    words_similarity,
)
from retllm_utils.models import unit

RESULTS = Path(__file__).resolve().parent / "results"  # experiments/results/

# what the logistic regression sees of a pair: the cosine, every role's spelling score, the acronym forms, shapes
PAIR_FEATURES = (
    "cosine",
    "name_similarity",
    "words_similarity",
    "spelling_ratio",
    "partial_ratio",
    "word_subset",
    "initialism",
    "abbreviation",
    "length_ratio",
    "same_last_word",
    "same_first_word",
    "same_word_count",
)
FALSE_BOUNDS = (0.01, 0.05, 0.10)  # the learned rule's own false stand-ins, a share of the role's negatives
CLEAR_GAIN = 0.05  # held-out alias recall a new rule must add at false stand-ins <= FALSE_BOUNDS[0] to be adopted
# where the learned rule is tried: (only `close` pairs, beside the spelling check: only pairs it refuses)
SETUPS = {"path": (True, True), "path_ungated": (False, True), "alone": (True, False)}
SETUP_TEXT = {
    "path": "beside the spelling check in place of the alias path, on `close` pairs the spelling check refuses",
    "path_ungated": "the same without the `close` gate",
    "alone": "in place of the whole rule, on `close` pairs",
}
# aliases a fuzzy read should take, and a look-alike other person it must refuse: (a, b, role, stands in)
PROBE_PAIRS = (
    ("USA", "United States", "object", True),
    ("IBM", "International Business Machines", "object", True),
    ("NYC", "New York City", "object", True),
    ("Pierre Patel", "Parisa Patel", "subject", False),
)


# ---------------------------------------------------------------------------------------------- the rule
def pair_features(a: str, b: str, cosine: float) -> list[float]:
    """`PAIR_FEATURES` of two strings and their cosine, the same either way round."""
    wa, wb = name_words(a), name_words(b)
    la, lb = len(utils.default_process(a)), len(utils.default_process(b))
    form = alias_form(a, b)
    return [
        cosine,
        name_similarity(a, b),
        words_similarity(a, b),
        spelling_similarity(a, b),
        fuzz.partial_ratio(a, b, processor=utils.default_process) / 100,
        float(word_subset(a, b)),
        float(form == "initialism"),
        float(form == "abbreviation"),
        min(la, lb) / max(la, lb, 1),
        float(bool(wa and wb) and wa[-1] == wb[-1]),
        float(bool(wa and wb) and wa[0] == wb[0]),
        float(len(wa) == len(wb)),
    ]


def fit_pair_rule(scored: Sequence[ScoredPair]) -> tuple[list[float], float]:
    """Logistic regression (scikit-learn, lbfgs, C 1: deterministic) of alias against negative on `pair_features`:
    (coefficients in `PAIR_FEATURES` order, intercept). Both kinds of pair are needed."""
    from sklearn.linear_model import LogisticRegression

    x = np.array([pair_features(s.pair.a, s.pair.b, s.cosine) for s in scored])
    y = np.array([s.pair.same for s in scored], bool)
    model = LogisticRegression(C=1.0, max_iter=5000).fit(x, y)
    return [float(c) for c in model.coef_[0]], float(model.intercept_[0])


def _scores(scored: Sequence[ScoredPair], coef: Sequence[float], intercept: float) -> np.ndarray:
    x = np.array([pair_features(s.pair.a, s.pair.b, s.cosine) for s in scored]).reshape(len(scored), len(coef))
    return x @ np.asarray(coef) + intercept


def _cut(scores: np.ndarray, keep: int) -> float | None:
    """The score above which the `keep` highest of `scores` lie (None: all of them)."""
    ranked = np.sort(scores)[::-1]
    return float(ranked[keep]) if keep < len(ranked) else None


def _rate(num: int, den: int) -> float | None:
    return num / den if den else None


def _counts(pairs: Sequence[ScoredPair], kept: Sequence[ScoredPair], added: Sequence[ScoredPair]) -> dict[str, Any]:
    """Right and false stand-ins of a rule that lets `kept` through (`added`: by the learned rule alone)."""
    n = {
        "positives": sum(s.pair.same for s in pairs),
        "negatives": sum(not s.pair.same for s in pairs),
        "right": sum(s.pair.same for s in kept),
        "false": sum(not s.pair.same for s in kept),
        "added_right": sum(s.pair.same for s in added),
        "added_false": sum(not s.pair.same for s in added),
    }
    return {**n, "alias_recall": _rate(n["right"], n["positives"]), "false_rate": _rate(n["false"], n["negatives"])}


def _sum_counts(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    return (
        _counts([], [], [])
        | {k: a[k] + b[k] for k in a if not k.endswith(("_recall", "_rate"))}
        | {
            "alias_recall": _rate(a["right"] + b["right"], a["positives"] + b["positives"]),
            "false_rate": _rate(a["false"] + b["false"], a["negatives"] + b["negatives"]),
        }
    )


def learned_rule(
    calibration: Sequence[ScoredPair],
    held_out: Sequence[ScoredPair],
    thresholds: Mapping[str, Any],
    bounds: Sequence[float] = FALSE_BOUNDS,
) -> dict[str, Any]:
    """Per `SETUPS` entry and role, `fit_pair_rule` on the calibration pairs it is tried on, with a decision
    threshold chosen there per point: each false bound (its own false stand-ins <= bound x the role's negatives)
    and "matched" (the current rule's calibration recall, `thresholds` with its aliases); each scored on both splits
    as a whole rule (with the spelling check where it sits beside it), per role and over all pairs."""
    spelling = {**thresholds, "fuzzy_alias": {}}
    out: dict[str, Any] = {"features": list(PAIR_FEATURES), "points": [*bounds, "matched"], "setups": {}}
    for name, (gated, beside) in SETUPS.items():

        def spelt(s: ScoredPair) -> bool:
            return beside and decide_pair(s, spelling) is not None

        def on_trial(s: ScoredPair) -> bool:
            return (not gated or close(s.pair.a, s.pair.b)) and not spelt(s)

        fits: dict[str, Any] = {}
        rows: dict[str, dict[str, list]] = {"calibration": {}, "held_out": {}}
        for role in ("subject", "object"):
            cal = [s for s in calibration if s.role == role]
            tried = [s for s in cal if on_trial(s)]
            coef, intercept = fit_pair_rule(tried)
            scores = _scores(tried, coef, intercept)
            same = np.array([s.pair.same for s in tried], bool)
            negatives = sum(not s.pair.same for s in cal)
            cuts = [_cut(scores[~same], int(np.floor(b * negatives + 1e-9))) for b in bounds]
            # matched: as many right as the current rule, the spelling check's own counted first
            need = sum(s.pair.same and decide_pair(s, thresholds) is not None for s in cal)
            need -= sum(s.pair.same and spelt(s) for s in cal)
            ranked = np.sort(scores[same])[::-1]
            if need <= 0:  # the spelling check alone is enough: nothing added
                cuts.append(float(scores.max()) if len(scores) else None)
            else:  # just below the need-th best alias (all of them when too few)
                cuts.append(float(np.nextafter(ranked[need - 1], -np.inf)) if need <= len(ranked) else None)
            fits[role] = {"coefficients": dict(zip(PAIR_FEATURES, coef)), "intercept": intercept, "thresholds": cuts}
            for split, pairs in (("calibration", cal), ("held_out", [s for s in held_out if s.role == role])):
                mine = [s for s in pairs if on_trial(s)]
                mine_scores = _scores(mine, coef, intercept)
                for cut in cuts:
                    added = [s for s, v in zip(mine, mine_scores) if cut is None or v > cut]
                    kept = [s for s in pairs if spelt(s)] + added
                    rows[split].setdefault(role, []).append(_counts(pairs, kept, added))
        for split in rows:
            rows[split]["all"] = [_sum_counts(a, b) for a, b in zip(rows[split]["subject"], rows[split]["object"])]
        out["setups"][name] = {"fits": fits, "rows": rows}
    return out


def learned_accept(
    fit: Mapping[str, Any], point: int, setup: str, thresholds: Mapping[str, Any]
) -> Callable[[str, str, float, float, str], bool]:
    """A `near_misses` `accept` of a `learned_rule` fit (its "fits") at `points[point]`: subjects and objects as
    the setup decides them, relations as `thresholds` (the learned rule never saw one)."""
    gated, beside = SETUPS[setup]

    def accept(query: str, stored: str, cosine: float, char: float, role: str) -> bool:
        vector, char_min = role_value(thresholds["fuzzy"], role), role_value(thresholds["fuzzy_char"], role)
        if role not in fit:
            return (
                stand_in_by(query, stored, cosine, char, vector, char_min, thresholds.get("fuzzy_alias", {}))
                is not None
            )
        if beside and cosine >= vector and char >= char_min:
            return True
        if gated and not close(query, stored):
            return False
        coef, cut = fit[role]["coefficients"], fit[role]["thresholds"][point]
        value = float(np.dot(list(coef.values()), pair_features(query, stored, cosine)) + fit[role]["intercept"])
        return cut is None or value > cut

    return accept


def negative_shapes(scored: Sequence[ScoredPair], thresholds: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """How ambiguous the pairs are, per kind ("aliases", "negatives"): how many there are, are `close`, a
    `word_subset`, an acronym form, spelt alike (rapidfuzz ratio >= 0.9), or let through by the spelling check."""
    spelling = {**thresholds, "fuzzy_alias": {}}
    out = {}
    for kind, same in (("aliases", True), ("negatives", False)):
        mine = [s for s in scored if s.pair.same == same]
        out[kind] = {
            "pairs": len(mine),
            "close": sum(close(s.pair.a, s.pair.b) for s in mine),
            "word_subset": sum(word_subset(s.pair.a, s.pair.b) for s in mine),
            "acronym_form": sum(s.form is not None for s in mine),
            "spelt_alike": sum(spelling_similarity(s.pair.a, s.pair.b) >= 0.9 for s in mine),
            "spelling_passes": sum(decide_pair(s, spelling) is not None for s in mine),
        }
    return out


def learned_trial(
    embedder: Any,
    calibration: Sequence[ScoredPair],
    held_out: Sequence[ScoredPair],
    thresholds: Mapping[str, Any],
    seed: int = 0,
) -> dict[str, Any]:
    """`learned_rule` with, per setup at the first false bound and at "matched", `near_misses` and `PROBE_PAIRS`,
    the pairs' `negative_shapes`, and whether a setup passes the adoption test: at the first bound held-out recall
    >= the current rule's + `CLEAR_GAIN` with its own false stand-ins within the bound, or at "matched" fewer false
    stand-ins at no less recall, and in either case no near miss standing in and none of the stress set's right
    stand-ins lost."""
    res = learned_rule(calibration, held_out, thresholds)
    current = evaluate(held_out, thresholds)["all"]["with_aliases"]
    stress = near_misses(embedder, thresholds, seed)
    vecs = unit(np.asarray(embedder.encode([t for p in PROBE_PAIRS for t in p[:2]]), np.float32))
    probe_cos = (vecs[0::2] * vecs[1::2]).sum(axis=1)
    bound = res["points"][0]
    for name, setup in res["setups"].items():
        checks = {}
        for point in (0, len(res["points"]) - 1):
            accept = learned_accept(setup["fits"], point, name, thresholds)
            near = near_misses(embedder, thresholds, seed, accept=accept)
            held = setup["rows"]["held_out"]["all"][point]
            if point == 0:
                better = (
                    held["alias_recall"] >= current["alias_recall"] + CLEAR_GAIN
                    and held["added_false"] <= bound * held["negatives"]
                )
            else:
                better = held["false"] < current["false"] and held["right"] >= current["right"]
            clean = all(r["false"] == 0 for r in near.values())
            kept = all(r["right"] >= stress[case]["right"] for case, r in near.items())
            probes = [
                [a, b, round(float(c), 3), accept(a, b, float(c), char_similarity(a, b, role), role)]
                for (a, b, role, _), c in zip(PROBE_PAIRS, probe_cos)
            ]
            checks[str(res["points"][point])] = {
                "better_on_held_out": better,
                "near_misses_refused": clean,
                "stress_right_kept": kept,
                "passes": better and clean and kept,
                "near_misses": near,
                "probes": probes,
            }
        setup["checks"] = checks
    res["current_held_out"] = current
    res["stress_current"] = stress
    res["shapes"] = {
        "calibration": negative_shapes(calibration, thresholds),
        "held_out": negative_shapes(held_out, thresholds),
    }
    res["adopted"] = any(c["passes"] for st in res["setups"].values() for c in st["checks"].values())
    return res


def measure(embedder: Any, calibration: str = "dev", held_out: str = "test", seed: int = 0) -> dict[str, Any]:
    """The memory's rule as `fuzzy.aliases.measure` chooses it (the embedder's spelling check, `fuzzy_alias`
    calibrated on `calibration`), its scores on both splits, and `learned_trial` against it. One encoding pass over
    the pairs' strings, then `fuzzy.stress`' near misses seven times."""
    base = dict(embedder.thresholds)
    cal_pairs, test_pairs = load_pairs(calibration), load_pairs(held_out)
    scored = score_mention_pairs(embedder, cal_pairs + test_pairs)
    cal, test = scored[: len(cal_pairs)], scored[len(cal_pairs) :]
    rule = {**base, "fuzzy_alias": calibrate_aliases(cal, base)}
    current = {
        split: {g: {k: row[k] for k in ("positives", "negatives", "spelling", "with_aliases")} for g, row in ev.items()}
        for split, ev in (("calibration", evaluate(cal, rule)), ("held_out", evaluate(test, rule)))
    }
    return {
        "experiment": "alias_rule",
        "embedder": getattr(embedder, "name", type(embedder).__name__),
        "splits": {"calibration": calibration, "held_out": held_out},
        "spelling_check": {k: base[k] for k in ("fuzzy", "fuzzy_char")},
        "fuzzy_alias": rule["fuzzy_alias"],
        "current": current,  # the memory's rule: spelling check alone and with the alias path, per split and role
        **learned_trial(embedder, cal, test, rule, seed),
    }


# ---------------------------------------------------------------------------------------------- the report
def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.3f}"


def _trio(rows: Mapping[str, list], point: int, key: str) -> str:
    return " / ".join(_f(rows[g][point][key]) for g in ("subject", "object", "all"))


def table(res: Mapping[str, Any]) -> str:
    """`measure`'s numbers as the markdown table of experiments/README.md: the current rule, then each setup at each
    point, held out as a whole rule, with the near-miss checks where they were run."""
    points, cal_split = res["points"], res["splits"]["calibration"]
    cur = res["current"]["held_out"]
    cal_cur = res["current"]["calibration"]["all"]["with_aliases"]
    lines = [
        "| rule | point | held-out recall: subject / object / all | held-out false: subject / object / all "
        f"| learned alone, held-out (all): right / false | {cal_split} (all): recall / false "
        "| near misses standing in | stress right lost | passes |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        "| current (spelling check + alias path) | – "
        f"| {' / '.join(_f(cur[g]['with_aliases']['alias_recall']) for g in ('subject', 'object', 'all'))} "
        f"| {' / '.join(_f(cur[g]['with_aliases']['false_rate']) for g in ('subject', 'object', 'all'))} | – "
        f"| {_f(cal_cur['alias_recall'])} / {_f(cal_cur['false_rate'])} "
        f"| {sum(r['false'] for r in res['stress_current'].values())} | – | – |",
    ]
    for name, setup in res["setups"].items():
        held, cal = setup["rows"]["held_out"], setup["rows"]["calibration"]
        for i, point in enumerate(points):
            check = setup["checks"].get(str(point))
            if check:
                near = sum(r["false"] for r in check["near_misses"].values())
                lost = sum(
                    max(res["stress_current"][c]["right"] - r["right"], 0) for c, r in check["near_misses"].items()
                )
                extra = f"{near} | {lost} | {'yes' if check['passes'] else 'no'}"
            else:
                extra = "– | – | –"
            a = held["all"][i]
            label = f"own false <= {point}" if isinstance(point, float) else point
            lines.append(
                f"| {name} | {label} | {_trio(held, i, 'alias_recall')} | {_trio(held, i, 'false_rate')} "
                f"| {a['added_right']} / {a['added_false']} | {_f(cal['all'][i]['alias_recall'])} / "
                f"{_f(cal['all'][i]['false_rate'])} | {extra} |"
            )
    return "\n".join(lines)


def best_within(res: Mapping[str, Any]) -> tuple[float, str, Any] | None:
    """The highest held-out alias recall (all) of any setup and point whose whole rule's held-out false stand-ins
    stay within the first false bound: (recall, setup, point), or None."""
    bound = res["points"][0]
    within = [
        (row["alias_recall"], name, res["points"][i])
        for name, setup in res["setups"].items()
        for i, row in enumerate(setup["rows"]["held_out"]["all"])
        if row["false_rate"] <= bound
    ]
    return max(within, default=None)


def summary(res: Mapping[str, Any]) -> str:
    """The findings in a few lines: the verdict, the best recall within the bound, the pairs' shapes, the gate."""
    bound, best = res["points"][0], best_within(res)
    neg, ali = res["shapes"]["held_out"]["negatives"], res["shapes"]["held_out"]["aliases"]
    spelling = res["current"]["held_out"]["all"]["spelling"]
    coef = {s: res["setups"][s]["fits"]["object"]["coefficients"]["words_similarity"] for s in ("path", "path_ungated")}
    ungated = sum(r["false"] for r in res["setups"]["path_ungated"]["checks"][str(bound)]["near_misses"].values())
    return "\n".join(
        [
            f"adopted: {res['adopted']}",
            (
                f"best held-out alias recall with the whole rule's false stand-ins <= {bound}: {_f(best[0])} "
                f'("{best[1]}" at {best[2]})'
                if best
                else f"no setup keeps its held-out false stand-ins <= {bound}"
            ),
            f"spelling check alone, held out: recall {_f(spelling['alias_recall'])}, "
            f"false {_f(spelling['false_rate'])}",
            f"held-out negatives: {neg['pairs']}, word subsets {neg['word_subset']}, spelt alike {neg['spelt_alike']}, "
            f"acronym forms {neg['acronym_form']}, pass the spelling check {neg['spelling_passes']}",
            f"held-out aliases: {ali['pairs']}, close {ali['close']}, word subsets {ali['word_subset']}, "
            f"spelt alike {ali['spelt_alike']}, acronym forms {ali['acronym_form']}, "
            f"pass the spelling check {ali['spelling_passes']}",
            f"objects' words_similarity weight: {coef['path']:.2f} gated, {coef['path_ungated']:.2f} ungated "
            f"({ungated} near misses stand in ungated at {bound})",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calibration", default="dev", help="Re-DocRED split the rule is fit and calibrated on")
    ap.add_argument("--held-out", default="test", help="Re-DocRED split it is scored on")
    ap.add_argument("--seed", type=int, default=0, help="fuzzy.stress' draw of near misses")
    ap.add_argument("--out", default="alias_rule", help="experiments/results/<out>.json")
    a = ap.parse_args()

    from benchmarks.common import machine, save_result
    from retllm_utils.models import load_embedder

    res = measure(load_embedder(), a.calibration, a.held_out, a.seed)
    path = save_result(a.out, {**res, "machine": machine()}, RESULTS)
    print(table(res), summary(res), f"-> {path}", sep="\n\n")


if __name__ == "__main__":
    main()
