"""MemLLM Table 1 as data (notebook 07): its rows (`ReadSetup`, `TABLE1_ROWS`), the evaluated documents and results,
the paper's values, the official aggregation of token NLLs, and paired bootstrap intervals for the row differences
that carry the paper's claims. How a row is evaluated: `perplexity` (which re-exports these names).

Metrics as the official evaluate_v4_mistral.py: OVERALL = summed NLL / scored tokens of all documents, TARGET = mean
over gold read targets of the mean NLL of the target's tokens, ENTITY = the same over every entity mention. The paper
prints these mean token NLLs and calls them "PPL"; `Scores` gives both the NLL and exp(NLL) (a real perplexity).

Intervals (`paired_bootstrap`): documents are resampled with replacement, the same resample for both rows (the rows
score the same tokens, so the pairing removes the documents' own difficulty); each resample's metric is computed as
`aggregate` computes it (OVERALL pools the resampled documents' tokens, TARGET / ENTITY average their span means),
and the 2.5 / 97.5 percentiles of the resampled differences bound the 95% interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..api import Triple

__all__ = [
    "ReadSetup",
    "TABLE1_ROWS",
    "EvalDoc",
    "DocResult",
    "PAPER_TABLE1",
    "PAPER_CLAIMS",
    "METRICS",
    "Scores",
    "aggregate",
    "paired_bootstrap",
    "row_interval",
    "claim_intervals",
    "target_gap_by_reply",
    "prepare_doc",
]


@dataclass(frozen=True)
class ReadSetup:
    """One Table 1 row: model, memory, where reads happen, who writes the queries, what the memory answers."""

    model: str = "read"  # "base" (adapter off) | "read" (the read adapter)
    memory: str | None = None  # key of the memory the notebook passes ("mw_dev", "gold_dev"); None: no reads
    positions: str = "none"  # "none" | "model" (top token is "({") | "gold" (dev read points)
    queries: str = "model"  # "model" (generated) | "gold"
    results: str = "memory"  # "memory" | "memory+target" (gold target added) | "target" (gold target only)
    mix: bool = False  # gold reads weighted by p = P("({") (official p_branching; rows ③ and ⑤)

    def __post_init__(self) -> None:
        if (
            self.positions not in ("none", "model", "gold")
            or self.queries not in ("model", "gold")
            or self.results not in ("memory", "memory+target", "target")
            or self.model not in ("base", "read")
        ):
            raise ValueError(f"bad ReadSetup {self}")
        if self.positions != "gold" and (self.queries == "gold" or self.results != "memory" or self.mix):
            raise ValueError("gold queries, gold targets and branch mixing exist only at gold read positions")
        if self.positions != "none" and self.results != "target" and self.memory is None:
            raise ValueError("reads need a memory (or results='target')")

    @property
    def mask_open(self) -> bool:
        """The official masking: "({" is removed from every text prediction except in the branch-mixing rows."""
        return not self.mix


# The rows of MemLLM Table 1, in the paper's order (① and ②, Wikipedia memories, are not built here), plus ⑤′.
TABLE1_ROWS: dict[str, ReadSetup] = {
    "#1 base model": ReadSetup(model="base"),
    "#2 read model, memory disabled": ReadSetup(),
    "③ MW[dev] memory": ReadSetup(memory="mw_dev", positions="gold", mix=True),
    "④ ③ + gold positions and queries": ReadSetup(memory="mw_dev", positions="gold", queries="gold"),
    "⑤ gold dev triples": ReadSetup(memory="gold_dev", positions="gold", mix=True),
    # ours, not the paper's
    "⑤′ model-chosen positions (argmax)": ReadSetup(memory="gold_dev", positions="model"),
    "⑥ ⑤ + gold positions": ReadSetup(memory="gold_dev", positions="gold"),
    "⑦ ⑥ + gold queries": ReadSetup(memory="gold_dev", positions="gold", queries="gold"),
    "⑧ ⑦ + gold target added": ReadSetup(memory="gold_dev", positions="gold", queries="gold", results="memory+target"),
    "⑨ gold target only": ReadSetup(positions="gold", queries="gold", results="target"),
}


@dataclass
class EvalDoc:
    """A dev document as tokens: ids, each token's character span, gold reads and the spans to average over."""

    ids: list[int]
    offsets: list[tuple[int, int]]
    gold_reads: dict[int, int]  # token index of a gold read point -> its index in `queries` / `targets`
    queries: list[list[Triple]]
    targets: list[list[str]]  # per gold read point: every target it answers (all of a merged point's)
    # per original gold target span, in reading order: its tokens (scored ones only)
    target_tokens: list[list[int]]
    entity_tokens: list[list[int]]  # per entity mention
    doc_idx: int = 0
    target_points: list[int] = field(default_factory=list)  # per target span: its gold read point (`queries` index)


