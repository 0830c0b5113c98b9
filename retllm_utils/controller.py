"""The controller between user, LLM and memory (RET-LLM §3, Figure 1; MemLLM §3.2): it runs the memory API so the
user never sees it. RET-LLM: notebooks 03 and 08 and `retllm.evaluation`; MemLLM: a model with notebook 05's adapters.

RET-LLM turn: the model generates; each `[MEM_WRITE{..}]` is stored; on `[MEM_READ{..}:` generation *pauses*
(a stopping criterion inside `generate`), the controller queries the memory, appends the reply and the closing
`]`, and generation resumes to produce the answer. MemLLM: the write model runs per focus sentence and the read
model continues a text, issuing `({MEM_READ(..)-->` mid-text; answered calls are removed from the context when the
next one is made, as in the paper. MemLLM decoding (late stopping, the read query, when a read starts) is
`memllm.generation`'s, the same functions Tables 1 and 4 are computed with.

Only model-generated text is ever parsed for calls. User text is neutralised first (`[MEM_` → `[MEM `, found after
NFKC folding with format characters such as zero-width joiners and soft hyphens dropped, in any case), so markup a
user types is never executed, even by a model that copies it and folds look-alikes; on MemLLM's write path the
dialect's `>>` and `;` are escaped too, so a parroted sentence is never split into triples. A memory call that fails
(bad term, encoder or database error) is an "error" event in the turn's trace, never an exception to the user, and
one turn stores at most `max_writes` triples.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import torch
from transformers import LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from . import api
from .api import ApiError, MemRead, MemWrite, Triple
from .copying import AllowedTerms, CopyTerms, StateFacts, allowed_terms
from .memllm import generation
from .prompts import chat_prompt, end_token

__all__ = [
    "Generator",
    "HFGenerator",
    "ForceThenFree",
    "ScriptedGenerator",
    "RetLLMController",
    "MemLLMController",
    "Turn",
    "neutralize",
    "neutralize_memllm",
    "retllm_pending_read",
]

Pause = Callable[[str], bool]
StepFactory = Callable[[], generation.Step]  # a fresh step (empty KV cache) of one MemLLM model


class Generator(Protocol):
    """Continues `text`; stops at the end token or as soon as `pause(generated_so_far)` is true; given `allowed`,
    call terms copy only those phrases (called with it only by a controller with `copy_names=True`); given
    `answer`, the continuation states only those sentences (a controller with an `answer_form`)."""

    def __call__(
        self,
        text: str | tuple[str, ...],
        pause: Pause | None = None,
        allowed: AllowedTerms | None = None,
        answer: Sequence[str] | None = None,
    ) -> tuple[str, bool]: ...


_OPENER = re.compile(r"\[\s*MEM_|\(\s*\{\s*(MEM|USER)_", re.I)  # in the folded text
_SAFE = {"": "[MEM ", "MEM": "({MEM ", "USER": "({USER "}


def _folded(text: str) -> tuple[str, list[int]]:
    """`text` as a model that folds look-alikes may read it (NFKC per character, format characters dropped), with
    the index in `text` of each folded character."""
    out, origin = [], []
    for i, c in enumerate(text):
        for f in unicodedata.normalize("NFKC", c):
            if unicodedata.category(f) != "Cf":
                out.append(f)
                origin.append(i)
    return "".join(out), origin


def neutralize(user_text: str) -> str:
    """User text with API openers defused, so typed markup can never become a call, in whatever disguise."""
    folded, origin = (user_text, None) if user_text.isascii() else _folded(user_text)
    out, last = [], 0
    for m in _OPENER.finditer(folded):
        start, end = (m.start(), m.end()) if origin is None else (origin[m.start()], origin[m.end() - 1] + 1)
        out += [user_text[last:start], _SAFE[(m.group(1) or "").upper()]]
        last = end
    return "".join(out) + user_text[last:]


def neutralize_memllm(user_text: str) -> str:
    """`neutralize`, and MemLLM's triple delimiters escaped: a write model parroting the text writes no triples.

    Backslashes are escaped first, so a user's own `\\;` cannot turn the escape of the `;` into a literal backslash.
    """
    return neutralize(user_text).replace("\\", "\\\\").replace(">>", "\\>\\>").replace(";", "\\;")


def retllm_pending_read(generated: str) -> bool:
    """True once the generated text ends a read query (`[MEM_READ{..}:`) that has no reply yet."""
    if not generated.endswith(":"):
        return False
    calls = api.parse_retllm(generated)
    return bool(calls) and isinstance(calls[-1], MemRead) and calls[-1].results is None


class _PauseCriterion(StoppingCriteria):
    def __init__(self, tokenizer: Any, prompt_len: int, pause: Pause):
        self.tokenizer, self.prompt_len, self.pause = tokenizer, prompt_len, pause

    def __call__(self, input_ids: torch.LongTensor, scores: Any, **kw: Any) -> torch.BoolTensor:
        text = self.tokenizer.decode(input_ids[0, self.prompt_len :], skip_special_tokens=False)
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

    def __init__(
        self, model: Any, tokenizer: Any, *, max_new_tokens: int = 96, end: str | None = None, **generate_kwargs: Any
    ):
        self.model, self.tokenizer, self.max_new_tokens = model, tokenizer, max_new_tokens
        self.generate_kwargs = generate_kwargs  # e.g. a logits_processor
        self.end = end or end_token(tokenizer)
        self.end_id = tokenizer.convert_tokens_to_ids(self.end)
        self._last: tuple[str, list[int]] = ("", [])  # (text, ids) after the previous call

    def _ids(self, text: str) -> list[int]:
        prev_text, prev_ids = self._last
        if prev_text and text.startswith(prev_text):
            return prev_ids + self.tokenizer(text[len(prev_text) :], add_special_tokens=False)["input_ids"]
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    @torch.no_grad()
    def __call__(
        self,
        text: str | tuple[str, ...],
        pause: Pause | None = None,
        allowed: AllowedTerms | None = None,
        answer: Sequence[str] | None = None,
    ) -> tuple[str, bool]:
        """`text` as a tuple of pieces tokenizes each piece on its own, e.g. (head, "({MEM_WRITE-->"), as training.
        `allowed`: call terms may only copy these phrases (`copying.CopyTerms`); `answer`: the continuation states
        only these sentences, each once (`copying.StateFacts`)."""
        text, prompt_ids = self._prompt(text)
        ids = torch.tensor([prompt_ids], device=self.model.device)
        stops = StoppingCriteriaList([_PauseCriterion(self.tokenizer, ids.shape[1], pause)] if pause else [])
        kwargs = dict(self.generate_kwargs)
        extra = self._processors(ids.shape[1], allowed, answer)
        if extra:
            kwargs["logits_processor"] = LogitsProcessorList([*kwargs.get("logits_processor", []), *extra])
        out = self.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=self.max_new_tokens,
            do_sample=False,
            eos_token_id=self.end_id,
            pad_token_id=self.end_id,
            stopping_criteria=stops,
            **kwargs,
        )
        return self._done(text, prompt_ids, out[0, ids.shape[1] :].tolist())

    def _prompt(self, text: str | tuple[str, ...]) -> tuple[str, list[int]]:
        """(the text, its token ids): a tuple's pieces tokenized one by one, else `_ids`."""
        if isinstance(text, tuple):
            pieces = [self.tokenizer(piece, add_special_tokens=False)["input_ids"] for piece in text if piece]
            return "".join(text), [i for piece in pieces for i in piece]
        return text, self._ids(text)

    def _processors(
        self, prompt_len: int, allowed: AllowedTerms | None, answer: Sequence[str] | None
    ) -> list[LogitsProcessor]:
        """The decoding constraints a call asks for (names copied, the answer held to the reply's sentences)."""
        extra: list[LogitsProcessor] = [CopyTerms(self.tokenizer, prompt_len, allowed)] if allowed is not None else []
        if answer:
            extra.append(StateFacts(self.tokenizer, prompt_len, answer, self.end_id))
        return extra

    def _done(self, text: str, prompt_ids: list[int], new: list[int]) -> tuple[str, bool]:
        """(the continuation's text, whether the model ended its turn); remembers the ids for the next call."""
        ended = self.end_id in new
        if ended:
            new = new[: new.index(self.end_id)]
        cont = self.tokenizer.decode(new, skip_special_tokens=False)
        self._last = (text + cont, prompt_ids + new)
        return cont, ended


