"""The controller between user, LLM and memory: it runs the memory API so the user never sees it.

RET-LLM turn: the model generates; each `[MEM_WRITE{..}]` is stored; on `[MEM_READ{..}:` generation
*pauses* (a stopping criterion inside `generate`), the controller queries the memory, appends the reply and
the closing `]`, and generation resumes to produce the answer. MemLLM mode: a write model is run per focus
sentence; a read model continues a text and may issue `({MEM_READ(..)-->` mid-text, answered the same way;
answered calls are removed from the context when the next one is made, as in the paper.

Only model-generated text is ever parsed for calls. User text is neutralised first (`[MEM_` → `[MEM `), so
markup a user types is never executed, even if the model copies it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import torch
from transformers import LogitsProcessor, StoppingCriteria, StoppingCriteriaList

from . import api
from .api import ApiError, MemRead, MemWrite, Triple
from .prompts import chat_prompt, end_token

__all__ = ["Generator", "HFGenerator", "ForceThenFree", "ScriptedGenerator", "RetLLMController", "MemLLMController", "Turn",
           "neutralize", "retllm_pending_read", "memllm_pending_read"]

Pause = Callable[[str], bool]


class Generator(Protocol):
    """Continues `text`; stops at the end token or as soon as `pause(generated_so_far)` is true."""

    def __call__(self, text: str | tuple[str, ...], pause: Pause | None = None) -> tuple[str, bool]: ...


def neutralize(user_text: str) -> str:
    """User text with API openers defused, so typed markup can never become a call."""
    return user_text.replace("[MEM_", "[MEM ").replace("({MEM_", "({MEM ").replace("({USER_", "({USER ")


def retllm_pending_read(generated: str) -> bool:
    """True once the generated text ends a read query (`[MEM_READ{..}:`) that has no reply yet."""
    if not generated.endswith(":"):
        return False
    calls = api.parse_retllm(generated)
    return bool(calls) and isinstance(calls[-1], MemRead) and calls[-1].results is None


def memllm_pending_read(generated: str) -> bool:
    """True once the generated text ends a MemLLM read query (`({MEM_READ(..)-->`)."""
    if not generated.endswith(api.MEMLLM_READ_SEP):
        return False
    calls = api.parse_memllm(generated)
    return bool(calls) and isinstance(calls[-1], MemRead) and calls[-1].results is None


class _PauseCriterion(StoppingCriteria):
    def __init__(self, tokenizer: Any, prompt_len: int, pause: Pause):
        self.tokenizer, self.prompt_len, self.pause = tokenizer, prompt_len, pause

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kw: Any) -> torch.BoolTensor:
        text = self.tokenizer.decode(input_ids[0, self.prompt_len:], skip_special_tokens=False)
        return torch.full((input_ids.shape[0],), self.pause(text), dtype=torch.bool, device=input_ids.device)


class ForceThenFree(LogitsProcessor):
    """Forces `ids` as the first generated tokens after `base_len`, then leaves the model free: shows the
    pause → memory → resume path on a model that has not learnt the API (tests, benchmarks, demos)."""

    def __init__(self, base_len: int, ids: list[int]):
        self.base_len, self.ids = base_len, ids

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        k = input_ids.shape[1] - self.base_len
        if 0 <= k < len(self.ids):
            forced = torch.full_like(scores, -float("inf"))
            forced[:, self.ids[k]] = 0
            return forced
        return scores


class HFGenerator:
    """Greedy generation with a transformers model; pauses through a StoppingCriteria, not after the fact.

    Text that extends the previous call's text (prompt + generated + the memory's reply) keeps the previous
    token ids and tokenizes only the new part, so the reply starts on a token boundary of its own, as in
    training (`training.tokenize_with_spans`); re-tokenizing the whole string would merge e.g. ':' + ']'.
    """

    def __init__(self, model: Any, tokenizer: Any, *, max_new_tokens: int = 96, end: str | None = None,
                 **generate_kwargs: Any):
        self.model, self.tokenizer, self.max_new_tokens = model, tokenizer, max_new_tokens
        self.generate_kwargs = generate_kwargs  # e.g. a logits_processor
        self.end = end or end_token(tokenizer)
        self.end_id = tokenizer.convert_tokens_to_ids(self.end)
        self._last: tuple[str, list[int]] = ("", [])  # (text, ids) after the previous call

    def _ids(self, text: str) -> list[int]:
        prev_text, prev_ids = self._last
        if prev_text and text.startswith(prev_text):
            return prev_ids + self.tokenizer(text[len(prev_text):], add_special_tokens=False)["input_ids"]
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    @torch.no_grad()
    def __call__(self, text: str | tuple[str, ...], pause: Pause | None = None) -> tuple[str, bool]:
        """`text` as a tuple of pieces tokenizes each piece on its own, e.g. (head, "({MEM_WRITE-->"), as training."""
        if isinstance(text, tuple):
            pieces = [self.tokenizer(piece, add_special_tokens=False)["input_ids"] for piece in text if piece]
            prompt_ids = [i for piece in pieces for i in piece]
            text = "".join(text)
        else:
            prompt_ids = self._ids(text)
        ids = torch.tensor([prompt_ids], device=self.model.device)
        stops = StoppingCriteriaList([_PauseCriterion(self.tokenizer, ids.shape[1], pause)] if pause else [])
        out = self.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=self.max_new_tokens,
                                  do_sample=False, eos_token_id=self.end_id, pad_token_id=self.end_id,
                                  stopping_criteria=stops, **self.generate_kwargs)
        new = out[0, ids.shape[1]:].tolist()
        ended = self.end_id in new
        if ended:
            new = new[:new.index(self.end_id)]
        cont = self.tokenizer.decode(new, skip_special_tokens=False)
        self._last = (text + cont, prompt_ids + new)
        return cont, ended


class ScriptedGenerator:
    """A deterministic stand-in model for tests: `respond(text)` gives the full continuation, which is
    emitted character by character and paused exactly where a real model's stopping criterion would."""

    def __init__(self, respond: Callable[[str], str]):
        self.respond = respond

    def __call__(self, text: str | tuple[str, ...], pause: Pause | None = None) -> tuple[str, bool]:
        full = self.respond(text if isinstance(text, str) else "".join(text))
        if pause:
            for i in range(1, len(full) + 1):
                if pause(full[:i]):
                    return full[:i], False
        return full, True