@dataclass
class DocResult:
    """One document's token NLLs (NaN at token 0, which has no context) and the reads that were made."""

    nll: np.ndarray
    # {"t", "queries", "results"} per read that put a call in context
    reads: list[dict] = field(default_factory=list)
    attempts: int = 0  # read points met (model's or gold), including reads that failed
    seconds: float = 0.0
    # `mix` rows: read point -> the weight p of its read
    p_open: dict[int, float] = field(default_factory=dict)


# MemLLM Table 1 (Mistral-7B, DocRED validation set): {row: (OVERALL, TARGET, ENTITY)}, the mean token NLLs the paper
# prints under "PPL", transcribed as printed. ① and ② read a memory written from Wikipedia, which this kit does not
# build: they have no row in `TABLE1_ROWS` above and are kept for printing beside ours.
# fmt: off
PAPER_TABLE1: dict[str, tuple[float, float, float] | None] = {
    "#1 base model":                    (1.774, 1.180, 1.420),
    "#2 read model, memory disabled":   (1.616, 1.151, 1.355),
    "① MW[Wikipedia (Full)] memory":    (1.606, 1.009, 1.322),
    "② MW[Wikipedia (Abs.)] memory":    (1.607, 1.013, 1.324),
    "③ MW[dev] memory":                 (1.589, 0.945, 1.289),
    "④ ③ + gold positions and queries": (1.578, 0.786, 1.287),
    "⑤ gold dev triples":               (1.589, 0.913, 1.290),
    "⑥ ⑤ + gold positions":             (1.579, 0.847, 1.268),
    "⑦ ⑥ + gold queries":               (1.562, 0.619, 1.202),
    "⑧ ⑦ + gold target added":          (1.544, 0.448, 1.152),
    "⑨ gold target only":               (1.535, 0.337, 1.124),
}
# fmt: on

# The row pairs (a, b) whose ordering the paper's §4.1 argues from: in each the paper finds b lower than a.
PAPER_CLAIMS: list[tuple[str, str]] = [
    ("#2 read model, memory disabled", "③ MW[dev] memory"),  # memory helps the read model
    ("⑤ gold dev triples", "⑥ ⑤ + gold positions"),  # reading at the gold position helps
    ("⑥ ⑤ + gold positions", "⑦ ⑥ + gold queries"),  # gold queries help
    ("⑦ ⑥ + gold queries", "⑧ ⑦ + gold target added"),  # retrieval misses the target
    ("⑧ ⑦ + gold target added", "⑨ gold target only"),  # other results make the reply ambiguous
]

METRICS = ("OVERALL", "TARGET", "ENTITY")


@dataclass
class Scores:
    """OVERALL / TARGET / ENTITY mean token NLL (the paper's "PPL") over documents, and what was read."""

    overall: float
    target: float
    entity: float
    n_tokens: int
    n_targets: int
    n_entities: int
    n_reads: int
    n_attempts: int
    seconds: float

    def row(self) -> dict[str, float]:
        """A table row: the NLLs the paper prints as "PPL", their exp (true perplexity), and counts."""
        return {
            "OVERALL NLL": self.overall,
            "TARGET NLL": self.target,
            "ENTITY NLL": self.entity,
            "OVERALL exp(NLL)": math.exp(self.overall),
            "TARGET exp(NLL)": math.exp(self.target),
            "ENTITY exp(NLL)": math.exp(self.entity),
            "reads": self.n_reads,
            "read points": self.n_attempts,
            "seconds": self.seconds,
        }


def _parts(doc: EvalDoc, res: DocResult, metric: str) -> tuple[float, int]:
    """One document's (sum, count) for a metric: token NLLs for OVERALL, span means for TARGET / ENTITY."""
    metric = metric.upper()
    if metric == "OVERALL":
        return float(np.nansum(res.nll)), int(np.sum(~np.isnan(res.nll)))
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}; got {metric!r}")
    spans = doc.target_tokens if metric == "TARGET" else doc.entity_tokens
    means = [float(np.mean(res.nll[tt])) for tt in spans if tt]
    return float(sum(means)), len(means)


