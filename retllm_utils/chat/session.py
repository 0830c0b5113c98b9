"""Talking to the memory (notebook 09): a RET-LLM chat and a MemLLM write/continue pad over live memories.

Notebook 09's widgets (`chat.widgets`) call these methods and nothing else, so its scripted papermill run and the unit
tests exercise what a user's clicks do. RET-LLM turns go through `RetLLMController` (the API hidden from the answer,
RET-LLM §3); MemLLM's through `memllm.controller.MemLLMController` (§3.2: the write model per sentence, the read
model reading mid-text).

Where the model answers nothing (RET-LLM's adapter is trained to stay silent after a write), the chat tells the user
what the turn did instead (`in_words`): the facts it stored, or why nothing was stored, e.g. a call that did not
parse. That sentence is a "note" event in the turn's trace, so `trace_lines` shows it as the controller's, not the
model's.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..api import Triple
from ..controller import RetLLMController, Turn

if TYPE_CHECKING:
    from ..memllm.controller import MemLLMController

__all__ = ["ChatSession", "DEMO_SCRIPT", "in_words", "trace_lines", "sentences"]

FactWords = Callable[[Triple], str | None]  # one fact as a sentence; None: no words for its relation


def trace_lines(user: str, turn: Turn) -> list[str]:
    """A turn as RET-LLM's figures show it: the user, the model's calls, the memory's replies, errors, the answer."""
    lines = [f"USER  {user}"]
    for e in turn.trace:
        if e["event"] == "model" and e["text"]:
            lines.append(f"  LLM → controller : {e['text']}")
        elif e["event"] == "write":  # a write a controller rule added, not the model, says which rule
            known, rule = "" if e["new"] else " (already stored)", f" ({e['rule']} rule)" if e.get("rule") else ""
            lines.append(f"  controller → memory: write {tuple(e['triple'])}{known}{rule}")
        elif e["event"] == "relation" and e.get("by") == "likelihood":  # the likelier whole read call
            read = f"the stored {e['read']!r}" if e["read"] else "any relation"
            lines.append(f"  controller      : reads {e['asked']!r} as {read} (the likeliest call)")
        elif e["event"] == "relation":  # a read asked in other words than stored (RetLLMController)
            lines.append(f"  controller      : reads {e['asked']!r} as the stored {e['read']!r}")
        elif e["event"] == "read":
            lines.append(f"  memory → LLM    : {[tuple(t) for t in e['results']]}")
        elif e["event"] == "error":
            lines.append(f"  ! not executed  : {e['message']}")
        elif e["event"] == "skip":
            lines.append(f"  ✂ not kept      : {e['text']} ({e['reason']})")
        elif e["event"] == "note":
            lines.append(f"  controller → user: {e['text']!r}")
    if not any(e["event"] == "note" for e in turn.trace):
        lines.append(f"  LLM → user      : {turn.answer!r}")
    return lines


# notebook 09's scripted conversation: people, places and organisations in a user's own words
DEMO_SCRIPT = [
    "Ann Lee and Bo Wu are employed by Pfizer.",
    "Who is employed by Pfizer?",
    "Bo Wu was born in Lyon.",
    "Where was Bo Wu born?",
    "Ann Lee is married to Cleo Park.",
    "Who is Ann Lee's spouse?",
]


def _said(facts: Sequence[Sequence[str]], words: FactWords | None) -> str:
    """Facts as sentences: `words`' where it has them, else "subject relation object."."""
    return " ".join((words(Triple(*t)) if words else None) or f"{t[0]} {t[1]} {t[2]}." for t in facts)


def in_words(turn: Turn, words: FactWords | None = None) -> str:
    """What a turn did, for a user whose model said nothing: the facts stored (or already known), the calls that were
    not executed and why, what a read found; or that the model made no memory call at all."""
    trace = turn.trace
    new = [e["triple"] for e in trace if e["event"] == "write" and e["new"]]
    # a fact the model wrote twice in this turn was noted once: "already known" is only for what the memory held before
    known = [e["triple"] for e in trace if e["event"] == "write" and not e["new"] and e["triple"] not in new]
    known = [t for i, t in enumerate(known) if t not in known[:i]]
    errors = [e for e in trace if e["event"] == "error"]
    reads = [e for e in trace if e["event"] == "read"]
    parts = [f"Noted: {_said(new, words)}"] if new else []
    parts += [f"Already known: {_said(known, words)}"] if known else []
    for e in errors:
        why = "the model's memory call did not parse" if e.get("cause") == "parse" else "the memory call failed"
        parts.append(f"Not stored: {why} ({e['message']}).")
    found = [t for e in reads for t in e["results"]]
    if found:
        parts.append(f"The memory says: {_said(found, words)}")
    elif reads:
        parts.append("Nothing in the memory answers that.")
    return " ".join(parts) or "Nothing stored: the model made no memory call and gave no answer."