@dataclass
class Turn:
    """What a chat turn returns: the user-facing answer and, for notebooks, everything behind it."""

    answer: str
    model_text: str  # the assistant turn as the model saw it, calls and memory replies included
    trace: list[dict] = field(default_factory=list)  # {"event": "write"|"read"|"error"|"model", ...}


def _cut_after_query(text: str, read: MemRead, sep: str) -> int:
    """End index of a read's query part (just after ':' or ')-->')."""
    return text.index(sep, read.start) + len(sep)


class RetLLMController:
    """RET-LLM chat: user ↔ model ↔ memory; the user only ever sees answers."""

    def __init__(self, generator: Generator, memory: Any, prompt_fn: Callable[[str], str], *, max_calls: int = 8,
                 max_results: int | None = 30):
        self.generator, self.memory, self.prompt_fn, self.max_calls = generator, memory, prompt_fn, max_calls
        self.max_results = max_results  # a broad read on a large memory must not overflow the model's context

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, memory: Any, **kw: Any) -> "RetLLMController":
        gen = HFGenerator(model, tokenizer, max_new_tokens=kw.pop("max_new_tokens", 96))
        return cls(gen, memory, lambda u: chat_prompt(tokenizer, u), **kw)

    def chat(self, user_text: str) -> Turn:
        context = self.prompt_fn(neutralize(user_text))
        generated, trace = "", []
        for _ in range(self.max_calls + 1):
            cont, ended = self.generator(context + generated, retllm_pending_read)
            calls = api.parse_retllm(cont)
            read = next((c for c in calls if isinstance(c, MemRead)), None)
            if read is not None:  # anything the model wrote after the query (e.g. a reply of its own) is dropped
                cont = cont[:_cut_after_query(cont, read, "}:")]
                calls = [c for c in calls if c.start < read.start] + [read]
            trace.append({"event": "model", "text": cont})
            generated += cont
            for c in calls:
                if isinstance(c, MemWrite):
                    for t in c.triples:
                        try:
                            trace.append({"event": "write", "triple": t, "new": self.memory.write(*t)})
                        except ValueError as e:
                            trace.append({"event": "error", "message": str(e), "text": c})
                elif isinstance(c, ApiError):
                    trace.append({"event": "error", "message": c.message, "text": c.text})
            if read is None:
                break
            results = list(self.memory.read(read.queries[0]))
            dropped = max(len(results) - self.max_results, 0) if self.max_results is not None else 0
            results = results[dropped:]  # the newest writes (results come in write order)
            reply = api.format_retllm_read_reply(results)
            trace.append({"event": "read", "query": read.queries[0], "results": results, "dropped": dropped})
            generated += reply
            if ended:
                break
        return Turn(answer=api.strip_retllm_calls(generated).strip(), model_text=generated, trace=trace)


