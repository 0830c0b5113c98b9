"""Names copied exactly: RET-LLM calls whose entity terms can only be what the user wrote (or, for reads, what the
memory stores). An extension beyond the paper (issue 14; notebook 03 reports it beside unconstrained decoding).

A 135M model copying a name sometimes respells it ("Pasquale Ballif" -> "Pascule Ballif"): the memory then holds a
person who does not exist, or a read asks about one. `CopyTerms` is a transformers `LogitsProcessor`: while the
model is inside the subject or object of a `[MEM_WRITE{..}]` / `[MEM_READ{..}:` call, only tokens that keep the
term a prefix of an allowed phrase (followed by the term's closing delimiter) may be chosen. Relations stay free.
Greedy decoding with it picks the model's best *allowed* token.

`invented_terms` measures the same thing after the fact, for any model: the call terms that are not allowed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Sequence

import torch
from transformers import LogitsProcessor

from . import api
from .api import RETLLM_READ_OPEN, RETLLM_WRITE_OPEN, MemRead, MemWrite

__all__ = ["AllowedTerms", "CopyTerms", "user_spans", "allowed_terms", "invented_terms", "STORED_CAP"]

STORED_CAP = 5000  # a read may use stored phrases only from a memory this small: listing a large one per turn is slow
_EDGE = "\"'“”‘’()[]{}.,;:!?"
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class AllowedTerms:
    """The phrases a write's and a read's subject/object may be (a read may also leave a term empty)."""

    write: frozenset[str]
    read: frozenset[str]


def user_spans(text: str, max_words: int = 6) -> set[str]:
    """Every run of up to `max_words` consecutive words of `text`, edge punctuation and a possessive 's cut off."""
    words = []
    for m in _WORD.finditer(text):
        start, end = m.start(), m.end()
        while start < end and text[start] in _EDGE:
            start += 1
        while end > start and text[end - 1] in _EDGE:
            end -= 1
        if start < end:
            words.append((start, end))
    spans = set()
    for i in range(len(words)):
        for j in range(i, min(i + max_words, len(words))):
            span = text[words[i][0] : words[j][1]]
            spans.add(span)
            if span.endswith(("'s", "’s")):
                spans.add(span[:-2])
    return spans


def allowed_terms(user_text: str, memory: Any = None, cap: int = STORED_CAP) -> AllowedTerms:
    """Writes copy the user's words; reads may also name any stored subject or object (memories up to `cap`)."""
    spans = frozenset(user_spans(user_text))
    stored: set[str] = set()
    if memory is not None and len(memory) <= cap:
        for s, _, o in memory:
            stored.update((s, o))
    return AllowedTerms(write=spans, read=spans | stored)


def _open_term(generated: str) -> tuple[str, str, bool] | None:
    """(partial term, closing delimiter, is a read) when `generated` ends inside a call's subject or object."""
    w, r = generated.rfind(RETLLM_WRITE_OPEN), generated.rfind(RETLLM_READ_OPEN)
    start, read = (w + len(RETLLM_WRITE_OPEN), False) if w > r else (r + len(RETLLM_READ_OPEN), True)
    if max(w, r) < 0 or "}" in generated[start:]:
        return None
    parts = generated[start:].split(">>")
    if len(parts) == 1:
        return parts[0], ">>", read
    if len(parts) == 3:
        return parts[2], "}", read
    return None  # the relation (free), or a malformed call the parser will refuse


class CopyTerms(LogitsProcessor):
    """Keeps every call's subject and object a copy of an allowed phrase (see the module docstring)."""

    _texts: dict[int, dict[int, str]] = {}  # per tokenizer: token id -> its text, decoded on first use

    def __init__(self, tokenizer: Any, prompt_len: int, allowed: AllowedTerms):
        self.tokenizer, self.prompt_len, self.allowed = tokenizer, prompt_len, allowed
        self.cache = CopyTerms._texts.setdefault(id(tokenizer), {})

    def _text(self, i: int) -> str:
        t = self.cache.get(i)
        if t is None:
            t = self.cache[i] = self.tokenizer.decode([i])
        return t

    def _ok(self, piece: str, targets: Sequence[str]) -> bool:
        if "\ufffd" in piece:  # part of a multi-byte character: allowed where a target goes on with non-ASCII
            return any(not t.isascii() for t in targets)
        return any(t.startswith(piece) or piece.startswith(t) for t in targets)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        if input_ids.shape[0] != 1:
            raise ValueError("CopyTerms decodes one sequence at a time (batch size 1)")
        state = _open_term(self.tokenizer.decode(input_ids[0, self.prompt_len :], skip_special_tokens=False))
        if state is None:
            return scores
        partial, close, read = state
        head = partial.lstrip()  # the parser strips terms: spaces before the first character are harmless
        targets = [
            p[len(head) :] + close for p in (self.allowed.read if read else self.allowed.write) if p.startswith(head)
        ]
        if read and not head:
            targets.append(close)  # a read may leave the term unknown
        if not targets:
            return scores  # no allowed phrase at all (e.g. an empty message): nothing to copy from
        for i in torch.argsort(scores[0], descending=True).tolist():  # the best allowed token, usually among the first
            piece = self._text(i)
            if self._ok(piece if head else piece.lstrip() or piece, targets):
                out = torch.full_like(scores, -float("inf"))
                out[0, i] = scores[0, i]
                return out
        return scores


def invented_terms(model_text: str, allowed: AllowedTerms) -> tuple[list[str], int]:
    """(terms of the model's calls that are not allowed, number of subject/object terms): the invented-name rate."""
    bad, n = [], 0
    for c in api.parse_retllm(model_text):
        if isinstance(c, MemWrite):
            terms, ok = [x for t in c.triples for x in (t[0], t[2])], allowed.write
        elif isinstance(c, MemRead):
            terms, ok = [x for q in c.queries for x in (q[0], q[2]) if x], allowed.read
        else:
            continue
        n += len(terms)
        bad += [x for x in terms if x not in ok]
    return bad, n
