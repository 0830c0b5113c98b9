"""MemLLM decoding, written once: the model step and the write call (MemLLM §3.2.1, appendix A; Table 4).

Every MemLLM decoder is greedy and driven by a `Step`: a callable that feeds token ids to the model and returns
the logits of the last position, the model keeping its KV cache (`ModelStep`). The controller, the write
evaluation of Table 4 (`write_quality`) and the Table 1 evaluators (`perplexity`, whose reads branch from a
cropped copy of the document's cache) all decode through the functions below, so they make the same choices.

Write call (`write_call`, §3.2.1): the prompt is ``pretext({USER_ST})sentence({USER_END})`` (`write_head`), then the
forced opener ``({MEM_WRITE-->``, tokenized as a piece of its own, as `training.tokenize_with_spans` cuts the
training example there. Greedy decoding (K = 0) stops at the first "})". Late stopping (appendix A, official
`LateStoppingProcessor`, K = 5): whenever "})" (the closing token) is the top token, the cut point is recorded with
score (log-prob so far + log p("})")) / sequence length, "})" is suppressed and the second-best token taken, until
K top "})" in a row bring no better score than the best (the official processor records K - 1 of them as cut
points and lets the K-th through); the call is then cut at the best cut point, also where decoding ends otherwise
(token limit, end token, a repeat).
Two rules of ours keep a small model's degenerate calls from costing every triple (the 135M write model often
loops, e.g. "X>>date of death>>2002;X>>date of death>>2002;..." until the token limit):
- repeats: decoding stops when finished triples of the call repeat earlier ones (`stop_on_repeat`): at the first
  repeat under greedy decoding, at the K-th under late stopping. Stopping at the first repeat would pre-empt late
  stopping: a small model repeats its last triple right after the first suppressed "})", so decoding would end at
  one cut point, where greedy decoding stops, and late stopping would write exactly what greedy decoding writes.
  K repeats bound the cost of a loop as K cut points bound late stopping itself, and no repeated
  triple reaches the call: repeated triples are removed from every decoded call (`WriteCall.text`), so a looping
  stretch before the best cut adds nothing.
- a call still open when decoding ends keeps its complete triples (the text up to its last ";").
`WriteCall.end` says how the call ended (`WRITE_ENDS`): "late stop" when late stopping recorded a cut point and cut
the call at its best (whatever ended decoding), else "closed" by the model's "})", "repeat", "limit" (token limit or
end token) or "stuck" (constrained, no allowed token among the candidates); a `collections.Counter` passed as
`stats` counts them. `WriteCall.cuts` is the number of cut points late stopping recorded.
Late stopping takes the greedy token until the first top "})" (and stops at the K-th repeat, greedy at the first), so
the greedy call lies on its way: a late-stopping `WriteCall` carries it as `.greedy`, equal to a K = 0 run's call
(tests), and Table 4 gets both decodings from one pass.
Constrained decoding (`constraint`, ours, off by default; `write_quality.WriteGrammar` allows entities that are spans
of the focus sentence or its pretext and Re-DocRED's relation names): at every step the tokens are tried best
first (at most `max_candidates`) and the first two that keep the call body allowed are the top two; "})" only
where the call is complete, the end token never. Scores stay the model's own log-probabilities.

The read model's decoders (a read query, text up to the next read) are in `reading`, on the same `Step`.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Protocol, Sequence

import numpy as np
import torch

from ..api import (
    MEMLLM_CLOSE,
    MEMLLM_WRITE_OPEN,
    USER_END,
    USER_ST,
    ApiError,
    MemWrite,
    Triple,
    parse_memllm,
)
from ..prompts import end_token

__all__ = [
    "Step",
    "ModelStep",
    "model_steps",
    "OPEN",
    "piece",
    "token_id",
    "end_id",
    "write_head",
    "WriteCall",
    "WRITE_ENDS",
    "CallConstraint",
    "write_call",
]

Step = Callable[[Sequence[int]], torch.Tensor]  # feed ids -> logits (vocabulary,) of the last position fed
OPEN = "({"  # the token a read starts with (MemLLM's START; one token in SmolLM2's vocabulary)
WRITE_ENDS = ("closed", "late stop", "repeat", "limit", "stuck")  # `WriteCall.end`: what ended a write call


def _cache_argument(model: Any) -> str:
    """transformers 5.24 renamed the KV cache argument `past_key_values` to `cache` (the old name warns, then goes)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model  # a PEFT model passes it through
    return _cache_argument_of(type(base))


