"""The controller between user, LLM and memory (RET-LLM §3, Figure 1): it runs the memory API so the user never sees
it. Notebooks 03, 08 and 09 and `retllm.evaluation`; MemLLM's controller (§3.2) is `memllm.controller`, built on the
generators, `Turn` and `neutralize` here.

RET-LLM turn: the model generates; each `[MEM_WRITE{..}]` is stored; on `[MEM_READ{..}:` generation *pauses*
(a stopping criterion inside `generate`), the controller queries the memory, appends the reply and the closing
`]`, and generation resumes to produce the answer. A write call that repeats one the model already made in the turn
ends the turn (`stop_repeated_writes`; beyond the paper): it is neither kept nor written again; so does a sentence of
an answer that repeats one before it (`stop_repeated_sentences`; beyond the paper), not kept either.

Only model-generated text is ever parsed for calls. User text is neutralised first (`[MEM_` → `[MEM `, found after
NFKC folding with format characters such as zero-width joiners and soft hyphens dropped, in any case), so markup a
user types is never executed, even by a model that copies it and folds look-alikes. A memory call that fails (bad
term, encoder or database error) is an "error" event in the turn's trace, never an exception to the user, and one
turn stores at most `max_writes` triples.

Decoding constraints beyond the paper (`copy_names`, `answer_form`) live in `chat.copying`, imported only when a
controller or generator is asked for them. Two read rules beyond the paper stay here: a read of two names and no
relation that finds nothing reads them the other way round, names exact (`either_order`), a read of one name held in
the role the memory never gives it asks for it in the other role (`either_role`), and with `answer_form` an empty reply
is answered in the same words (`no_answer`). Two write rules beyond the paper: a name listed with a written one that no
write holds is written as the list's written names are (`coordinated_writes`, `chat.coordination`); then, in a turn
that wrote and read nothing else, a name the statement says that no write holds is written as its likeliest call
(`named_writes`, `_named_writes`). One decoding rule acts before them: after a write, the next call writes the
statement's first name that no write holds, the model choosing its relation and object (`write_every_name`).
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

import torch
from transformers import LogitsProcessor, LogitsProcessorList, StoppingCriteria, StoppingCriteriaList

from . import api
from .api import ApiError, MemRead, MemWrite, Triple
from .prompts import chat_prompt, end_token

if TYPE_CHECKING:
    from .chat.copying import AllowedTerms

__all__ = [
    "Generator",
    "HFGenerator",
    "ForceThenFree",
    "ScriptedGenerator",
    "RetLLMController",
    "Turn",
    "error_event",
    "neutralize",
    "retllm_pending_read",
    "repeated_write",
    "repeated_sentence",
]

Pause = Callable[[str], bool]


class Generator(Protocol):
    """Continues `text`; stops at the end token or as soon as `pause(generated_so_far)` is true; given `allowed`,
    call terms copy only those phrases (called with it only by a controller with `copy_names=True`); given
    `answer`, the continuation states only those sentences (a controller with an `answer_form`; `in_order`: in their
    order, none skipped); given `names`, every name the continuation writes outside a call is one of them (a free
    answer with `copy_names=True`), and the reply's names one sentence says go together as the reply's (subject,
    object) `pairs` do."""

    def __call__(
        self,
        text: str | tuple[str, ...],
        pause: Pause | None = None,
        allowed: AllowedTerms | None = None,
        answer: Sequence[str] | None = None,
        names: Sequence[str] | None = None,
        pairs: Sequence[tuple[str, str]] | None = None,
        in_order: bool = False,
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


def retllm_pending_read(generated: str) -> bool:
    """True once the generated text ends a read query (`[MEM_READ{..}:`) that has no reply yet."""
    if not generated.endswith(":"):
        return False
    calls = api.parse_retllm(generated)
    return bool(calls) and isinstance(calls[-1], MemRead) and calls[-1].results is None


def repeated_write(generated: str, start: int = 0) -> MemWrite | None:
    """The first complete write call at or after `start` whose triples an earlier write call of the text already holds:
    the memory stores a fact once, and repeated write calls cost the wide build's adapter the exact match of 14 of 110
    test statements (notebook 03, before this rule). Found anywhere in the text, since the tokenizer can end a call
    inside a token (`}][`)."""
    if "}]" not in generated[start:]:
        return None
    seen: list[tuple] = []
    for c in api.parse_retllm(generated):
        if isinstance(c, MemWrite):
            if c.start >= start and c.triples in seen:
                return c
            seen.append(c.triples)
    return None


_SENTENCE = re.compile(r"\S[^.!?]*[.!?]+(?=\s|$)")


def repeated_sentence(answer: str) -> int | None:
    """Where the first complete sentence of `answer` that an earlier one of it already said begins, or None: a free
    answer that says a fact twice has run out of facts and goes on into made-up ones (notebook 03's free answers)."""
    seen: set[str] = set()
    for m in _SENTENCE.finditer(answer):
        if m.group() in seen:
            return m.start()
        seen.add(m.group())
    return None


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
        names: Sequence[str] | None = None,
        pairs: Sequence[tuple[str, str]] | None = None,
        in_order: bool = False,
    ) -> tuple[str, bool]:
        """`text` as a tuple of pieces tokenizes each piece on its own, e.g. (head, "({MEM_WRITE-->"), as training.
        `allowed`: call terms may only copy these phrases (`chat.copying.CopyTerms`); `answer`: the continuation
        states only these sentences, each once (`chat.copying.StateFacts`; `in_order`: in their order); `names`: the
        names it may write, and `pairs`: the reply's (subject, object) pairs they keep to
        (`chat.copying.CopyAnswerNames`)."""
        text, prompt_ids = self._prompt(text)
        ids = torch.tensor([prompt_ids], device=self.model.device)
        stops = StoppingCriteriaList([_PauseCriterion(self.tokenizer, ids.shape[1], pause)] if pause else [])
        kwargs = dict(self.generate_kwargs)
        extra = self._processors(ids.shape[1], allowed, answer, names, pairs, in_order)
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

    @torch.no_grad()
    def score(self, text: str, continuations: Sequence[str]) -> list[float]:
        """Each continuation's log-probability after `text` (its tokens' sum), the prefix run once: the controller
        ranks whole read calls with it (`RetLLMController(read_relations="likely")`)."""
        from .memllm.generation import forward_cached  # the KV-cache argument under its name in this transformers

        rows, cache = forward_cached(self.model, self.tokenizer(text, add_special_tokens=False)["input_ids"])
        last, result = rows[-1:], []
        for cont in continuations:
            new = self.tokenizer(cont, add_special_tokens=False)["input_ids"]
            rows, cache = forward_cached(self.model, new, cache)
            cache.crop(-len(new))  # back to the prefix for the next continuation
            logp = torch.cat([last, rows[:-1]]).float().log_softmax(-1)
            result.append(float(logp[torch.arange(len(new)), torch.tensor(new)].sum()))
        return result

    def _prompt(self, text: str | tuple[str, ...]) -> tuple[str, list[int]]:
        """(the text, its token ids): a tuple's pieces tokenized one by one, else `_ids`."""
        if isinstance(text, tuple):
            pieces = [self.tokenizer(piece, add_special_tokens=False)["input_ids"] for piece in text if piece]
            return "".join(text), [i for piece in pieces for i in piece]
        return text, self._ids(text)

    def _processors(
        self,
        prompt_len: int,
        allowed: AllowedTerms | None,
        answer: Sequence[str] | None,
        names: Sequence[str] | None = None,
        pairs: Sequence[tuple[str, str]] | None = None,
        in_order: bool = False,
    ) -> list[LogitsProcessor]:
        """The decoding constraints a call asks for (names copied, the answer held to the reply's sentences or its
        names)."""
        if allowed is None and not answer and names is None:
            return []
        from .chat.copying import CopyAnswerNames, CopyTerms, StateFacts

        extra: list[LogitsProcessor] = [CopyTerms(self.tokenizer, prompt_len, allowed)] if allowed is not None else []
        if answer:
            extra.append(StateFacts(self.tokenizer, prompt_len, answer, self.end_id, in_order=in_order))
        elif names is not None:
            extra.append(CopyAnswerNames(self.tokenizer, prompt_len, names, pairs or ()))
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
        names: Sequence[str] | None = None,
        pairs: Sequence[tuple[str, str]] | None = None,
        in_order: bool = False,
    ) -> tuple[str, bool]:
        """`allowed`, `answer`, `names`, `pairs` and `in_order` are ignored: a script says what it says."""
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