class MemLLMController:
    """MemLLM: memory-write per focus sentence (write model), reads initiated by the read model mid-text."""

    def __init__(self, write_generator: Generator | None, read_generator: Generator | None, memory: Any,
                 *, max_calls: int = 8):
        self.write_generator, self.read_generator = write_generator, read_generator
        self.memory, self.max_calls = memory, max_calls

    def write_sentence(self, context: str, sentence: str) -> tuple[list[Triple], list[ApiError]]:
        """Run the write model on one focus sentence and store what it extracts."""
        head = neutralize(context) + api.USER_ST + neutralize(sentence) + api.USER_END
        # the opener is its own piece, as in training, where the supervised span starts at it
        cont, _ = self.write_generator((head, api.MEMLLM_WRITE_OPEN), lambda g: api.MEMLLM_CLOSE in g)
        end = cont.find(api.MEMLLM_CLOSE)
        call = api.MEMLLM_WRITE_OPEN + (cont[:end + len(api.MEMLLM_CLOSE)] if end >= 0 else cont)
        parsed = api.parse_memllm(call)  # an unclosed call parses to an ApiError
        triples = [t for c in parsed if isinstance(c, MemWrite) for t in c.triples]
        errors = [c for c in parsed if isinstance(c, ApiError)]
        stored = []
        for t in triples:
            try:
                self.memory.write(*t); stored.append(t)
            except ValueError as e:
                errors.append(ApiError(str(e), 0, len(call), call))
        return stored, errors

    def write_document(self, sentences: list[str]) -> list[Triple]:
        """Write per focus sentence, each with the preceding sentences as context."""
        out = []
        for i, s in enumerate(sentences):
            out += self.write_sentence(" ".join(sentences[:i]) + (" " if i else ""), s)[0]
        return out

    def generate(self, text: str) -> Turn:
        """Continue `text` with the read model, answering its reads; the returned text has no API calls."""
        context, generated, trace = neutralize(text), "", []
        for _ in range(self.max_calls + 1):
            cont, ended = self.read_generator(context + generated, memllm_pending_read)
            calls = api.parse_memllm(cont)
            read = next((c for c in calls if isinstance(c, MemRead)), None)
            if read is None:
                trace.append({"event": "model", "text": cont})
                generated += cont
                break
            cont = cont[:_cut_after_query(cont, read, api.MEMLLM_READ_SEP)]
            results = self.memory.query_memllm(list(read.queries))
            trace += [{"event": "model", "text": cont},
                      {"event": "read", "query": list(read.queries), "results": list(results)}]
            # earlier (answered) calls leave the context; the current one stays while its continuation is written
            generated = api.strip_memllm_calls(generated) + cont + api.format_memllm_read_reply(results)
            if ended:
                break
        return Turn(answer=api.strip_memllm_calls(generated), model_text=generated, trace=trace)
