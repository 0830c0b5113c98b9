"""Notebook 09's widgets over a `ChatSession`: the RET-LLM chat tab (chat box, memory table, edit / delete / reset)
and the MemLLM tab (write a text, continue one). Every button calls the session and nothing else, so a test can press
them without a browser (`tests/test_session.py`); tests/test_browser.py drives the same tabs in JupyterLab.
"""

from __future__ import annotations

from typing import Any, Sequence

import ipywidgets as W
from IPython.display import display

from .session import ChatSession, trace_lines

__all__ = ["ChatTab", "MemLLMTab", "continue_lines", "fact_label", "parse_fact"]

PLACEHOLDER = "Tell me a fact, or ask a question…"


def fact_label(fact: Sequence[str]) -> str:
    """A stored fact as the fact picker and the edit box write it: "subject >> relation >> object"."""
    return " >> ".join(fact)


def parse_fact(text: str) -> tuple[str, str, str] | None:
    """A fact typed as "subject >> relation >> object"; None unless it has three non-empty parts."""
    parts = [p.strip() for p in text.split(">>")]
    return (parts[0], parts[1], parts[2]) if len(parts) == 3 and all(parts) else None


def continue_lines(session: ChatSession, text: str) -> list[str]:
    """What the Continue button prints: each read the MemLLM read model made, then the text ('|' where it resumed)."""
    turn = session.continue_text(text)
    reads = [f"  read {e['query']} -> {e['results']}" for e in turn.trace if e["event"] == "read"]
    return reads + [f"  {text}|{turn.answer}"]


class ChatTab:
    """The RET-LLM tab: a chat box whose turns print as `trace_lines`, the memory as a table, a fact picker listing
    the stored facts (one always picked while there are any) for Delete and Edit, and Reset."""

    def __init__(self, session: ChatSession):
        self.session = session
        self.log, self.memory_view = W.Output(), W.Output()
        self.message = W.Text(placeholder=PLACEHOLDER, continuous_update=False, layout=W.Layout(width="70%"))
        self.send_button = W.Button(description="Send", button_style="primary")
        self.model_pick = W.ToggleButtons(options=list(session.controllers), value=session.model, description="model")
        self.fact_pick = W.Dropdown(description="fact", layout=W.Layout(width="70%"))
        self.new_fact = W.Text(placeholder="subject >> relation >> object", layout=W.Layout(width="70%"))
        self.edit_button, self.forget_button = W.Button(description="Edit"), W.Button(description="Delete")
        self.reset_button = W.Button(description="Reset memory", button_style="warning")
        self.send_button.on_click(self.on_send)
        # Enter sends
        self.message.observe(lambda change: change["new"].strip() and self.on_send(), names="value")
        self.model_pick.observe(lambda change: session.use(change["new"]), names="value")
        self.edit_button.on_click(self.on_edit)
        self.forget_button.on_click(self.on_forget)
        self.reset_button.on_click(self.on_reset)
        self.refresh()
        self.box = W.VBox(
            [
                self.model_pick,
                W.HBox([self.message, self.send_button]),
                self.log,
                W.HTML("<b>Memory</b>"),
                self.memory_view,
                W.HBox([self.fact_pick, self.forget_button]),
                W.HBox([self.new_fact, self.edit_button]),
                self.reset_button,
            ]
        )

    def _print(self, *lines: str) -> None:
        with self.log:
            print(*lines)

    def refresh(self) -> None:
        """Redraw the memory table and the fact picker: the same fact stays picked while it is stored, else the
        first (a Dropdown whose options change picks nothing by itself, and Delete would then do nothing)."""
        table = self.session.table()
        facts = [tuple(r) for r in table.values.tolist()]
        picked = self.fact_pick.value
        self.fact_pick.options = [(fact_label(f), f) for f in facts]
        self.fact_pick.value = picked if picked in facts else (facts[0] if facts else None)
        self.memory_view.clear_output()
        with self.memory_view:
            display(table)

    def on_send(self, _: Any = None) -> None:
        """One turn for what the chat box holds; its trace lines, the answer last, go to the chat log."""
        text, self.message.value = self.message.value, ""
        try:
            self._print("\n".join(trace_lines(text, self.session.say(text))), "\n")
        except ValueError as e:  # an empty message
            self._print(f"! {e}")
        self.refresh()

    def on_edit(self, _: Any = None) -> None:
        new = parse_fact(self.new_fact.value)
        if self.fact_pick.value is None or new is None:
            self._print("! pick a fact and type the new one as subject >> relation >> object")
        else:
            self._print(f"edited {self.fact_pick.value} -> {new}: {self.session.edit(self.fact_pick.value, new)}")
        self.refresh()

    def on_forget(self, _: Any = None) -> None:
        if self.fact_pick.value is not None:
            self.session.forget(self.fact_pick.value)
        self.refresh()

    def on_reset(self, _: Any = None) -> None:
        self.session.reset()
        self.log.clear_output()
        self.refresh()


class MemLLMTab:
    """The MemLLM tab: a text for the write model (one call per sentence) and a prompt for the read model."""

    def __init__(self, session: ChatSession, text: str = "", prompt: str = ""):
        self.session = session
        self.text_in = W.Textarea(value=text, layout=W.Layout(width="90%", height="70px"))
        self.prompt_in = W.Text(value=prompt, layout=W.Layout(width="70%"))
        self.write_button = W.Button(description="Write to memory")
        self.continue_button = W.Button(description="Continue")
        self.log, self.view = W.Output(), W.Output()
        self.write_button.on_click(self.on_write)
        self.continue_button.on_click(self.on_continue)
        self.box = W.VBox(
            [self.text_in, self.write_button, self.view, W.HBox([self.prompt_in, self.continue_button]), self.log]
        )

    def on_write(self, _: Any = None) -> None:
        with self.log:
            print("stored:", self.session.write_text(self.text_in.value))
        self.view.clear_output()
        with self.view:
            display(self.session.memllm_table())

    def on_continue(self, _: Any = None) -> None:
        with self.log:
            print("\n".join(continue_lines(self.session, self.prompt_in.value)))