@functools.cache
def _cache_argument_of(cls: type) -> str:
    """Looked up once per model class: forward_cached runs once per decoded token."""
    fn = getattr(cls, "forward", None) or cls.__call__
    return "cache" if "cache" in inspect.signature(fn).parameters else "past_key_values"


def forward_cached(model: Any, ids: Sequence[int], cache: Any = None, **kw: Any) -> tuple[torch.Tensor, Any]:
    """Logits (positions, vocabulary) of `ids` fed after `cache`, and the cache extended by them."""
    name = _cache_argument(model)
    out = model(input_ids=torch.tensor([list(ids)], device=model.device), use_cache=True, **{name: cache}, **kw)
    return out.logits[0], getattr(out, name)


class ModelStep:
    """A causal LM and its KV cache as a `Step`: each call feeds only the new ids."""

    def __init__(self, model: Any, cache: Any = None, *, last_logits_only: bool = True):
        # last_logits_only=False computes the logits of every fed position and returns the last: the fast evaluator
        # has always branched so, and the numbers differ from the last-only ones in the last float bits
        self.model, self.cache, self.last_logits_only = model, cache, last_logits_only

    @torch.no_grad()
    def __call__(self, ids: Sequence[int]) -> torch.Tensor:
        kw = {"logits_to_keep": 1} if self.last_logits_only else {}
        logits, self.cache = forward_cached(self.model, ids, self.cache, **kw)
        return logits[-1]


def model_steps(model: Any, adapter: str | None = None) -> Callable[[], ModelStep]:
    """Fresh `ModelStep`s of `model`, its PEFT adapter `adapter` switched on first (None: the model as it is)."""

    def new() -> ModelStep:
        if adapter is not None:
            model.set_adapter(adapter)
        return ModelStep(model)

    return new


def piece(tokenizer: Any, text: str) -> list[int]:
    """`text` tokenized as a piece of its own, as training cuts its examples at the edges of calls and replies."""
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def token_id(tokenizer: Any, text: str) -> int:
    """The id of `text`, which must be one token in this tokenizer (decoding decides on it token by token)."""
    ids = piece(tokenizer, text)
    if len(ids) != 1:
        raise ValueError(f"{text!r} is {len(ids)} tokens in this tokenizer; MemLLM decoding needs it to be one")
    return ids[0]


def end_id(tokenizer: Any) -> int | None:
    """The token that ends the text (`prompts.end_token`)."""
    return tokenizer.convert_tokens_to_ids(end_token(tokenizer))


# ------------------------------------------------------------------------------------------------ write
def write_head(pretext: str, sentence: str) -> str:
    """The write model's input for one focus sentence (§3.2.1): the preceding text, then the tagged sentence."""
    return pretext + USER_ST + sentence + USER_END


@dataclass(frozen=True)
class WriteCall:
    """A decoded write call, "({MEM_WRITE-->...})", how it ended (`WRITE_ENDS`), and late stopping's cut points."""

    text: str
    end: str
    cuts: int = field(default=0, compare=False)
    greedy: "WriteCall | None" = field(default=None, compare=False, repr=False)  # late stopping: greedy's call

    @property
    def triples(self) -> list[Triple]:
        return [t for c in parse_memllm(self.text) if isinstance(c, MemWrite) for t in c.triples]

    @property
    def errors(self) -> list[ApiError]:
        return [c for c in parse_memllm(self.text) if isinstance(c, ApiError)]


class CallConstraint(Protocol):
    """Allowed write-call bodies (constrained decoding): is `body` a valid prefix, or with `closed` a whole body."""

    def __call__(self, body: str, closed: bool = False) -> bool: ...


def _parts(body: str) -> list[str]:
    """The ";"-separated parts of a call body (an escaped "\\;" stays inside its term)."""
    return re.split(r"(?<!\\);", body)


def _unique(body: str) -> str:
    """`body` without triples that repeat an earlier one: a call never holds a triple twice (other parts are kept
    as written, for the parser to report)."""
    keep, seen = [], set()
    for p in _parts(body):
        key = tuple(t.strip() for t in re.split(r"(?<!\\)>>", p))
        if len(key) == 3 and key in seen:
            continue
        seen.add(key)
        keep.append(p)
    return ";".join(keep)


