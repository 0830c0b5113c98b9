"""MemLLM's read-model decoders (§3.2.2; Table 1's evaluators and `MemLLMController`), on `generation`'s `Step`.

Read query (`read_query`): greedy after the forced opener ``({MEM_READ(`` up to ``)-->``, at most 128 tokens, every
valid query of the call kept (`call_queries`), as the official evaluation parses it. The chat controller passes
`max_queries` (3, the official training data's limit): there a call that starts a fourth query or repeats one (a
small model's loop) is abandoned at once.

Text (`continue_text`): the read model writes text until "({" (`OPEN`, the token a read starts with, as read training
rows end a continuation with it) is its top token, it ends the text, or the token limit; where a read is not allowed
the token is chosen with "({" removed, as the evaluators score text tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import torch

from ..api import MEMLLM_READ_OPEN, MEMLLM_READ_SEP, Triple, memllm_query_closed
from ..escaping import split_unescaped, unescape
from .generation import OPEN, Step, end_id, piece, token_id

__all__ = ["ReadQuery", "read_query", "call_queries", "Text", "continue_text"]


# ------------------------------------------------------------------------------------------------ read
@dataclass(frozen=True)
class ReadQuery:
    """A decoded read query: its queries (None: no valid call), the call's ids, and how decoding ended.

    `ids` are the opener and the generated tokens; the last one was not fed to the step (the caller feeds it with
    the memory's reply). `end`: "query", "invalid" (closed but not one valid read), "too many", "repeat", "end",
    "limit".
    """

    queries: list[Triple] | None
    ids: list[int]
    end: str


def read_query(
    step: Step,
    tokenizer: Any,
    prefix: Sequence[int] = (),
    *,
    max_new_tokens: int = 128,
    max_queries: int | None = None,
) -> ReadQuery:
    """Greedy query after `prefix` (ids the step has not seen yet) and the forced opener "({MEM_READ(", to ")-->".

    As the official evaluation (`perplexity_eval`): decoding runs to ")-->", the end token or `max_new_tokens`, and
    every valid query the call holds is kept, however many (a call cut short keeps its complete queries). With
    `max_queries` (the chat controller) a call that starts a query beyond it or repeats one is abandoned at once,
    so a looping model costs a user no waiting.
    """
    opener, stop_id = piece(tokenizer, MEMLLM_READ_OPEN), end_id(tokenizer)
    logits = step(list(prefix) + opener)
    gen: list[int] = []
    end = "limit"
    for _ in range(max_new_tokens):
        nxt = int(logits.argmax())
        if nxt == stop_id:
            end = "end"
            break
        gen.append(nxt)
        text = tokenizer.decode(opener + gen, skip_special_tokens=False)
        if max_queries is not None:
            done = [q.strip() for q in text[len(MEMLLM_READ_OPEN) :].split(";")[:-1]]
            if done and done[-1] in done[:-1]:
                return ReadQuery(None, opener + gen, "repeat")
            if len(done) >= max_queries:
                return ReadQuery(None, opener + gen, "too many")
        if memllm_query_closed(text):  # the call's own ")-->", not one escaped inside a term
            queries = call_queries(text[len(MEMLLM_READ_OPEN) : -len(MEMLLM_READ_SEP)])
            return ReadQuery(queries or None, opener + gen, "query" if queries else "invalid")
        if len(gen) == max_new_tokens:
            break
        logits = step([nxt])
    body = tokenizer.decode(gen, skip_special_tokens=False)
    return ReadQuery(call_queries(body[: max(body.rfind(";"), 0)]) or None, opener + gen, end)


def call_queries(body: str) -> list[Triple]:
    """The valid queries of a read call's body, in order, each once (official `validate_query`): three terms, a
    relation, and exactly one of subject and object; the invalid ones are skipped, not the call."""
    queries: list[Triple] = []
    for part in split_unescaped(body, ";"):
        terms = [unescape(t).strip() for t in split_unescaped(part, ">>")]
        if len(terms) == 3 and terms[1] and bool(terms[0]) != bool(terms[2]):
            q = Triple(*terms)
            queries += [q] if q not in queries else []
    return queries


# ------------------------------------------------------------------------------------------------ text
@dataclass
class Text:
    """Text tokens the read model wrote, why it stopped ("read", "end", "limit"), and the logits it stopped at."""

    ids: list[int]
    end: str
    logits: torch.Tensor | None = None


def continue_text(
    step: Step,
    logits: torch.Tensor,
    tokenizer: Any,
    *,
    max_new_tokens: int,
    reads: bool = True,
    read_first: bool = True,
) -> Text:
    """Greedy text from `logits` (the step's last), stopping before "({" where a read is allowed (`reads`; not for
    the first token when `read_first` is False, e.g. right after a read that changed nothing)."""
    open_id, stop_id = token_id(tokenizer, OPEN), end_id(tokenizer)
    ids: list[int] = []
    while len(ids) < max_new_tokens:
        nxt = int(logits.argmax())
        if nxt == open_id:
            if reads and (read_first or ids):
                return Text(ids, "read", logits)
            masked = logits.clone()
            masked[open_id] = -torch.inf
            nxt = int(masked.argmax())
        if nxt == stop_id:
            return Text(ids, "end", logits)
        ids.append(nxt)
        if len(ids) == max_new_tokens:
            break
        logits = step([nxt])
    return Text(ids, "limit", None)
