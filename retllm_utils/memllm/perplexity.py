"""MemLLM perplexity evaluation (MemLLM §4.1, Table 1; notebook 06): score a document while the read model queries
the memory.

A document is scored as one token sequence D (its plain text, tokens joined by spaces as `docred` builds it,
tokenized in pieces cut before each gold read word, so every gold read point is a token boundary). Token t
(t >= 1) is scored given the current context. With reads, a read at boundary p makes the context

    D[:p] + "({MEM_READ(q1;q2)-->" + "e1, e2})"   and the tokens D[p], D[p+1], ... are scored after it,

until the next read replaces it (earlier calls are removed from the context, as in the paper). The call and
the memory's reply are tokenized as pieces of their own, as `training.tokenize_with_spans` cuts training
examples and `generation` decodes, and the text after a call keeps its leading space (" artist"), as the read
training rows do (`examples` module doc), so every Table 1 row scores the same tokens D[1:].

Where reads happen (`ReadSetup.positions`): "none"; "gold" (the dev set's read points); "model": at every
boundary where the model's top next token is "({" (the call opener) in the current context. The query is the
model's greedy continuation of D[:p] + "({MEM_READ(" up to ")-->" (`queries="model"`: `generation.read_query`, the
controller's decoder too), or the gold queries.
A read that yields no valid query, no result, or the same queries as the call in context changes nothing (the
official code skips such reads too). Text tokens are scored with the "({" logit removed (`mask_open`), as the
official evaluation does where reads are disabled or fixed: the mass a read model puts on opening a call is not
a text prediction. Metrics as the official evaluate_v4_mistral.py: OVERALL = summed NLL / scored tokens of all
documents, TARGET = mean over gold read targets of the mean NLL of the target's tokens, ENTITY = the same over
every entity mention. The paper prints these mean token NLLs and calls them "PPL"; `Scores` gives both the NLL
and exp(NLL) (a real perplexity), labelled.

Two evaluators with one definition: `reference_doc` re-runs the model on the whole context at every token
(slow, as the paper's code scores; used by tests), `fast_doc` runs one teacher-forced pass over D and, at each
read, branches from a cropped copy of the prefix's KV cache (transformers DynamicCache), feeding the call, the
reply and the following tokens in chunks; its query decoding is a `generation.ModelStep` on that cropped cache.
They agree to float tolerance (tests: 1e-4 in mean NLL).
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch

from ..api import Triple, format_memllm_read_query, format_memllm_read_reply
from .generation import OPEN, ModelStep, Step, piece, read_query, token_id

__all__ = [
    "EvalDoc",
    "ReadSetup",
    "DocResult",
    "Scores",
    "TABLE1_ROWS",
    "PAPER_TABLE1",
    "prepare_doc",
    "reference_doc",
    "fast_doc",
    "plain_pass",
    "evaluate",
    "aggregate",
    "memory_lookup",
    "OPEN",
]

Lookup = Callable[[Sequence[Triple]], list]

# MemLLM Table 1 (Mistral-7B, Re-DocRED dev): still empty, to be filled from the paper (a later task) as
# {row: (OVERALL, TARGET, ENTITY)}; notebook 06 prints them beside ours, "n/a" while missing.
PAPER_TABLE1: dict[str, tuple[float, float, float] | None] = {}


@dataclass(frozen=True)
class ReadSetup:
    """One Table 1 row: model, memory, where reads happen, who writes the queries, what the memory answers."""

    model: str = "read"  # "base" (adapter off) | "read" (the read adapter)
    memory: str | None = None  # key of the memory the notebook passes ("mw_dev", "gold_dev"); None: no reads
    positions: str = "none"  # "none" | "model" (top token is "({") | "gold" (dev read points)
    queries: str = "model"  # "model" (generated) | "gold"
    results: str = "memory"  # "memory" | "memory+target" (gold target added) | "target" (gold target only)

    def __post_init__(self) -> None:
        if (
            self.positions not in ("none", "model", "gold")
            or self.queries not in ("model", "gold")
            or self.results not in ("memory", "memory+target", "target")
            or self.model not in ("base", "read")
        ):
            raise ValueError(f"bad ReadSetup {self}")
        if self.positions != "gold" and (self.queries == "gold" or self.results != "memory"):
            raise ValueError("gold queries and gold targets exist only at gold read positions")
        if self.positions != "none" and self.results != "target" and self.memory is None:
            raise ValueError("reads need a memory (or results='target')")


# The rows of MemLLM Table 1, in the paper's order.
TABLE1_ROWS: dict[str, ReadSetup] = {
    "#1 base model": ReadSetup(model="base"),
    "#2 read model, memory disabled": ReadSetup(),
    "③ MW[dev] memory": ReadSetup(memory="mw_dev", positions="model"),
    "④ ③ + gold positions and queries": ReadSetup(memory="mw_dev", positions="gold", queries="gold"),
    "⑤ gold dev triples": ReadSetup(memory="gold_dev", positions="model"),
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
    targets: list[list[str]]
    target_tokens: list[list[int]]  # per gold read: its target's tokens (scored ones only)
    entity_tokens: list[list[int]]  # per entity mention
    doc_idx: int = 0


def prepare_doc(tokenizer: Any, row: Mapping[str, Any], max_tokens: int | None = None) -> EvalDoc:
    """Tokenize a `docs_dev` row in pieces cut before each gold read word; `max_tokens` truncates (for tests)."""
    text = row["text"]
    cuts = sorted({0, len(text), *(c - 1 for c in row["read_chars"] if c > 0)})
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

    gold, queries, targets, target_tokens = {}, [], [], []
    for k, c in enumerate(row["read_chars"]):
        t = start.get(c - 1 if c > 0 else 0)
        if t is None or t == 0:
            continue  # a read at the very first token has no context; one cut off by max_tokens is dropped
        gold[t] = len(queries)
        queries.append([Triple(*q) for q in row["read_queries"][k]])
        targets.append(list(row["read_targets"][k]))
        target_tokens.append(tokens(*row["read_target_spans"][k]))
    entity_tokens = [tt for a, b, _ in row["mention_spans"] if (tt := tokens(a, b))]
    return EvalDoc(
        ids, offsets, gold, queries, targets, [tt for tt in target_tokens], entity_tokens, int(row.get("doc_idx", 0))
    )


@dataclass
class DocResult:
    """One document's token NLLs (NaN at token 0, which has no context) and the reads that were made."""

    nll: np.ndarray
    reads: list[dict] = field(default_factory=list)  # {"t", "queries", "results"} per read made
    attempts: int = 0  # read points met (model's or gold), including reads that changed nothing
    seconds: float = 0.0