def aggregate(docs: Sequence[EvalDoc], results: Sequence[DocResult]) -> Scores:
    """Official aggregation: OVERALL pooled over tokens; TARGET and ENTITY mean of per-span means."""
    vals, counts = {}, {}
    for m in METRICS:
        parts = [_parts(d, r, m) for d, r in zip(docs, results)]
        total, counts[m] = sum(p[0] for p in parts), sum(p[1] for p in parts)
        vals[m] = total / counts[m] if counts[m] else float("nan")
    return Scores(
        vals["OVERALL"],
        vals["TARGET"],
        vals["ENTITY"],
        counts["OVERALL"],
        counts["TARGET"],
        counts["ENTITY"],
        sum(len(r.reads) for r in results),
        sum(r.attempts for r in results),
        sum(r.seconds for r in results),
    )


def paired_bootstrap(
    docs: Sequence[EvalDoc],
    results_a: Sequence[DocResult],
    results_b: Sequence[DocResult],
    metric: str = "TARGET",
    n: int = 1000,
    seed: int = 0,
) -> tuple[float, float, float]:
    """(metric(a) - metric(b), 95% low, 95% high): documents resampled in pairs, so the interval is the rows' own."""
    a = np.array([_parts(d, r, metric) for d, r in zip(docs, results_a)], dtype=np.float64).reshape(-1, 2)
    b = np.array([_parts(d, r, metric) for d, r in zip(docs, results_b)], dtype=np.float64).reshape(-1, 2)
    if not (len(a) == len(b) == len(docs)):
        raise ValueError("both rows need one result per document")
    with np.errstate(invalid="ignore", divide="ignore"):
        diff = a[:, 0].sum() / a[:, 1].sum() - b[:, 0].sum() / b[:, 1].sum()
        idx = np.random.default_rng(seed).integers(0, len(docs), size=(n, len(docs)))
        # times each doc drawn
        w = np.stack([np.bincount(i, minlength=len(docs)) for i in idx]).astype(np.float64)
        diffs = (w @ a[:, 0]) / (w @ a[:, 1]) - (w @ b[:, 0]) / (w @ b[:, 1])
    if np.all(np.isnan(diffs)):
        return float(diff), float("nan"), float("nan")
    lo, hi = np.nanpercentile(diffs, [2.5, 97.5])
    return float(diff), float(lo), float(hi)


def row_interval(
    docs: Sequence[EvalDoc], results: Sequence[DocResult], metric: str, n: int = 1000, seed: int = 0
) -> tuple[float, float]:
    """95% bootstrap interval of one row's metric (documents resampled with replacement), for error bars."""
    x = np.array([_parts(d, r, metric) for d, r in zip(docs, results)], dtype=np.float64).reshape(-1, 2)
    idx = np.random.default_rng(seed).integers(0, len(docs), size=(n, len(docs)))
    w = np.stack([np.bincount(i, minlength=len(docs)) for i in idx]).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        lo, hi = np.nanpercentile((w @ x[:, 0]) / (w @ x[:, 1]), [2.5, 97.5])
    return float(lo), float(hi)


def claim_intervals(
    docs: Sequence[EvalDoc],
    per_doc: Mapping[str, Sequence[DocResult]],
    pairs: Sequence[tuple[str, str]] = tuple(PAPER_CLAIMS),
    metrics: Sequence[str] = METRICS,
    n: int = 1000,
    seed: int = 0,
    tol: float = 1e-6,
) -> list[dict]:
    """For each claimed pair (a, b) and metric: our a - b with its 95% interval, the paper's, and which order holds.

    "holds at 95%": "yes" (b lower, the paper's ordering: the interval lies above `tol`), "reversed" (a lower: below
    -`tol`), "undecided" (otherwise: float noise between rows that read nothing is no ordering). Pairs with a row
    missing from `per_doc` are left out.
    """
    out = []
    for a, b in pairs:
        if a not in per_doc or b not in per_doc:
            continue
        for m in metrics:
            diff, lo, hi = paired_bootstrap(docs, per_doc[a], per_doc[b], m, n=n, seed=seed)
            pa, pb = PAPER_TABLE1.get(a), PAPER_TABLE1.get(b)
            paper = pa[METRICS.index(m.upper())] - pb[METRICS.index(m.upper())] if pa and pb else float("nan")
            verdict = "yes" if lo > tol else "reversed" if hi < -tol else "undecided"
            out.append(
                {
                    "claim": f"{b.split(' ')[0]} < {a.split(' ')[0]}",
                    "metric": m.upper(),
                    "ours a - b": diff,
                    "95% low": lo,
                    "95% high": hi,
                    "paper a - b": round(paper, 3),
                    "holds at 95%": verdict,
                }
            )
    return out


