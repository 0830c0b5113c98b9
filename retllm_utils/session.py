"""Talking to the memory (notebook 09): a RET-LLM chat and a MemLLM write/continue pad over live memories.

Notebook 09's widgets call these methods and nothing else, so its scripted papermill run and the unit tests exercise
what a user's clicks do. RET-LLM turns go through `RetLLMController` (the API hidden from the answer, RET-LLM §3);
MemLLM's through `MemLLMController` (§3.2: the write model per sentence, the read model reading mid-text).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from .api import Triple
from .controller import MemLLMController, RetLLMController, Turn

__all__ = ["ChatSession", "trace_lines", "sentences"]


def trace_lines(user: str, turn: Turn) -> list[str]:
    """A turn as RET-LLM's figures show it: the user, the model's calls, the memory's replies, errors, the answer."""
    lines = [f"USER  {user}"]
    for e in turn.trace:
        if e["event"] == "model" and e["text"]:
            lines.append(f"  LLM → controller : {e['text']}")
        elif e["event"] == "write":
            lines.append(f"  controller → memory: write {tuple(e['triple'])}{'' if e['new'] else ' (already stored)'}")
        elif e["event"] == "read":
            lines.append(f"  memory → LLM    : {[tuple(t) for t in e['results']]}")
        elif e["event"] == "error":
            lines.append(f"  ! not executed  : {e['message']}")
    lines.append(f"  LLM → user      : {turn.answer!r}")
    return lines


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
        """One chat turn; the memory reflects it when this returns."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError("say something: the message is empty")
        turn = self.controllers[self.model].chat(text)
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
