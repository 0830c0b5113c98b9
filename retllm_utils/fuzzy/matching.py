"""Who may stand in for a query term ("no wrong stand-ins"): the stress set's scores, threshold sweeps, calibration.

RET-LLM's read lets a stored phrase stand in for a query term not stored verbatim (`memory.TripleMemory.read`).
A sentence encoder's cosine measures meaning, not spelling: with MiniLM, "Pierre Patel" scores 0.76 against a stored
"Parisa Patel" (another person) and the misspelt "Caspin Nakashima" 0.63 against "Caspian Nakashima". This module
scores `fuzzy.stress`'s labelled near misses with an encoder's cosine and rapidfuzz's character similarity
(`score_pairs`), sweeps thresholds (`sweep`, `plot_pr`) and picks them per kind (`calibrate`).
`measure` runs it all: calibrated on the synthetic data set's validation people, scored on its test people (disjoint
pools); `models.MINILM_THRESHOLDS` holds what it chose for MiniLM. The memory's rule is the "combined" one: of the
nearest stored phrases by cosine, the nearest whose cosine and character similarity both pass their thresholds.

Kinds and the memory roles they calibrate: person -> subject, organisation -> object, relation -> relation.

    res = measure(load_embedder())        # thresholds, a table per kind and rule, the scored sets
    plot_pr(res["test"], res["thresholds"]).savefig("matching.png")
"""

from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Sequence

import numpy as np

from ..memory import FUZZY_CANDIDATES, char_similarity, first_passing
from ..models import unit
from .stress import KINDS, ROLE, Pair, name_pool, split_companies, split_paraphrases, stress_pairs

__all__ = [
    "SIGNALS",
    "GRID",
    "Scored",
    "score_pairs",
    "decide",
    "sweep",
    "calibrate",
    "memory_thresholds",
    "measure",
    "plot_pr",
]

SIGNALS = ("vector", "char", "combined")
GRID = np.round(np.arange(0.0, 1.0001, 0.01), 2)  # thresholds tried: cosines and character similarities


class Scored(NamedTuple):
    """A pair with its `k` nearest stored phrases by cosine: (text, cosine, character similarity), best first."""

    kind: str
    case: str
    query: str
    gold: str | None
    candidates: list[tuple[str, float, float]]


def score_pairs(embedder: Any, pairs: Sequence[Pair], k: int = FUZZY_CANDIDATES) -> list[Scored]:
    """Each pair's `k` nearest stored phrases by the encoder's cosine, with their character similarity (its role's)."""
    texts = list(dict.fromkeys([p.query for p in pairs] + [s for p in pairs for s in p.stored]))
    vecs = unit(np.asarray(embedder.encode(texts), np.float32))
    at = {t: i for i, t in enumerate(texts)}
    out, stored_vecs = [], {}
    for p in pairs:
        if p.stored not in stored_vecs:
            stored_vecs[p.stored] = vecs[[at[s] for s in p.stored]]
        cos = stored_vecs[p.stored] @ vecs[at[p.query]]
        top = np.argsort(-cos, kind="stable")[:k]
        cands = [(p.stored[i], float(cos[i]), char_similarity(p.query, p.stored[i], ROLE[p.kind])) for i in top]
        out.append(Scored(p.kind, p.case, p.query, p.gold, cands))
    return out


def decide(s: Scored, signal: str, threshold: float, vector: float = 0.0) -> str | None:
    """What stands in for one scored query under a rule (None: nothing).

    "vector": the nearest candidate, if its cosine >= threshold (the paper's rule); "char": the candidate of highest
    character similarity, if >= threshold; "combined": the nearest candidate whose cosine >= `vector` and whose
    character similarity >= threshold (the memory's rule, `memory.first_passing`).
    """
    if signal not in SIGNALS:
        raise ValueError(f"signal must be one of {SIGNALS}, got {signal!r}")
    if not s.candidates:
        return None
    if signal == "vector":
        text, cos, _ = s.candidates[0]
        return text if cos >= threshold else None
    if signal == "char":
        text, _, char = max(s.candidates, key=lambda c: c[2])
        return text if char >= threshold else None
    i = first_passing(s.candidates, vector, threshold)
    return None if i is None else s.candidates[i][0]