def target_gap_by_reply(
    docs: Sequence[EvalDoc], results_a: Sequence[DocResult], results_b: Sequence[DocResult]
) -> dict[str, dict[str, float]]:
    """TARGET of rows a and b over target spans grouped by a's reply at the span's read: "targets only" (every
    result is one of the point's targets), "with other entities" (an ambiguous reply), "no read". Each group's
    share of the a - b gap is its spans' share times its own gap, so the shares add up to the whole gap."""
    groups: dict[str, list[tuple[float, float]]] = {}
    for doc, ra, rb in zip(docs, results_a, results_b):
        reply = {doc.gold_reads[r["t"]]: r["results"] for r in ra.reads if r["t"] in doc.gold_reads}
        for tt, k in zip(doc.target_tokens, doc.target_points):
            if not tt:
                continue
            res = reply.get(k)
            g = (
                "no read"
                if res is None
                else "targets only"
                if set(res) <= set(doc.targets[k])
                else "with other entities"
            )
            groups.setdefault(g, []).append((float(np.mean(ra.nll[tt])), float(np.mean(rb.nll[tt]))))
    n = sum(map(len, groups.values()))
    out = {}
    for g, pairs in sorted(groups.items()):
        a, b = np.array(pairs).T
        out[g] = {"spans": len(pairs), "a": a.mean(), "b": b.mean(), "a - b": a.mean() - b.mean()}
        out[g]["share of the gap"] = len(pairs) / n * out[g]["a - b"]
    return out


# ------------------------------------------------------------------------------------------------ documents
def _merged_points(row: Mapping[str, Any]) -> list[dict]:
    """Gold read points in reading order: points at one position ask all their queries; a point whose first query
    is the previous point's first query folds into it (official eval builder; idempotent)."""
    spans_all = row.get("read_target_spans_all") or [[s] for s in row["read_target_spans"]]
    points: list[dict] = []
    for k in sorted(range(len(row["read_chars"])), key=lambda k: row["read_chars"][k]):
        c, qs = row["read_chars"][k], [Triple(*q) for q in row["read_queries"][k]]
        prev = points[-1] if points else None
        if prev is not None and (prev["char"] == c or prev["queries"][:1] == qs[:1]):
            if prev["char"] == c:  # same position: one call asks all
                prev["queries"] += [q for q in qs if q not in prev["queries"]]
            prev["targets"] += [t for t in row["read_targets"][k] if t not in prev["targets"]]
            prev["spans"] += [list(s) for s in spans_all[k]]
            continue
        points.append({"char": c, "queries": qs, "targets": list(row["read_targets"][k]), "spans": spans_all[k]})
    return points


def prepare_doc(tokenizer: Any, row: Mapping[str, Any], max_tokens: int | None = None) -> EvalDoc:
    """Tokenize a `docs_dev` row in pieces cut before each gold read word; `max_tokens` truncates (for tests)."""
    text, points = row["text"], _merged_points(row)
    cuts = sorted({0, len(text), *(p["char"] - 1 for p in points if p["char"] > 0)})
    ids, offsets = [], []
    for a, b in zip(cuts, cuts[1:]):
        enc = tokenizer(text[a:b], add_special_tokens=False, return_offsets_mapping=True)
        ids += enc["input_ids"]
        offsets += [(a + s, a + e) for s, e in enc["offset_mapping"]]
    if max_tokens is not None:
        ids, offsets = ids[:max_tokens], offsets[:max_tokens]
    start = {s: i for i, (s, _) in enumerate(offsets)}

    def tokens(a: int, b: int) -> list[int]:
        return [i for i, (s, e) in enumerate(offsets) if i >= 1 and s < b and e > a]

    gold, queries, targets, target_tokens, target_points = {}, [], [], [], []
    for p in points:
        t = start.get(p["char"] - 1 if p["char"] > 0 else 0)
        if t is None or t == 0:
            continue  # a read at the very first token has no context; one cut off by max_tokens is dropped
        gold[t] = len(queries)
        target_tokens += [tokens(*s) for s in p["spans"]]
        target_points += [len(queries)] * len(p["spans"])
        queries.append(p["queries"])
        targets.append(p["targets"])
    entity_tokens = [tt for a, b, _ in row["mention_spans"] if (tt := tokens(a, b))]
    doc_idx = int(row.get("doc_idx", 0))
    return EvalDoc(ids, offsets, gold, queries, targets, target_tokens, entity_tokens, doc_idx, target_points)