def memory_lookup(memory: Any) -> Lookup:
    """A `TripleMemory` as the evaluators' lookup: queries -> entities (MemLLM thresholds and Q_thr)."""
    return lambda queries: memory.query_memllm([tuple(q) for q in queries])


# ------------------------------------------------------------------------------------------------ shared pieces
def _score(
    logits: torch.Tensor, targets: Sequence[int], open_id: int, mask_open: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(NLL of each target with "({" masked out if asked, argmax of the unmasked logits) for rows of logits."""
    logits = logits.float()
    top = logits.argmax(-1)
    if mask_open:
        logits = logits.clone()
        logits[:, open_id] = -torch.inf
    logp = torch.log_softmax(logits, dim=-1)
    tgt = torch.as_tensor(list(targets), device=logits.device)
    return (-logp[torch.arange(len(tgt), device=logits.device), tgt]).cpu().numpy().astype(
        np.float64
    ), top.cpu().numpy()


def _answer(setup: ReadSetup, queries: list[Triple], lookup: Lookup | None, targets: list[str]) -> list[str]:
    """What the memory (or the gold target) answers a read with, per the row's setting."""
    if setup.results == "target":
        return list(dict.fromkeys(targets))
    res = list(dict.fromkeys(lookup(queries))) if lookup is not None and queries else []
    if setup.results == "memory+target":
        res += [t for t in targets if t not in res]
    return res


class _Reads:
    """The read decisions both evaluators share: where a read is tried, its queries, its answer, if it counts."""

    def __init__(
        self,
        tokenizer: Any,
        doc: EvalDoc,
        setup: ReadSetup,
        lookup: Lookup | None,
        max_query_tokens: int,
        open_token: str,
    ):
        self.tok, self.doc, self.setup, self.lookup, self.max_new = tokenizer, doc, setup, lookup, max_query_tokens
        self.open_id = token_id(tokenizer, open_token)  # model-chosen reads need it to be one token
        self.active: list[Triple] | None = None
        self.result = DocResult(np.full(len(doc.ids), np.nan))

    def wanted(self, t: int, top: int) -> bool:
        if self.setup.positions == "gold":
            return t in self.doc.gold_reads
        return self.setup.positions == "model" and top == self.open_id

    def query(self, t: int, step: Step) -> tuple[list[Triple] | None, list[int]]:
        if self.setup.queries == "gold":
            qs = self.doc.queries[self.doc.gold_reads[t]]
            return qs, piece(self.tok, format_memllm_read_query(qs))
        q = read_query(step, self.tok, max_new_tokens=self.max_new)
        return q.queries, q.ids

    def answer(self, t: int, queries: list[Triple] | None) -> list[int] | None:
        """Reply ids if this read changes the context, else None."""
        self.result.attempts += 1
        if not queries or queries == self.active:
            return None
        k = self.doc.gold_reads.get(t)
        results = _answer(self.setup, queries, self.lookup, self.doc.targets[k] if k is not None else [])
        if not results:
            return None
        self.active = queries
        self.result.reads.append({"t": t, "queries": [list(q) for q in queries], "results": results})
        return piece(self.tok, format_memllm_read_reply(results))


def _forward(model: Any, ids: list[int], cache: Any = None) -> tuple[torch.Tensor, Any]:
    out = model(input_ids=torch.tensor([ids], device=model.device), past_key_values=cache, use_cache=True)
    return out.logits[0], out.past_key_values


# ------------------------------------------------------------------------------------------------ evaluators
@torch.no_grad()
def reference_doc(
    model: Any,
    tokenizer: Any,
    doc: EvalDoc,
    setup: ReadSetup,
    lookup: Lookup | None = None,
    *,
    mask_open: bool = True,
    max_query_tokens: int = 64,
    open_token: str = OPEN,
) -> DocResult:
    """Token by token: at every position the whole current context is run again (no cache). Slow; the definition."""
    t0 = time.perf_counter()
    r = _Reads(tokenizer, doc, setup, lookup, max_query_tokens, open_token)
    ids, ctx = doc.ids, doc.ids[:1]

    def last(context: list[int]) -> torch.Tensor:
        return model(input_ids=torch.tensor([context], device=model.device), logits_to_keep=1).logits[0, -1:]

    for t in range(1, len(ids)):
        logits = last(ctx)
        if r.wanted(t, int(logits[0].argmax())):
            gen: list[int] = []

            def step(new: list[int]) -> torch.Tensor:
                gen.extend(new)
                return last(ids[:t] + gen)[0]

            queries, call = r.query(t, step)
            reply = r.answer(t, queries)
            if reply is not None:
                ctx = ids[:t] + call + reply
                logits = last(ctx)
        r.result.nll[t] = _score(logits, [ids[t]], r.open_id, mask_open)[0][0]
        ctx = ctx + [ids[t]]
    r.result.seconds = time.perf_counter() - t0
    return r.result


@torch.no_grad()
def fast_doc(
    model: Any,
    tokenizer: Any,
    doc: EvalDoc,
    setup: ReadSetup,
    lookup: Lookup | None = None,
    *,
    mask_open: bool = True,
    max_query_tokens: int = 64,
    chunk: int = 32,
    open_token: str = OPEN,
) -> DocResult:
    """One teacher-forced pass over D; at each read a branch from a cropped copy of the prefix's KV cache.

    A branch feeds the call, the reply and then the document's tokens in chunks of `chunk` (model-chosen
    positions: the next read is only known once the branch's own logits are seen) or up to the next gold read.
    """
    t0 = time.perf_counter()
    r = _Reads(tokenizer, doc, setup, lookup, max_query_tokens, open_token)
    ids, n = doc.ids, len(doc.ids)
    if n < 2:
        return r.result
    logits, plain_cache = _forward(model, ids)
    plain_nll, plain_top = _score(logits[:-1], ids[1:], r.open_id, mask_open)  # row t-1 predicts ids[t]
    del logits
    gold_after = sorted(doc.gold_reads)
    # the current context: (p, nll, top, cache, fed) with nll[i] / top[i] for predicting ids[p + i]; p None: plain
    br: dict[str, Any] = {"p": None}

    def row(t: int) -> tuple[float, int]:
        if br["p"] is None:
            return plain_nll[t - 1], plain_top[t - 1]
        i = t - br["p"]
        while i >= len(br["nll"]):  # feed the next stretch of the document into the branch
            a = br["p"] + br["fed"]
            nxt_gold = next((g for g in gold_after if g > t), n) if setup.positions == "gold" else t + chunk
            b = min(n - 1, max(t, nxt_gold - 1))
            lg, br["cache"] = _forward(model, ids[a:b], br["cache"])
            nl, tp = _score(lg, ids[a + 1 : b + 1], r.open_id, mask_open)
            br["nll"], br["top"] = np.concatenate([br["nll"], nl]), np.concatenate([br["top"], tp])
            br["fed"] = b - br["p"]
        return br["nll"][i], br["top"][i]

    for t in range(1, n):
        # gold (or no) positions: decide before computing this position's logits, which a new read replaces
        if r.wanted(t, int(row(t)[1]) if setup.positions == "model" else -1):
            cache = copy.deepcopy(plain_cache)
            cache.crop(t - cache.get_seq_length())  # negative: tokens to drop (transformers >= 4.3x accept this)
            step = ModelStep(model, cache, last_logits_only=False)
            queries, call = r.query(t, step)
            reply = r.answer(t, queries)
            if reply is not None:
                if setup.queries == "gold":  # nothing of the call was fed yet
                    pending = call + reply
                else:  # the generated call is in the cache but for its last token
                    pending = call[-1:] + reply
                cache = step.cache
                nxt_gold = next((g for g in gold_after if g > t), n) if setup.positions == "gold" else t + chunk
                b = min(n - 1, max(t, nxt_gold - 1))
                lg, cache = _forward(model, pending + ids[t:b], cache)
                nl, tp = _score(lg[len(pending) - 1 :], ids[t : b + 1], r.open_id, mask_open)
                br.update(p=t, nll=nl, top=tp, cache=cache, fed=b - t)
        r.result.nll[t] = row(t)[0]
    r.result.seconds = time.perf_counter() - t0
    return r.result


@torch.no_grad()
def plain_pass(model: Any, doc: EvalDoc) -> float:
    """Seconds for one forward pass over the document: the floor any evaluator is compared with."""
    t0 = time.perf_counter()
    model(input_ids=torch.tensor([doc.ids], device=model.device))
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------------------------ metrics
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


def aggregate(docs: Sequence[EvalDoc], results: Sequence[DocResult]) -> Scores:
    """Official aggregation: OVERALL pooled over tokens; TARGET and ENTITY mean of per-span means."""
    total, count, tgt, ent = 0.0, 0, [], []
    for d, r in zip(docs, results):
        total += float(np.nansum(r.nll))
        count += int(np.sum(~np.isnan(r.nll)))
        tgt += [float(np.mean(r.nll[tt])) for tt in d.target_tokens if tt]
        ent += [float(np.mean(r.nll[tt])) for tt in d.entity_tokens if tt]
    nan = float("nan")
    return Scores(
        total / count if count else nan,
        float(np.mean(tgt)) if tgt else nan,
        float(np.mean(ent)) if ent else nan,
        count,
        len(tgt),
        len(ent),
        sum(len(r.reads) for r in results),
        sum(r.attempts for r in results),
        sum(r.seconds for r in results),
    )


def evaluate(
    model: Any,
    tokenizer: Any,
    docs: Sequence[EvalDoc],
    setup: ReadSetup,
    lookup: Lookup | None = None,
    *,
    fast: bool = True,
    **kw: Any,
) -> tuple[Scores, list[DocResult]]:
    """One Table 1 row over documents (the caller picks the model: adapter on, or `disable_adapter()` for base)."""
    fn = fast_doc if fast else reference_doc
    results = [fn(model, tokenizer, d, setup, lookup if setup.positions != "none" else None, **kw) for d in docs]
    return aggregate(docs, results), results