def sentences(text: str) -> list[str]:
    """A pasted paragraph as MemLLM's focus sentences (split after . ! or ? followed by a space)."""
    return [s for s in re.split(r"(?<=[.!?])\s+", text.strip()) if s]


@dataclass
class ChatSession:
    """One user's session: RET-LLM controllers by name over one memory, an optional MemLLM pad over its own."""

    controllers: dict[str, RetLLMController]  # e.g. {"trained": adapter, "base": zero-shot base model}
    new_memory: Callable[[], Any]  # a fresh RET-LLM memory (`reset`); the controllers share one
    memllm: MemLLMController | None = None
    new_memllm_memory: Callable[[], Any] | None = None
    model: str = ""
    history: list[tuple[str, Turn]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.controllers:
            raise ValueError("a session needs at least one RET-LLM controller")
        self.model = self.model or next(iter(self.controllers))
        self.use(self.model)
        self.memory = self.new_memory()
        for ctl in self.controllers.values():
            ctl.memory = self.memory

    def use(self, name: str) -> None:
        """Answer the next turns with another model (the memory stays)."""
        if name not in self.controllers:
            raise ValueError(f"model must be one of {', '.join(self.controllers)}; got {name!r}")
        self.model = name

    def say(self, text: str) -> Turn:
        """One chat turn; the memory reflects it when this returns. An empty answer becomes `in_words`' account of
        the turn, in the active controller's `answer_form` words where it has one."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("say something: the message is empty")
        ctl = self.controllers[self.model]
        turn = ctl.chat(text)
        if not turn.answer:
            note = in_words(turn, getattr(ctl, "answer_form", None))
            turn = dataclasses.replace(turn, answer=note, trace=[*turn.trace, {"event": "note", "text": note}])
        self.history.append((text, turn))
        return turn

    def table(self) -> Any:
        """The RET-LLM memory as a DataFrame (subject, relation, object), oldest first."""
        return self.memory.to_dataframe()

    def edit(self, old: Sequence[str], new: Sequence[str]) -> bool:
        """Change a stored fact by hand; False (nothing changed) if `old` is not stored."""
        if tuple(old) not in self.memory:
            return False
        self.memory.update(tuple(old), tuple(new))
        return True

    def forget(self, triple: Sequence[str]) -> bool:
        """Delete a stored fact; False if it is not stored."""
        return self.memory.delete(*triple)

    def reset(self) -> None:
        """An empty memory and no history (both models keep their weights)."""
        self.memory = self.new_memory()
        for ctl in self.controllers.values():
            ctl.memory = self.memory
        self.history.clear()

    # ------------------------------------------------------------------------------------------------ MemLLM
    def _memllm(self) -> MemLLMController:
        if self.memllm is None:
            raise RuntimeError("no MemLLM models in this session: run notebook 05 to train them")
        return self.memllm

    def write_text(self, text: str) -> list[Triple]:
        """MemLLM's write model over each sentence of a pasted text; the triples it stored."""
        parts = sentences(text)
        if not parts:
            raise ValueError("paste a text to write: it is empty")
        return self._memllm().write_document(parts)

    def continue_text(self, text: str) -> Turn:
        """MemLLM's read model continues `text`, reading from the MemLLM memory where it chooses to."""
        return self._memllm().generate(text)

    def memllm_table(self) -> Any:
        """The MemLLM memory as a DataFrame."""
        return self._memllm().memory.to_dataframe()

    def reset_memllm(self) -> None:
        """An empty MemLLM memory."""
        if self.new_memllm_memory is None:
            raise RuntimeError("this session cannot make a new MemLLM memory")
        self._memllm().memory = self.new_memllm_memory()
