"""MemLLM's controller (§3.2): the write model per focus sentence stores triples, the read model continues a text and
issues `({MEM_READ(..)-->` mid-text; answered calls are removed from the context when the next one is made, as in the
paper. Decoding (late stopping, the read query, when a read starts) is `generation`'s, the same functions Tables 1
and 4 are computed with (notebooks 07 and 09).

User text is neutralised as in RET-LLM's controller (`controller.neutralize`) and, on the write path, the dialect's
`>>` and `;` are escaped too, so a parroted sentence is never split into triples. A memory call that fails is an
"error" event in the trace or an `ApiError` beside the stored triples, never an exception.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, Sequence

from .. import api
from ..api import ApiError, Triple
from ..controller import Turn, error_event, neutralize
from . import generation, reading
from .reads import MAX_QUERIES

__all__ = ["MemLLMController", "neutralize_memllm"]

StepFactory = Callable[[], generation.Step]  # a fresh step (empty KV cache) of one MemLLM model


def neutralize_memllm(user_text: str) -> str:
    """`neutralize`, and MemLLM's triple delimiters escaped: a write model parroting the text writes no triples.

    Backslashes are escaped first, so a user's own `\\;` cannot turn the escape of the `;` into a literal backslash.
    """
    return neutralize(user_text).replace("\\", "\\\\").replace(">>", "\\>\\>").replace(";", "\\;")


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
        # max_writes: per sentence
        self.tokenizer, self.memory, self.max_writes = tokenizer, memory, max_writes
        self.write_steps, self.read_steps = write_steps, read_steps  # each call: a fresh step of that model
        self.late_stopping, self.max_write_tokens = late_stopping, max_write_tokens  # appendix A: K = 5
        self.max_query_tokens, self.max_new_tokens, self.max_calls = max_query_tokens, max_new_tokens, max_calls
        # how the write calls ended ("closed", "late stop", "repeat", "limit")
        self.write_ends: Counter = Counter()

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
        # the text without calls: where a new read starts from
        plain = generation.piece(tok, neutralize(text))
        if not plain:
            raise ValueError("generate continues a text: give it at least one token")
        n0, step = len(plain), self.read_steps()
        logits, context = step(plain), list(plain)
        active: list[Triple] | None = None
        reads_left, budget, first, trace = self.max_calls, self.max_new_tokens, True, []
        while True:
            out = reading.continue_text(
                step, logits, tok, max_new_tokens=budget, reads=reads_left > 0, read_first=first
            )
            plain, context, budget, first = plain + out.ids, context + out.ids, budget - len(out.ids), False
            if out.ids:
                trace.append({"event": "model", "text": tok.decode(out.ids)})
            if out.end != "read":
                break
            reads_left -= 1
            read_step = self.read_steps()
            q = reading.read_query(read_step, tok, plain, max_new_tokens=self.max_query_tokens, max_queries=MAX_QUERIES)
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
                trace.append(error_event(str(e), call, "memory"))
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