class ScriptedGenerator:
    """A deterministic stand-in model for tests: `respond(text)` gives the full continuation, which is
    emitted character by character and paused exactly where a real model's stopping criterion would."""

    def __init__(self, respond: Callable[[str], str]):
        self.respond = respond

    def __call__(
        self,
        text: str | tuple[str, ...],
        pause: Pause | None = None,
        allowed: AllowedTerms | None = None,
        answer: Sequence[str] | None = None,
    ) -> tuple[str, bool]:
        """`allowed` and `answer` are ignored: a script says what it says."""
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
    trace: list[dict] = field(default_factory=list)  # {"event": "write"|"read"|"skip"|"error"|"model", ...}


def _cut_after_query(text: str, read: MemRead) -> int:
    """End index of a read's query part (just after ':' or ')-->'), from the parsed call, so an escaped separator
    inside a term is not taken for it."""
    return api.read_query_end(text, read)


def _error(message: str, text: Any) -> dict:
    """A trace event for a call that failed: the turn goes on, the user never sees an exception."""
    return {"event": "error", "message": message, "text": text}


class RetLLMController:
    """RET-LLM chat: user ↔ model ↔ memory; the user only ever sees answers."""

    def __init__(
        self,
        generator: Generator,
        memory: Any,
        prompt_fn: Callable[[str], str],
        *,
        max_calls: int = 8,
        max_results: int | None = 30,
        max_writes: int = 32,
        copy_names: bool = False,
        answer_form: Callable[[Triple], str | None] | None = None,
    ):
        self.generator, self.memory, self.prompt_fn, self.max_calls = generator, memory, prompt_fn, max_calls
        self.copy_names = copy_names  # call terms copy the user's words or stored phrases (`copying`; beyond the paper)
        # the sentence stating one fact (None: no known form): an answer after a read then states only the reply's
        # facts, each once, in those words (`copying.StateFacts`; beyond the paper)
        self.answer_form = answer_form
        self.max_results = max_results  # a broad read on a large memory must not overflow the model's context
        self.max_writes = max_writes  # per turn: a runaway model cannot write thousands of triples

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, memory: Any, **kw: Any) -> "RetLLMController":
        gen = HFGenerator(model, tokenizer, max_new_tokens=kw.pop("max_new_tokens", 96))
        return cls(gen, memory, lambda u: chat_prompt(tokenizer, u), **kw)

    def chat(self, user_text: str) -> Turn:
        """One user turn: the model's calls run against the memory; failures are trace events, never exceptions."""
        user_text = neutralize(user_text)
        context = self.prompt_fn(user_text)
        copy = {"allowed": allowed_terms(user_text, self.memory)} if self.copy_names else {}
        generated, trace, writes, dropped_writes, answer = "", [], 0, 0, {}
        for _ in range(self.max_calls + 1):
            cont, ended = self.generator(context + generated, retllm_pending_read, **copy, **answer)
            calls = api.parse_retllm(cont)
            read = next((c for c in calls if isinstance(c, MemRead)), None)
            if read is not None:  # anything the model wrote after the query (e.g. a reply of its own) is dropped
                cont = cont[: _cut_after_query(cont, read)]
                calls = [c for c in calls if c.start < read.start] + [read]
            trace.append({"event": "model", "text": cont})
            generated += cont
            for c in calls:
                if isinstance(c, MemWrite):
                    for t in c.triples:
                        if writes >= self.max_writes:
                            dropped_writes += 1
                            continue
                        try:
                            trace.append({"event": "write", "triple": t, "new": self.memory.write(*t)})
                            writes += 1
                        except Exception as e:  # any memory failure is the turn's error event
                            trace.append(_error(str(e), c))
                elif isinstance(c, ApiError):
                    trace.append(_error(c.message, c.text))
            if read is None:
                break
            try:
                if hasattr(self.memory, "read_explained"):  # the trace says which stored phrase stood in for a term
                    res = self.memory.read_explained(read.queries[0])
                    results, subs = list(res.matches), [s._asdict() for s in res.substitutions]
                else:
                    results, subs = list(self.memory.read(read.queries[0])), []
            except Exception as e:  # the model gets an empty reply, the trace the reason
                trace.append(_error(str(e), read))
                results = []
            else:
                dropped = max(len(results) - self.max_results, 0) if self.max_results is not None else 0
                results = results[dropped:]  # the newest writes (results come in write order)
                trace.append(
                    {
                        "event": "read",
                        "query": read.queries[0],
                        "results": results,
                        "dropped": dropped,
                        "substitutions": subs,
                    }
                )
            generated += api.format_retllm_read_reply(results)
            answer = self._answer_sentences(results)
            if ended:
                break
        if dropped_writes:
            trace.append(
                _error(
                    f"write cap reached: {dropped_writes} writes of this turn dropped (max_writes={self.max_writes})",
                    None,
                )
            )
        return Turn(answer=api.strip_retllm_calls(generated).strip(), model_text=generated, trace=trace)

    def _answer_sentences(self, results: Sequence[Triple]) -> dict:
        """The generator's `answer` option after a reply: every fact's sentence, or nothing if one has no form."""
        if self.answer_form is None or not results:
            return {}
        sentences = [self.answer_form(t) for t in results]
        return {} if None in sentences else {"answer": sentences}