def _arrays(scores: Sequence[Scored], kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(cosine, char, is gold) per pair and candidate of one kind (missing candidates never pass), and gold count."""
    mine = [s for s in scores if s.kind == kind]
    k = max((len(s.candidates) for s in mine), default=1)
    cos, char, gold = np.full((len(mine), k), -np.inf), np.full((len(mine), k), -np.inf), np.zeros((len(mine), k), bool)
    for i, s in enumerate(mine):
        for j, (text, c, ch) in enumerate(s.candidates):
            cos[i, j], char[i, j], gold[i, j] = c, ch, text == s.gold
    return cos, char, gold, sum(s.gold is not None for s in mine)


def _counts(arrays: tuple, signal: str, thresholds: Sequence[float], vectors: Sequence[float]) -> np.ndarray:
    """(right, false) substitutions of `decide`'s rule for every (vector floor, threshold): shape (2, nv, nt)."""
    cos, char, gold, _ = arrays
    t, v, rows = np.asarray(thresholds, float), np.asarray(vectors, float), np.arange(len(cos))
    if signal == "combined":
        passes = (cos[:, :, None, None] >= v[None, None, :, None]) & (char[:, :, None, None] >= t[None, None, None, :])
        first = passes.argmax(axis=1)[:, None]
        right = np.take_along_axis(np.broadcast_to(gold[:, :, None, None], passes.shape), first, 1)[:, 0]
        resolved = passes.any(axis=1)
    else:
        j = np.zeros(len(cos), int) if signal == "vector" else char.argmax(axis=1)
        score = (cos if signal == "vector" else char)[rows, j]
        resolved = np.broadcast_to((score[:, None] >= t[None, :])[:, None, :], (len(cos), len(v), len(t)))
        right = gold[rows, j][:, None, None]
    right = resolved & right
    return np.stack([right.sum(axis=0), (resolved & ~right).sum(axis=0)])


def sweep(
    scores: Sequence[Scored], kind: str, signal: str, thresholds: Sequence[float], vector: float = 0.0
) -> list[dict[str, float]]:
    """Per threshold: precision, recall and false substitutions of `kind`'s pairs under `decide`'s rule.

    right: pairs resolved to their gold phrase; false: pairs resolved to anything else (another person, a company
    for a query that has none); recall = right / pairs with a gold phrase; precision = right / (right + false).
    For "combined" the thresholds are the character threshold at the cosine floor `vector`.
    """
    if signal not in SIGNALS:
        raise ValueError(f"signal must be one of {SIGNALS}, got {signal!r}")
    arrays = _arrays(scores, kind)
    right, false = _counts(arrays, signal, thresholds, [vector])[:, 0]
    n_gold = arrays[3]
    return [
        {
            "threshold": float(t),
            "precision": float(r / (r + f)) if r + f else 1.0,
            "recall": float(r / n_gold) if n_gold else 0.0,
            "false": int(f),
            "right": int(r),
        }
        for t, r, f in zip(thresholds, right, false)
    ]


def _centre(region: np.ndarray) -> tuple[int, int]:
    """The cell of a boolean region (one row, or a 2-D grid) furthest from its edge: the one that survives the most
    erosions, ties the middle one. Beyond the grid counts as outside: the thresholds tried span [0, 1]."""
    depth, inner = np.zeros(region.shape, int), region
    offsets = [(a, b) for a in ((-1, 0, 1) if region.shape[0] > 1 else (0,)) for b in (-1, 0, 1)]
    while inner.any():
        depth += inner
        p = np.pad(inner, 1)
        inner = np.logical_and.reduce([p[1 + a : p.shape[0] - 1 + a, 1 + b : p.shape[1] - 1 + b] for a, b in offsets])
    best = np.argwhere(depth == depth.max())
    return tuple(best[len(best) // 2])


def calibrate(scores: Sequence[Scored], margin: float = 0.02, grid: Sequence[float] = GRID) -> dict[str, dict]:
    """Per kind and signal, the thresholds of most recall with no false substitution there nor `margin` lower.

    "vector" and "char" give {"threshold": t}; "combined" searches both, {"vector": cosine floor, "char": t}. Of the
    thresholds that reach that recall, the one furthest from the others' edge (the middle of their band). A threshold
    of inf: no threshold on the grid avoids false substitutions.
    """
    g = np.asarray(grid, float)
    out: dict[str, dict] = {}
    for kind in KINDS:
        arrays = _arrays(scores, kind)
        n_gold = max(arrays[3], 1)
        out[kind] = {}
        for signal in SIGNALS:
            v = g if signal == "combined" else np.zeros(1)
            right, false = _counts(arrays, signal, g, v)
            false_low = _counts(arrays, signal, g - margin, v - margin)[1]
            ok = (false == 0) & (false_low == 0)
            if not ok.any():
                th = {"vector": np.inf, "char": np.inf} if signal == "combined" else {"threshold": np.inf}
            else:
                recall = np.where(ok, right / n_gold, -1.0)
                i, j = _centre(recall >= recall.max() - 1e-12)
                th = (
                    {"vector": float(g[i]), "char": float(g[j])} if signal == "combined" else {"threshold": float(g[j])}
                )
            out[kind][signal] = th
    return out


def memory_thresholds(calibrated: Mapping[str, Mapping[str, Mapping[str, float]]]) -> dict[str, dict[str, float]]:
    """`calibrate`'s choice as `TripleMemory`'s `fuzzy` / `fuzzy_char`: people and companies by the combined rule,
    relations by cosine alone (a character check gained one paraphrase of 15 on the test half: too few to trust)."""
    c = calibrated
    return {
        "fuzzy": {
            "subject": c["person"]["combined"]["vector"],
            "relation": c["relation"]["vector"]["threshold"],
            "object": c["organisation"]["combined"]["vector"],
        },
        "fuzzy_char": {
            "subject": c["person"]["combined"]["char"],
            "relation": 0.0,
            "object": c["organisation"]["combined"]["char"],
        },
    }


def measure(embedder: Any, seed: int = 0, old: float = 0.75) -> dict[str, Any]:
    """Calibrate on the validation people (and one half of the companies and relation phrasings), then score each
    rule on the test people (the other halves): the paper's (`old`: nearest, cosine >= 0.75) and the calibrated
    vector-only, character-only and combined ones. Returns thresholds, the table rows and both scored sets."""
    (cal_orgs, test_orgs), (cal_rels, test_rels) = split_companies(seed), split_paraphrases(seed)
    cal = score_pairs(embedder, stress_pairs(name_pool("validation", seed), cal_orgs, seed, paraphrases=cal_rels))
    test = score_pairs(embedder, stress_pairs(name_pool("test", seed), test_orgs, seed, paraphrases=test_rels))
    th = calibrate(cal)
    rows = []
    for kind in KINDS:
        t = th[kind]
        rules = {
            f"old (cosine >= {old}, nearest)": ("vector", old, 0.0),
            "vector, calibrated": ("vector", t["vector"]["threshold"], 0.0),
            "char, calibrated": ("char", t["char"]["threshold"], 0.0),
            "combined, calibrated": ("combined", t["combined"]["char"], t["combined"]["vector"]),
        }
        for rule, (signal, threshold, vector) in rules.items():
            r = sweep(test, kind, signal, [threshold], vector)[0]
            rows.append({"kind": kind, "rule": rule, "vector": vector, **r})
    return {"thresholds": th, "memory": memory_thresholds(th), "table": rows, "calibration": cal, "test": test}


def plot_pr(scores: Sequence[Scored], thresholds: Mapping[str, Mapping[str, Any]] | None = None) -> Any:
    """Precision (dashed) and recall (solid) against threshold, a panel per kind, a colour per signal; the chosen
    thresholds (`calibrate`'s) marked. "combined" is swept over the character threshold at its kind's calibrated
    cosine floor (0 without `thresholds`). Returns the Figure: the caller saves it."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(KINDS), figsize=(4.2 * len(KINDS), 3.8), sharey=True)
    colors = {"vector": "tab:blue", "char": "tab:orange", "combined": "tab:green"}
    for ax, kind in zip(axes, KINDS):
        th = (thresholds or {}).get(kind, {})
        floor = th.get("combined", {}).get("vector", 0.0)
        for signal in SIGNALS:
            rows = sweep(scores, kind, signal, GRID, floor)
            x = [r["threshold"] for r in rows]
            ax.plot(x, [r["recall"] for r in rows], color=colors[signal], label=signal)
            ax.plot(x, [r["precision"] for r in rows], color=colors[signal], ls="--")
            t = th.get(signal, {}).get("char" if signal == "combined" else "threshold")
            if t is not None:
                ax.axvline(t, color=colors[signal], lw=0.8, alpha=0.6)
        ax.set_title(f"{kind} ({ROLE[kind]}); combined at cosine >= {floor:.2f}", fontsize=9)
        ax.set_xlabel("threshold (cosine, or character similarity)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("precision (dashed), recall (solid)")
    axes[0].legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig
