"""MemLLM perplexity evaluation (MemLLM §4.1, Table 1; notebook 07): score a document while the read model queries
the memory.

A document is scored as one token sequence D (its plain text, tokens joined by spaces as `docred` builds it,
tokenized in pieces cut before each gold read word, so every gold read point is a token boundary). Token t
(t >= 1) is scored given the current context. A read at boundary p that succeeds makes the context

    D[:p] + "({MEM_READ(q1;q2)-->" + "e1, e2})"   and the tokens D[p], D[p+1], ... are scored after it,

until the next read point. Every read starts from the plain pretext D[:p]: the call in context is removed first
(§3.2.2), and a read that fails (no valid query or no result) leaves no call at all: the text continues from the
plain pretext, as the official code scores every segment from it. A read is never refused for repeating the
queries of the call before it, in any row: the official `perplexity_eval` re-issues it (only its inference loop
skips a repeated call). The call
and the memory's reply are tokenized as pieces of their own, as `training.tokenize_with_spans` cuts training
examples and `generation` decodes, and the text after a call keeps its leading space (" artist"), as the read
training rows do (`reads` module doc), so every Table 1 row scores the same tokens D[1:].

Gold read points (`prepare_doc`): points at one position are one read asking all their queries, and a point whose
first query is the previous point's first query folds into it, adding its targets (the official eval builder
merges them so); TARGET still averages over every original target span.

Where reads happen (`ReadSetup.positions`): "none"; "gold" (the dev set's read points); "model": at every boundary
where the model's top next token is "({" (the call opener) in the current context (the kit's argmax policy, row ⑤′).
The query is the model's greedy continuation of D[:p] + "({MEM_READ(" up to ")-->" (`queries="model"`:
`reading.read_query`, the controller's decoder too), or the gold queries. The reply holds at most 30 results
(`MAX_RESULTS`, as the official code truncates), plus the gold targets where the row adds them. The memory is read as
the official evaluation reads it (`memory_lookup`): exact matches first, and a broad query truncated rather than
dropped (Q_thr drops it only where `drop_broad` asks for the paper's text's rule).

Rows ③ and ⑤ as the official evaluation defines them (`ReadSetup.mix`, official `p_branching`): reads at the gold
positions, each weighted by the model's own probability of opening a call there. With read points t_1 < t_2 < ...,
every scored token x at a position i in [t_k, t_{k+1}) (the segment after read point k, up to the next one) gets

    NLL(i) = -log( p_k * p(x | D[:t_k] + call_k + reply_k + D[t_k:i]) + (1 - p_k) * p(x | D[:i]) ),

where p_k = P("({") at t_k. p_1 is taken in the plain context D[:t_1]; later p_k mix the two branches' P("({") at t_k
with the previous weight, p_k = p_{k-1} P("({" | read branch) + (1 - p_{k-1}) P("({" | D[:t_k]), as the official code
scores "({" at the end of each segment with the mixed loss and takes p from it (our reading of the official code;
the paper gives no formula). A read that fails leaves only the no-read branch: NLL(i) = -log p(x | D[:i]), and the
next p is P("({" | D[:t_{k+1}]). Tokens before t_1 are scored in the plain context.

Masking "({" (its logit removed before the softmax), as the official code: in every row without `mix` (memory
disabled, gold positions) every text token is scored with "({" masked: where the read decision is fixed, the mass a
read model puts on opening a call is not a text prediction. The argmax row masks it too (reads follow the argmax,
so a text token is scored given that no call opens). In the `mix` rows nothing is masked (the mass on "({" at other
positions stays a loss, as in the official code) except the first token of the no-read branch at a read point,
which is conditioned on not opening the call there. `mask_open=True/False` overrides the row's choice (tests).

Rows that decode their own queries may share a `query_cache` (a dict): a query depends only on its plain pretext
D[:p], so rows ③, ⑤ and ⑥ decode each gold point's query once (tests: same scores with and without it).

Two evaluators, one definition: `reference_doc` re-runs the model on the whole context at every token (slow, as
the paper's code scores; tests), `fast_doc` runs one pass over D and branches each read from a cropped copy of the
prefix's KV cache, decoding queries with a `generation.ModelStep` on it; they agree to 1e-4 in mean NLL (tests).
Metrics, the paper's numbers and bootstrap intervals: `table1`.
"""

from __future__ import annotations

import copy
import time
from typing import Any, Callable, Sequence

import numpy as np
import torch

from ..api import Triple, format_memllm_read_query, format_memllm_read_reply
from .generation import OPEN, ModelStep, Step, forward_cached, piece, token_id
from .reading import read_query
from .reads import MAX_RESULTS
from .table1 import (
    PAPER_CLAIMS,
    PAPER_TABLE1,
    TABLE1_ROWS,
    DocResult,
    EvalDoc,
    ReadSetup,
    Scores,
    aggregate,
    claim_intervals,
    paired_bootstrap,
    prepare_doc,
)

__all__ = [
    "EvalDoc",
    "ReadSetup",
    "DocResult",
    "Scores",
    "TABLE1_ROWS",
    "PAPER_TABLE1",
    "PAPER_CLAIMS",
    "MAX_RESULTS",
    "prepare_doc",
    "reference_doc",
    "fast_doc",
    "plain_pass",
    "evaluate",
    "aggregate",
    "paired_bootstrap",
    "claim_intervals",
    "memory_lookup",
    "OPEN",
]

Lookup = Callable[[Sequence[Triple]], list]
# the rows (`ReadSetup`, `TABLE1_ROWS`), the document and result types, metrics and intervals live in `table1`


def memory_lookup(memory: Any, *, exact_first: bool = True, drop_broad: bool = False) -> Lookup:
    """A `TripleMemory` as the evaluators' lookup: queries -> entities, read as the official evaluation reads it
    (exact matches first; a broad query truncated to `MAX_RESULTS` by the reply, not dropped; `drop_broad=True` is
    the paper's text's Q_thr rule)."""
    return lambda queries: memory.query_memllm(
        [tuple(q) for q in queries], exact_first=exact_first, drop_broad=drop_broad
    )


# ------------------------------------------------------------------------------------------------ shared pieces
def _stats(logits: torch.Tensor, targets: Sequence[int], open_id: int) -> np.ndarray:
    """Per row of logits: [NLL of the target, its NLL with "({" masked, P("({"), argmax] (float64, shape (k, 4))."""
    out = []
    for i in range(0, len(targets), 256):  # in slices: the masked copy of a long document's logits is large
        lg = logits[i : i + 256].float()
        tgt = torch.as_tensor(list(targets[i : i + 256]), device=lg.device)
        lse = torch.logsumexp(lg, -1)
        masked = lg.clone()
        masked[:, open_id] = -torch.inf
        lx = lg[torch.arange(len(tgt), device=lg.device), tgt]
        nll_masked = torch.where(tgt == open_id, torch.inf, torch.logsumexp(masked, -1) - lx)
        p_open = torch.exp(lg[:, open_id] - lse)
        out.append(torch.stack([lse - lx, nll_masked, p_open, lg.argmax(-1).float()], 1).cpu().numpy())
    return np.concatenate(out).astype(np.float64) if out else np.zeros((0, 4))


def _answer(setup: ReadSetup, queries: list[Triple], lookup: Lookup | None, targets: list[str]) -> list[str]:
    """What the memory (or the gold target) answers a read with, per the row's setting."""
    if setup.results == "target":
        return list(dict.fromkeys(targets))
    res = list(dict.fromkeys(lookup(queries)))[:MAX_RESULTS] if lookup is not None and queries else []
    if setup.results == "memory+target":
        res += [t for t in targets if t not in res]
    return res


class _Reads:
    """What both evaluators share: where a read is tried, its queries and answer, and how a token is scored."""

    def __init__(
        self,
        tokenizer: Any,
        doc: EvalDoc,
        setup: ReadSetup,
        lookup: Lookup | None,
        max_query_tokens: int,
        open_token: str,
        mask_open: bool | None,
        query_cache: dict | None = None,
    ):
        self.tok, self.doc, self.setup, self.lookup, self.max_new = tokenizer, doc, setup, lookup, max_query_tokens
        self.cache = query_cache  # generated queries by pretext, shared by rows evaluated with the same model
        self.open_id = token_id(tokenizer, open_token)  # model-chosen reads and p need it to be one token
        self.mask = setup.mask_open if mask_open is None else mask_open
        self.w = 1.0  # the weight of the read branch in context (`mix`: its p)
        self.result = DocResult(np.full(len(doc.ids), np.nan))

    def wanted(self, t: int, top: int) -> bool:
        if self.setup.positions == "gold":
            return t in self.doc.gold_reads
        return self.setup.positions == "model" and top == self.open_id

    def p_open(self, plain: np.ndarray, branch: np.ndarray | None) -> float:
        """P("({") at a read point: in the plain context, or mixed over the branches with the current weight."""
        return float(plain[2] if branch is None else self.w * branch[2] + (1 - self.w) * plain[2])

    def query(self, t: int, step: Step) -> tuple[list[Triple] | None, list[int], int]:
        """The read's queries, the call's ids, and how many of them the step was fed (all but the last if decoded)."""
        if self.setup.queries == "gold":
            qs = self.doc.queries[self.doc.gold_reads[t]]
            return qs, piece(self.tok, format_memllm_read_query(qs)), 0
        key = (tuple(self.doc.ids[:t]), self.max_new)  # a read's query depends on its plain pretext only
        if self.cache is not None and key in self.cache:
            q = self.cache[key]
            return q.queries, q.ids, 0
        q = read_query(step, self.tok, max_new_tokens=self.max_new)
        if self.cache is not None:
            self.cache[key] = q
        return q.queries, q.ids, len(q.ids) - 1

    def answer(self, t: int, queries: list[Triple] | None, p: float = 1.0) -> list[int] | None:
        """Reply ids if this read puts a call in context, else None (the read failed: no call stays in context)."""
        self.result.attempts += 1
        if self.setup.mix:
            self.result.p_open[t] = p
        k = self.doc.gold_reads.get(t)  # a repeated query is read again, as the official perplexity_eval does
        results = (
            _answer(self.setup, queries, self.lookup, self.doc.targets[k] if k is not None else []) if queries else []
        )
        if not results:
            return None
        self.w = p if self.setup.mix else 1.0
        self.result.reads.append({"t": t, "queries": [list(q) for q in queries], "results": results})
        return piece(self.tok, format_memllm_read_reply(results))

    def nll(self, t: int, plain: np.ndarray | None, branch: np.ndarray | None) -> float:
        """Token t's NLL from its plain-context and read-branch stats (module doc: masking and mixing)."""
        if branch is None or self.setup.mix:
            at_read = self.setup.mix and t in self.doc.gold_reads  # the no-read branch: no call opens here
            q0 = plain[1] if self.mask or at_read else plain[0]
            if branch is None:
                return float(q0)
        q1 = branch[1] if self.mask else branch[0]
        if not self.setup.mix:
            return float(q1)
        with np.errstate(divide="ignore"):
            return float(-np.logaddexp(np.log(self.w) - q1, np.log1p(-self.w) - q0))


# ------------------------------------------------------------------------------------------------ evaluators
@torch.no_grad()
def reference_doc(
    model: Any,
    tokenizer: Any,
    doc: EvalDoc,
    setup: ReadSetup,
    lookup: Lookup | None = None,
    *,
    mask_open: bool | None = None,
    max_query_tokens: int = 128,
    open_token: str = OPEN,
    query_cache: dict | None = None,
) -> DocResult:
    """Token by token: at every position each context the row needs is run again (no cache). Slow; the definition."""
    t0 = time.perf_counter()
    r = _Reads(tokenizer, doc, setup, lookup, max_query_tokens, open_token, mask_open, query_cache)
    ids = doc.ids
    call: tuple[int, list[int]] | None = None  # (read point, call + reply) in context

    def stats(context: list[int], t: int) -> np.ndarray:
        logits = model(input_ids=torch.tensor([context], device=model.device), logits_to_keep=1).logits[0, -1:]
        return _stats(logits, [ids[t]], r.open_id)[0]

    def branch(t: int) -> np.ndarray | None:
        return None if call is None else stats(ids[: call[0]] + call[1] + ids[call[0] : t], t)

    for t in range(1, len(ids)):
        # at a gold read the old branch matters only for p: the read replaces the context, succeeding or not
        b = None if setup.positions == "gold" and t in doc.gold_reads and not setup.mix else branch(t)
        plain = stats(ids[:t], t) if b is None or setup.mix else None
        if r.wanted(t, int((plain if b is None else b)[3])):
            p = r.p_open(plain, b) if setup.mix else 1.0
            gen: list[int] = []

            def step(new: list[int]) -> torch.Tensor:
                gen.extend(new)
                return model(input_ids=torch.tensor([ids[:t] + gen], device=model.device), logits_to_keep=1).logits[
                    0, -1
                ]

            queries, call_ids, _ = r.query(t, step)
            reply = r.answer(t, queries, p)
            call = None if reply is None else (t, call_ids + reply)
            b = branch(t)
            plain = stats(ids[:t], t) if plain is None and (b is None or setup.mix) else plain
        r.result.nll[t] = r.nll(t, plain, b)
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
    mask_open: bool | None = None,
    max_query_tokens: int = 128,
    chunk: int = 32,
    open_token: str = OPEN,
    query_cache: dict | None = None,
) -> DocResult:
    """One teacher-forced pass over D; at each read a branch from a cropped copy of the prefix's KV cache.

    A branch feeds the call, the reply and then the document's tokens up to the next gold read (in `mix` rows one
    token more: the next read's p needs the branch's P("({") there), or in chunks of `chunk` at model-chosen
    positions, where the next read is only known once the branch's own logits are seen.
    """
    t0 = time.perf_counter()
    r = _Reads(tokenizer, doc, setup, lookup, max_query_tokens, open_token, mask_open, query_cache)
    ids, n = doc.ids, len(doc.ids)
    if n < 2:
        return r.result
    logits, plain_cache = forward_cached(model, ids)
    plain = np.vstack([np.full((1, 4), np.nan), _stats(logits[:-1], ids[1:], r.open_id)])  # plain[t]: ids[t]'s
    del logits
    gold_after = sorted(doc.gold_reads)
    br: dict[str, Any] | None = None  # the read in context: p (its point), rows (stats from p on), cache, fed

    def upto(t: int) -> int:
        """The last position whose stats a branch fed from t must hold."""
        if setup.positions != "gold":
            return min(n - 1, t + chunk)
        nxt = next((g for g in gold_after if g > t), n)
        return min(n - 1, max(t, nxt if setup.mix else nxt - 1))

    def row(t: int) -> np.ndarray:
        while t - br["p"] >= len(br["rows"]):  # model-chosen positions: feed the next stretch of the document
            a, b = br["p"] + br["fed"], upto(t)
            lg, br["cache"] = forward_cached(model, ids[a:b], br["cache"])
            br["rows"] = np.vstack([br["rows"], _stats(lg, ids[a + 1 : b + 1], r.open_id)])
            br["fed"] = b - br["p"]
        return br["rows"][t - br["p"]]

    for t in range(1, n):
        skip = br is None or setup.positions == "gold" and t in doc.gold_reads and not setup.mix  # as the reference
        b = None if skip else row(t)
        if r.wanted(t, int((plain[t] if b is None else b)[3]) if setup.positions == "model" else -1):
            p = r.p_open(plain[t], b) if setup.mix else 1.0
            cache = copy.deepcopy(plain_cache)
            cache.crop(t - cache.get_seq_length())  # negative: tokens to drop (transformers >= 4.3x accept this)
            step = ModelStep(model, cache, last_logits_only=False)
            queries, call, fed = r.query(t, step)
            reply = r.answer(t, queries, p)
            br = b = None
            if reply is not None:
                pending = call[fed:] + reply  # a decoded query was fed to the step but its last token
                m = upto(t)
                # logits only from the reply's last token on: the call's and reply's own are never scored, and the
                # vocabulary projection is a fifth of a token's cost on SmolLM2
                lg, cache = forward_cached(model, pending + ids[t:m], step.cache, logits_to_keep=m - t + 1)
                br = {"p": t, "rows": _stats(lg, ids[t : m + 1], r.open_id), "cache": cache}
                br["fed"] = m - t
                b = br["rows"][0]
        r.result.nll[t] = r.nll(t, plain[t], b)
    r.result.seconds = time.perf_counter() - t0
    return r.result


@torch.no_grad()
def plain_pass(model: Any, doc: EvalDoc) -> float:
    """Seconds for one forward pass over the document: the floor any evaluator is compared with."""
    t0 = time.perf_counter()
    model(input_ids=torch.tensor([doc.ids], device=model.device))
    return time.perf_counter() - t0


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