class MemLLMController:
    """MemLLM (§3.2): a write model per focus sentence, a read model that reads mid-text; decoding is `generation`'s."""

    def __init__(
        self,
        tokenizer: Any,
        memory: Any,
        *,
        write_steps: StepFactory | None = None,
        read_steps: StepFactory | None = None,
        late_stopping: int = 5,
        max_write_tokens: int = 128,
        max_query_tokens: int = 64,
        max_new_tokens: int = 96,
        max_calls: int = 8,
        max_writes: int = 32,
    ):
        self.tokenizer, self.memory, self.max_writes = tokenizer, memory, max_writes  # max_writes: per sentence
        self.write_steps, self.read_steps = write_steps, read_steps  # each call: a fresh step of that model
        self.late_stopping, self.max_write_tokens = late_stopping, max_write_tokens  # appendix A: K = 5
        self.max_query_tokens, self.max_new_tokens, self.max_calls = max_query_tokens, max_new_tokens, max_calls
        self.write_ends: Counter = Counter()  # how the write calls ended ("closed", "late stop", "repeat", "limit")

    @classmethod
    def from_model(
        cls,
        model: Any,
        tokenizer: Any,
        memory: Any,
        *,
        write_adapter: str | None = "write",
        read_adapter: str | None = "read",
        **kw: Any,
    ) -> "MemLLMController":
        """One PeftModel with two named adapters (notebook 05's), switched with `set_adapter` before each call."""
        return cls(
            tokenizer,
            memory,
            write_steps=generation.model_steps(model, write_adapter),
            read_steps=generation.model_steps(model, read_adapter),
            **kw,
        )

    def write_sentence(self, context: str, sentence: str) -> tuple[list[Triple], list[ApiError]]:
        """Run the write model on one focus sentence (`context`: the text before it) and store what it extracts."""
        head = generation.write_head(neutralize_memllm(context), neutralize_memllm(sentence))
        call = generation.write_call(
            self.write_steps(),
            self.tokenizer,
            head,
            late_stopping=self.late_stopping,
            max_new_tokens=self.max_write_tokens,
            stats=self.write_ends,
        )
        stored, errors = [], list(call.errors)
        for t in call.triples[: self.max_writes]:
            try:
                self.memory.write(*t)
                stored.append(t)
            except Exception as e:  # any memory failure is reported with the call, never raised
                errors.append(ApiError(str(e), 0, len(call.text), call.text))
        if len(call.triples) > self.max_writes:
            dropped = len(call.triples) - self.max_writes
            message = f"write cap reached: {dropped} triples dropped (max_writes={self.max_writes})"
            errors.append(ApiError(message, 0, len(call.text), call.text))
        return stored, errors

    def write_document(self, sentences: Sequence[str]) -> list[Triple]:
        """Write per focus sentence, each with the preceding sentences as context (joined as training joins them)."""
        out = []
        for i, s in enumerate(sentences):
            out += self.write_sentence(" ".join(sentences[:i]), s)[0]
        return out

    def generate(self, text: str) -> Turn:
        """Continue `text` with the read model, answering its reads from the memory; the answer has no API calls.

        Where "({" is the read model's top token, the query is decoded from the text without calls (an answered
        call leaves the context when the next one is made, as in the paper) and, if the memory answers it, the text
        goes on after the call and its reply. A read with no valid query, the queries of the call in context, or
        no result changes nothing (as in Table 1's evaluators); the next token is then chosen without "({".
        """
        tok = self.tokenizer
        plain = generation.piece(tok, neutralize(text))  # the text without calls: where a new read starts from
        if not plain:
            raise ValueError("generate continues a text: give it at least one token")
        n0, step = len(plain), self.read_steps()
        logits, context = step(plain), list(plain)
        active: list[Triple] | None = None
        reads_left, budget, first, trace = self.max_calls, self.max_new_tokens, True, []
        while True:
            out = generation.continue_text(
                step, logits, tok, max_new_tokens=budget, reads=reads_left > 0, read_first=first
            )
            plain, context, budget, first = plain + out.ids, context + out.ids, budget - len(out.ids), False
            if out.ids:
                trace.append({"event": "model", "text": tok.decode(out.ids)})
            if out.end != "read":
                break
            reads_left -= 1
            read_step = self.read_steps()
            q = generation.read_query(read_step, tok, plain, max_new_tokens=self.max_query_tokens)
            call = tok.decode(q.ids)
            skip = (
                f"no valid query ({q.end})"
                if q.queries is None
                else "the queries of the call in context"
                if q.queries == active
                else None
            )
            try:
                results = [] if skip else list(dict.fromkeys(self.memory.query_memllm(q.queries)))
            except Exception as e:  # a failed read changes nothing, as one with no result
                trace.append(_error(str(e), call))
                logits = out.logits
                continue
            if skip or not results:
                trace.append({"event": "skip", "reason": skip or "no result", "text": call})
                logits = out.logits
                continue
            reply = generation.piece(tok, api.format_memllm_read_reply(results))
            trace.append({"event": "read", "query": q.queries, "results": results, "text": call})
            step, active, context = read_step, q.queries, plain + q.ids + reply
            logits = step(q.ids[-1:] + reply)  # the call's last token was not fed yet
        return Turn(answer=tok.decode(plain[n0:]), model_text=tok.decode(context[n0:]), trace=trace)