def _ranked(
    logits: torch.Tensor,
    tokenizer: Any,
    gen: list[int],
    constraint: CallConstraint | None,
    close_id: int,
    stop_id: int | None,
    max_candidates: int,
) -> list[int]:
    """The two best next tokens; under `constraint` the two best that keep the call allowed (the end token never)."""
    if constraint is None:
        return torch.topk(logits, 2).indices.tolist()
    text, out = tokenizer.decode(gen), []
    for c in torch.topk(logits, min(max_candidates, logits.shape[-1])).indices.tolist():
        if c == stop_id:
            continue
        if constraint(text, True) if c == close_id else constraint(tokenizer.decode(gen + [c])):
            out.append(c)
            if len(out) == 2:
                break
    return out


def write_call(
    step: Step,
    tokenizer: Any,
    head: str,
    *,
    late_stopping: int = 0,
    max_new_tokens: int = 128,
    stop_on_repeat: bool = True,
    constraint: CallConstraint | None = None,
    max_candidates: int = 256,
    stats: Counter | None = None,
) -> WriteCall:
    """The write call the model produces after `head` (`write_head`): greedy (K = 0) or late stopping (K > 0),
    optionally constrained (`constraint`: only tokens it allows, among the `max_candidates` best; see module doc)."""
    close_id, stop_id = token_id(tokenizer, MEMLLM_CLOSE), end_id(tokenizer)
    prompt = piece(tokenizer, head) + piece(tokenizer, MEMLLM_WRITE_OPEN)
    logits = step(prompt).float()
    gen: list[int] = []
    cum, cuts = 0.0, {}  # cut position in `gen` -> mean log-prob score
    end, n_done, repeats = "limit", 0, 0
    greedy: WriteCall | None = None  # late stopping: where greedy decoding (K = 0) would have ended, on the way
    for _ in range(max_new_tokens):
        logp = torch.log_softmax(logits, -1)
        top2 = _ranked(logits, tokenizer, gen, constraint, close_id, stop_id, max_candidates)
        if not top2:
            end = "stuck"
            break
        nxt = top2[0]
        if late_stopping and nxt == close_id and greedy is None:
            greedy = _finish(tokenizer, gen, "closed", {})
        if late_stopping and nxt == close_id:
            scores = list(cuts.values())
            best = int(np.argmax(scores)) if scores else 0
            if len(cuts) < late_stopping or best > len(cuts) - late_stopping:  # improved within the last K cuts
                cuts[len(gen)] = (cum + float(logp[close_id])) / (len(prompt) + len(gen))
                nxt = top2[1] if len(top2) > 1 else nxt
        cum += float(logp[nxt])
        if nxt == close_id:
            end = "closed"
            break
        if nxt == stop_id:
            break
        gen.append(nxt)
        if stop_on_repeat:
            done = [p.strip() for p in _parts(tokenizer.decode(gen))[:-1]]
            if len(done) > n_done:
                n_done = len(done)
                repeats += done[-1] in done[:-1]
                if late_stopping and repeats and greedy is None:
                    greedy = _finish(tokenizer, gen, "repeat", {})
                if repeats >= max(1, late_stopping):
                    end = "repeat"
                    break
        if len(gen) == max_new_tokens:
            break
        logits = step([nxt]).float()
    call = _finish(tokenizer, gen, end, cuts)
    if late_stopping:  # greedy decoding took the same tokens up to its own end (or to this one)
        call = replace(call, greedy=greedy or _finish(tokenizer, gen, end, {}))
    if stats is not None:
        stats[call.end] += 1
    return call


def _finish(tokenizer: Any, gen: list[int], end: str, cuts: dict[int, float]) -> WriteCall:
    """The call decoding `gen` left: cut at late stopping's best cut point, else by how decoding ended."""
    if cuts:  # late stopping: cut at the best cut point, whatever ended decoding
        end, body = "late stop", tokenizer.decode(gen[: max(cuts, key=lambda k: cuts[k])])
    elif end == "closed":
        body = tokenizer.decode(gen)
    elif end == "repeat":  # the complete triples before the repeat that ended decoding
        body = ";".join(_parts(tokenizer.decode(gen))[:-2])
    else:  # the token limit, the end token or no allowed token inside the call: its complete triples
        text = tokenizer.decode(gen)
        body = text[: max(text.rfind(";"), 0)]
    return WriteCall(MEMLLM_WRITE_OPEN + _unique(body) + MEMLLM_CLOSE, end, len(cuts))