def _text(text: str | tuple[str, ...]) -> str:
    """A prompt given as pieces, as one string."""
    return text if isinstance(text, str) else "".join(text)


def error_event(message: str, text: Any, cause: str) -> dict:
    """A trace event for a call that failed: the turn goes on, the user never sees an exception. `cause`: "parse"
    (the model's call is malformed), "memory" (the memory refused or failed) or "cap" (`max_writes` reached)."""
    return {"event": "error", "message": message, "text": text, "cause": cause}


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
        known_names: Sequence[str] = (),
        relation_names: Sequence[str] | None = None,
        read_relations: bool | str = False,
        answer_form: Callable[[Triple], str | None] | None = None,
        stop_repeated_writes: bool = True,
        stop_repeated_sentences: bool = False,
        answer_names: bool = False,
        answer_pairs: bool = True,
        no_answer: str | None = None,
        either_order: bool = False,
        either_role: bool = False,
        read_names_from_user: bool = False,
        facts_in_order: bool = False,
        coordinated_writes: bool = False,
        named_writes: bool = False,
        write_every_name: bool = False,
    ):
        self.generator, self.memory, self.prompt_fn, self.max_calls = generator, memory, prompt_fn, max_calls
        # call terms copy the user's words or stored phrases (`chat.copying`; beyond the paper)
        self.copy_names = copy_names
        # names a call copies in their place when the user lower-cases or misspells them (e.g. the company list):
        # the call may not copy the user's variant, so the memory holds one spelling
        self.known_names = tuple(known_names)
        # and a read's names are the user's words (or a known name typed with a slip), not any stored name: a question
        # names its entity, and a stored look-alike ("Ilse Keller" for "Isabel Lombardi") is not asked for instead
        self.read_names_from_user = read_names_from_user
        # with `copy_names`: a write's relation is one of these or the user's own words (None: free)
        self.relation_names = None if relation_names is None else tuple(relation_names)
        # and a read's relation: one of them, a stored one or the user's words ("stored": not the user's words;
        # "words": free, then the stored relation sharing its content words is read; "likely": as "words", then a
        # read that finds nothing with a relation stored nowhere and not one of them asks again for the likeliest of
        # its entity's stored relations, or none, `_relation_by_likelihood`)
        self.read_relations = read_relations
        # the sentence stating one fact (None: no known form): an answer after a read then states only the reply's
        # facts, each once, in those words (`chat.copying.StateFacts`; beyond the paper)
        self.answer_form = answer_form
        # and states them in the reply's order, none skipped, as training answers do (the model still chooses where
        # to stop)
        self.facts_in_order = facts_in_order
        # with `answer_form`: the one sentence after an empty reply, in the same words (None: the model answers it,
        # under `answer_names`); the reply states no fact, so no answer may state one
        self.no_answer = no_answer
        # a read naming two entities and no relation ("the tie between A and B") that finds nothing reads them the
        # other way round too, names exact: the question does not depend on their order (beyond the paper)
        self.either_order = either_order
        # a read of one name that finds nothing, the name stored only in the other role, asks for it in that role,
        # names exact: "(IKEA, , ?)" for "With whom is IKEA connected?" where IKEA is only ever an object (beyond the
        # paper)
        self.either_role = either_role
        # after a turn's writes, a name listed with a written one ("Ann Lee and Bo Wu work at BMW") that no write
        # holds is written as the list's written names are, when they share one (role, relation, other term)
        # (`chat.coordination`; beyond the paper): the model sometimes stops a list short
        self.coordinated_writes = coordinated_writes
        # then, in a turn that wrote and made no read, when every write has one of `relation_names`, a name of two or
        # more capitalised words that the statement says and no write holds gets the likeliest whole write call with
        # one of those relations and one of the turn's written terms (`_named_writes`; beyond the paper): the model
        # sometimes ends a turn before a sentence's second clause ("Cisco, which Ann Lee runs, has Bo Wu as a
        # shareholder")
        self.named_writes = named_writes
        # with `copy_names` and `relation_names`: while the model writes (a statement, no "?"), after a write, while
        # every write of the turn has one of `relation_names` and it has read nothing, the next call is a write whose
        # subject is the statement's first name no write holds (`chat.coordination.EveryName`; beyond the paper): the
        # model writes a list's names in order and does not end the turn before the last, choosing each one's relation
        # and object itself
        self.write_every_name = write_every_name
        self.max_results = max_results  # a broad read on a large memory must not overflow the model's context
        self.max_writes = max_writes  # per turn: a runaway model cannot write thousands of triples
        # a write call that repeats one of the turn's ends the turn, unkept (`repeated_write`; beyond the paper)
        self.stop_repeated_writes = stop_repeated_writes
        # an answer's sentence that repeats one of it ends the turn, unkept (`repeated_sentence`; beyond the paper)
        self.stop_repeated_sentences = stop_repeated_sentences
        # with `copy_names`: a free answer's names are the reply's or the user's (`chat.copying.CopyAnswerNames`)
        self.answer_names = answer_names
        # and the reply's names one sentence says go together as the reply pairs them (a listed person is not put at
        # another's company)
        self.answer_pairs = answer_pairs

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, memory: Any, **kw: Any) -> "RetLLMController":
        gen = HFGenerator(model, tokenizer, max_new_tokens=kw.pop("max_new_tokens", 96))
        return cls(gen, memory, lambda u: chat_prompt(tokenizer, u), **kw)

    def chat(self, user_text: str) -> Turn:
        """One user turn: the model's calls run against the memory; failures are trace events, never exceptions."""
        user_text = neutralize(user_text)
        context = self.prompt_fn(user_text)
        copy = {}
        if self.copy_names:  # an extension: imported on the first turn that asks for it
            from .chat.copying import allowed_terms

            allowed = allowed_terms(
                user_text,
                self.memory,
                known=self.known_names,
                prefer_known=True,
                relations=self.relation_names,
                read_relations=self.read_relations,
                read_stored_names=not self.read_names_from_user,
            )
            if self.write_every_name and self.relation_names and "?" not in user_text:
                from .chat.coordination import EveryName

                every = EveryName(user_text, frozenset(self.relation_names), self.known_names)
                allowed = dataclasses.replace(allowed, every_name=every)
            copy = {"allowed": allowed}
        generated, trace, writes, dropped_writes, answer = "", [], 0, 0, {}
        answering = False  # after a read: the continuation is the answer
        for _ in range(self.max_calls + 1):
            cont, ended = self.generator(context + generated, self._pause(generated, answering), **copy, **answer)
            cont = self._respelled(cont)
            calls = api.parse_retllm(cont)
            repeat, reason = None, ""
            again = repeated_write(generated + cont, len(generated)) if self.stop_repeated_writes else None
            said = repeated_sentence(cont) if answering and self.stop_repeated_sentences else None
            if again is not None:  # the turn ends there: the repeat and anything after it are neither kept nor run
                cut, reason = again.start - len(generated), "repeats a write call of this turn: the turn ends"
            elif said is not None:  # the space before the repeat goes with it
                cut, reason = len(cont[:said].rstrip()), "repeats a sentence of this answer: the turn ends"
            if reason:
                cont, repeat = cont[:cut], cont[cut:]
                calls = [c for c in calls if c.end <= cut]
            read = next((c for c in calls if isinstance(c, MemRead)), None)
            # anything the model wrote after the query (e.g. a reply of its own) is dropped
            if read is not None:
                cont = cont[: api.read_query_end(cont, read)]
                calls = [c for c in calls if c.start < read.start] + [read]
            trace.append({"event": "model", "text": cont})
            call_at = len(generated) + (read.start if read is not None else 0)  # where the read call begins
            generated += cont
            for c in calls:
                if isinstance(c, MemWrite):
                    for t in c.triples:
                        writes, dropped_writes = self._write(t, c, trace, writes, dropped_writes)
                elif isinstance(c, ApiError):
                    trace.append(error_event(c.message, c.text, "parse"))
            if repeat is not None:
                trace.append({"event": "skip", "reason": reason, "text": repeat})
                break
            if read is None:
                break
            if self.read_relations in ("words", "likely"):  # a relation asked in other words: the stored one
                read = self._relation_by_words(read, trace)
            results = self._read(read, trace)
            if self.either_order and not results:
                results = self._other_way(read, trace)
            if self.either_role and not results:
                read, results = self._other_role(read, trace)
            if self.read_relations == "likely" and not results:  # nothing found, fuzzy included: asked again with
                # the entity's likeliest stored relation or none, if the relation is stored nowhere and not a name
                again = self._relation_by_likelihood(read, _text(context) + generated[:call_at], trace)
                results = self._read(again, trace) if again is not read else results
            generated += api.format_retllm_read_reply(results)
            answer, answering = self._answer_sentences(results, copy.get("allowed")), True
            if ended:
                break
        if self.coordinated_writes and writes:  # a listed name the model skipped: the fact its list implies
            from .chat.coordination import coordinated_writes

            done = [e["triple"] for e in trace if e["event"] == "write"]
            for t in map(self._as_known, coordinated_writes(user_text, done)):
                writes, dropped_writes = self._write(t, t, trace, writes, dropped_writes, rule="coordinated")
        if self.named_writes and writes and not any(e["event"] == "read" for e in trace):
            writes, dropped_writes = self._named_writes(
                user_text, _text(context) + generated, trace, writes, dropped_writes
            )
        if dropped_writes:
            trace.append(
                error_event(
                    f"write cap reached: {dropped_writes} writes of this turn dropped (max_writes={self.max_writes})",
                    None,
                    "cap",
                )
            )
        return Turn(answer=api.strip_retllm_calls(generated).strip(), model_text=generated, trace=trace)

    def _write(self, t: Triple, call: Any, trace: list[dict], writes: int, dropped: int, **tag: str) -> tuple[int, int]:
        """Stores `t` (a "write" event, `tag` added) unless the turn's `max_writes` are stored; any memory failure is
        an "error" event. The turn's (stored, dropped) counts after it."""
        if writes >= self.max_writes:
            return writes, dropped + 1
        try:
            trace.append({"event": "write", "triple": t, "new": self.memory.write(*t), **tag})
        except Exception as e:  # any memory failure is the turn's error event
            trace.append(error_event(str(e), call, "memory"))
            return writes, dropped
        return writes + 1, dropped

    def _named_writes(
        self, user_text: str, before: str, trace: list[dict], writes: int, dropped: int
    ) -> tuple[int, int]:
        """Each name the statement says that no write holds (`chat.coordination.unwritten_names`) is written as the
        likeliest whole call (`generator.score` after the turn's text `before`) of it with one of `relation_names`: as
        subject with a written object, or as object with a written subject (a triple already written left out); whole
        calls, as `_relation_by_likelihood` ranks reads. Every such name gets one write: there is no "none" option.
        Only when every write of the turn has one of `relation_names`: a statement in the user's own relation words
        ("Bo Lim moved to Graz and is the neighbour of Cy Ma") has its second fact among no ranked call, and the rule
        would store a wrong one. Skipped with a generator that cannot `score`. The turn's (stored, dropped) counts
        after it."""
        from .chat.coordination import unwritten_names

        done = [tuple(e["triple"]) for e in trace if e["event"] == "write"]
        if not hasattr(self.generator, "score") or not {t[1] for t in done} <= set(self.relation_names or ()):
            return writes, dropped
        names = unwritten_names(user_text, done)
        for i, name in enumerate(names):
            if writes >= self.max_writes:  # the cap reached: the rest are dropped unranked
                return writes, dropped + len(names) - i
            relations = sorted(self.relation_names or ())
            options = [Triple(name, r, o) for o in sorted({t[2] for t in done}) for r in relations]
            options += [Triple(s, r, name) for s in sorted({t[0] for t in done}) for r in relations]
            options = [t for t in options if t not in done and t[0] != t[2]]
            if not options:
                continue
            logp = self.generator.score(before, [api.format_retllm_write([t]) for t in options])
            best = options[max(range(len(options)), key=logp.__getitem__)]
            t = self._as_known(best)
            writes, dropped = self._write(t, t, trace, writes, dropped, rule="named")
            before += api.format_retllm_write([best])
            done.append(tuple(t))
        return writes, dropped

    def _as_known(self, t: Triple) -> Triple:
        """`t` with a subject or object that is a known name in other case spelt as the known name."""
        by_fold = {k.casefold(): k for k in self.known_names}  # per call: a caller may set `known_names` later
        return Triple(by_fold.get(t[0].casefold(), t[0]), t[1], by_fold.get(t[2].casefold(), t[2]))

    def _respelled(self, text: str) -> str:
        """`text` with each call's subject or object that is a known name in other case spelt as the known name:
        the model capitalises a name in a call ("EBay" for eBay), the memory and the calls keep one spelling."""
        if not self.copy_names or not self.known_names:
            return text
        for c in reversed(api.parse_retllm(text)):
            if not isinstance(c, (MemWrite, MemRead)):
                continue
            t = c.triples[0] if isinstance(c, MemWrite) else c.queries[0]
            new = self._as_known(t)
            if new == t:
                continue
            if isinstance(c, MemWrite):
                text = text[: c.start] + api.format_retllm_write([new]) + text[c.end :]
            else:
                text = text[: c.start] + api.format_retllm_read_query(new) + text[api.read_query_end(text, c) :]
        return text

    def _other_way(self, read: MemRead, trace: list[dict]) -> list[Triple]:
        """The reply to a read of two names and no relation asked the other way round, when the memory holds a fact
        between them that way, names exact (the fuzzy read's thresholds are per role: a person's name must not be
        matched by the organisations' rule); else none. Skipped over `STORED_CAP` facts."""
        from .chat.copying import STORED_CAP

        s, r, o = read.queries[0]
        if not (s and o) or r or len(self.memory) > STORED_CAP:
            return []
        if not any(t[0] == o and t[2] == s for t in self.memory):
            return []
        return self._read(dataclasses.replace(read, queries=((o, r, s), *read.queries[1:])), trace)

    def _other_role(self, read: MemRead, trace: list[dict]) -> tuple[MemRead, list[Triple]]:
        """A read of one name asked in the other role, with its reply, when the memory holds the name exactly in that
        role and never in the asked one (the model put a company where a person goes); else the read and none. The
        relation is kept, so one stored nowhere can still be asked again by likelihood. Skipped over `STORED_CAP`."""
        from .chat.copying import STORED_CAP

        s, r, o = read.queries[0]
        if bool(s) == bool(o) or len(self.memory) > STORED_CAP:
            return read, []
        name = s or o
        asked, other = (0, 2) if s else (2, 0)
        if any(t[asked] == name for t in self.memory) or not any(t[other] == name for t in self.memory):
            return read, []
        turned = dataclasses.replace(read, queries=(("", r, s) if s else (o, r, ""), *read.queries[1:]))
        return turned, self._read(turned, trace)

    def _read(self, read: MemRead, trace: list[dict]) -> list[Triple]:
        """The memory's reply to a read (at most `max_results`, the newest), a "read" event in the trace; a memory
        failure is an "error" event and an empty reply."""
        try:
            # the trace says which stored phrase stood in for a term
            if hasattr(self.memory, "read_explained"):
                res = self.memory.read_explained(read.queries[0])
                results, subs = list(res.matches), [s._asdict() for s in res.substitutions]
            else:
                results, subs = list(self.memory.read(read.queries[0])), []
        except Exception as e:  # the model gets an empty reply, the trace the reason
            trace.append(error_event(str(e), read, "memory"))
            return []
        dropped = max(len(results) - self.max_results, 0) if self.max_results is not None else 0
        results = results[dropped:]  # the newest writes (results come in write order)
        trace.append(
            {"event": "read", "query": read.queries[0], "results": results, "dropped": dropped, "substitutions": subs}
        )
        return results

    def _relation_by_words(self, read: MemRead, trace: list[dict]) -> MemRead:
        """The read with its relation replaced by the one stored relation sharing its content words, if any."""
        from .chat.copying import STORED_CAP, stored_relation_by_words

        s, r, o = read.queries[0]
        if not r or len(self.memory) > STORED_CAP:
            return read
        stored = stored_relation_by_words(r, {t[1] for t in self.memory})
        if stored is None:
            return read
        trace.append({"event": "relation", "asked": r, "read": stored})
        return dataclasses.replace(read, queries=((s, stored, o), *read.queries[1:]))

    def _relation_by_likelihood(self, read: MemRead, before: str, trace: list[dict]) -> MemRead:
        """A read that found nothing (not even a fuzzy match) with a relation the memory holds nowhere, and which is
        no name of `relation_names` (a known relation not stored is a true no-match), asks again for the relation
        stored for its subject (or object; both, exactly, when both are given) that makes the likeliest whole call, or
        for none; whole calls, because a greedy hold token by token runs a read that starts "is" into any stored "is
        ..." relation. Skipped over `STORED_CAP` facts or with a generator that cannot `score`."""
        from .chat.copying import STORED_CAP

        s, r, o = read.queries[0]
        if not r or not (s or o) or len(self.memory) > STORED_CAP or not hasattr(self.generator, "score"):
            return read
        facts = [t for t in self.memory if (not s or t[0] == s) and (not o or t[2] == o)]
        if not facts or r in {t[1] for t in self.memory} or r in (self.relation_names or ()):
            return read
        relations = [*sorted({t[1] for t in facts}), ""]
        logp = self.generator.score(before, [api.format_retllm_read_query((s, c, o)) for c in relations])
        best = relations[max(range(len(relations)), key=logp.__getitem__)]
        trace.append({"event": "relation", "asked": r, "read": best, "by": "likelihood"})
        return dataclasses.replace(read, queries=((s, best, o), *read.queries[1:]))

    def _pause(self, before: str, answering: bool = False) -> Pause:
        """Where generation stops for the controller: a read query to answer, or (after the turn's text `before`) a
        repeated write call, or (`answering`, after a read) a repeated sentence."""
        writes, sentences = self.stop_repeated_writes, answering and self.stop_repeated_sentences
        if not (writes or sentences):
            return retllm_pending_read
        return lambda cont: (
            retllm_pending_read(cont)
            or writes
            and repeated_write(before + cont, len(before)) is not None
            or sentences
            and repeated_sentence(cont) is not None
        )

    def _answer_sentences(self, results: Sequence[Triple], allowed: AllowedTerms | None = None) -> dict:
        """The generator's options after a reply: every fact's sentence (`answer`; `no_answer` for an empty reply),
        or, with no form for one of them, names copied (`allowed`) and `answer_names`, the names the answer may
        write: the reply's and the user's, and with `answer_pairs` the reply's (subject, object) pairs they keep to."""
        sentences = [self.answer_form(t) for t in results] if self.answer_form is not None else [None]
        if results and None not in sentences:
            return {"answer": sentences, **({"in_order": True} if self.facts_in_order else {})}
        if not results and self.answer_form is not None and self.no_answer is not None:
            return {"answer": [self.no_answer]}
        if allowed is not None and self.answer_names:
            names = sorted({x for t in results for x in (t[0], t[2])} | allowed.write)
            return {"names": names, "pairs": sorted({(t[0], t[2]) for t in results}) if self.answer_pairs else None}
        return {}
