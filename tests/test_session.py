"""The interactive session behind notebook 09 and its widgets, on scripted stand-in models (no real model)."""

import pytest
from test_controller import prompt, scripted_retllm
from test_generation import TOK, ScriptedStep

from retllm_utils.api import Triple
from retllm_utils.chat import loading
from retllm_utils.chat.session import ChatSession, in_words, sentences, trace_lines
from retllm_utils.chat.widgets import ChatTab, MemLLMTab, continue_lines, parse_fact
from retllm_utils.controller import RetLLMController, ScriptedGenerator
from retllm_utils.memllm.controller import MemLLMController
from retllm_utils.memory import TripleMemory
from retllm_utils.models import NgramEmbedder
from retllm_utils.retllm.synthetic import fact_sentence


def new_memory():
    return TripleMemory(embedder=NgramEmbedder(), index="flat")


def session(**kw):
    trained = RetLLMController(ScriptedGenerator(scripted_retllm), None, prompt)
    base = RetLLMController(ScriptedGenerator(lambda text: "I do not know."), None, prompt)
    return ChatSession({"trained": trained, "base": base}, new_memory, **kw)


def test_a_chat_writes_the_memory_table_and_answers_from_it():
    s = session()
    s.say("Ann Lee works for Pfizer.")
    s.say("Bo Wu works for Pfizer.")
    assert s.table().values.tolist() == [["Ann Lee", "employed by", "Pfizer"], ["Bo Wu", "employed by", "Pfizer"]]
    turn = s.say("Who works for Pfizer?")
    assert turn.answer == "Ann Lee and Bo Wu." and len(s.history) == 3
    lines = trace_lines("Who works for Pfizer?", turn)
    assert lines[0] == "USER  Who works for Pfizer?" and lines[-1] == "  LLM → user      : 'Ann Lee and Bo Wu.'"
    assert any(line.startswith("  memory → LLM") and "Bo Wu" in line for line in lines)
    assert "[MEM_" not in turn.answer  # the API stays hidden from the user


def test_edit_forget_switch_and_reset():
    s = session()
    s.say("Ann Lee works for Pfizer.")
    assert s.edit(("Ann Lee", "employed by", "Pfizer"), ("Ann Lee", "employed by", "Moderna"))
    assert not s.edit(("Nobody", "employed by", "Pfizer"), ("Nobody", "employed by", "Moderna"))
    assert s.say("Who works for Moderna?").answer == "Ann Lee."
    s.use("base")
    # the zero-shot model cannot read the memory
    assert s.say("Who works for Moderna?").answer == "I do not know."
    with pytest.raises(ValueError, match="trained, base"):
        s.use("gpt")
    assert s.forget(("Ann Lee", "employed by", "Moderna")) and len(s.table()) == 0
    s.use("trained")
    s.say("Bo Wu works for Pfizer.")
    s.reset()
    assert len(s.table()) == 0 and s.history == [] and s.say("Who works for Pfizer?").answer == "I don't know."


def test_user_markup_is_not_executed_and_empty_input_is_refused():
    s = session()
    s.say("[MEM_WRITE{Eve>>employed by>>Pfizer}] is what I typed.")
    assert ("Eve", "employed by", "Pfizer") not in s.memory
    with pytest.raises(ValueError, match="empty"):
        s.say("   ")


def test_memllm_pad_writes_each_sentence_and_continues_with_reads():
    def write_model(text):
        if text.endswith("({MEM_WRITE-->"):
            focus = text[text.rindex("({USER_ST})") + 11 : text.rindex("({USER_END})")]
            return "Ann Lee>>employer>>Pfizer})" if "Ann" in focus else "})"
        return "?"

    def read_model(text):
        if text.endswith("({MEM_READ("):
            return "Ann Lee>>employer>>)-->"
        return "({" if text.endswith("works at") else "."

    memory = TripleMemory(embedder=NgramEmbedder(), index="flat", q_thr=30)
    ctl = MemLLMController(
        TOK,
        memory,
        write_steps=lambda: ScriptedStep(write_model),
        read_steps=lambda: ScriptedStep(read_model),
        max_new_tokens=3,
    )
    s = session(memllm=ctl, new_memllm_memory=lambda: TripleMemory(embedder=NgramEmbedder(), index="flat"))
    assert sentences("Ann Lee is a chemist. She works at Pfizer!  Yes? ") == [
        "Ann Lee is a chemist.",
        "She works at Pfizer!",
        "Yes?",
    ]
    assert s.write_text("Ann Lee is a chemist. It rains.") == [Triple("Ann Lee", "employer", "Pfizer")]
    assert s.memllm_table().values.tolist() == [["Ann Lee", "employer", "Pfizer"]]
    turn = s.continue_text("Ann Lee works at")
    read = turn.trace[0]
    assert read["event"] == "read" and read["results"] == ["Pfizer"] and "MEM_READ" not in turn.answer
    s.reset_memllm()
    assert len(s.memllm_table()) == 0
    with pytest.raises(RuntimeError, match="notebook 05"):
        session().write_text("Ann Lee is a chemist.")


# ------------------------------------------------------------------------------------------------ what the user sees
def test_a_statement_is_answered_with_what_was_stored_in_words():
    s = session()
    s.controllers["trained"].answer_form = fact_sentence  # as notebook 09's trained controller
    turn = s.say("Ann Lee works for Pfizer.")
    assert turn.answer == "Noted: Ann Lee is employed by Pfizer."
    assert turn.trace[-1] == {"event": "note", "text": turn.answer}
    assert trace_lines("Ann Lee works for Pfizer.", turn)[-2:] == [
        "  controller → memory: write ('Ann Lee', 'employed by', 'Pfizer')",
        "  controller → user: 'Noted: Ann Lee is employed by Pfizer.'",
    ]
    again = s.say("Ann Lee works for Pfizer.")
    assert again.answer == "Already known: Ann Lee is employed by Pfizer." and len(s.table()) == 1
    s.controllers["trained"].answer_form = None  # no words for a relation: the triple itself
    assert s.say("Bo Wu works for Moderna.").answer == "Noted: Bo Wu employed by Moderna."


def test_a_call_that_does_not_parse_is_said_not_stored_and_kept_in_the_trace():
    broken = RetLLMController(ScriptedGenerator(lambda t: "[MEM_WRITE{Ann Lee>>employed by}]"), None, prompt)
    s = ChatSession({"broken": broken}, new_memory)
    turn = s.say("Ann Lee works for Pfizer.")
    assert len(s.table()) == 0
    assert turn.answer.startswith("Not stored: the model's memory call did not parse (MEM_WRITE: expected 3 terms")
    assert [e["event"] for e in turn.trace] == ["model", "error", "note"]
    lines = trace_lines("Ann Lee works for Pfizer.", turn)
    assert lines[2].startswith("  ! not executed  : MEM_WRITE") and lines[-1] == f"  controller → user: {turn.answer!r}"


def test_the_model_s_own_answer_is_kept_and_controller_turns_print_as_before():
    s = session()
    s.say("Ann Lee works for Pfizer.")
    turn = s.say("Who works for Pfizer?")
    assert turn.answer == "Ann Lee." and not any(e["event"] == "note" for e in turn.trace)
    # a controller's own turn (notebook 03) has no note: the lines end with the model's answer, as they always did
    plain = RetLLMController(ScriptedGenerator(scripted_retllm), new_memory(), prompt).chat("Bo Wu works for BMW.")
    assert trace_lines("Bo Wu works for BMW.", plain) == [
        "USER  Bo Wu works for BMW.",
        "  LLM → controller : [MEM_WRITE{Bo Wu>>employed by>>BMW}]",
        "  controller → memory: write ('Bo Wu', 'employed by', 'BMW')",
        "  LLM → user      : ''",
    ]


@pytest.mark.parametrize(
    "trace, said",
    [
        ([{"event": "model", "text": ""}], "Nothing stored: the model made no memory call and gave no answer."),
        ([{"event": "read", "results": []}], "Nothing in the memory answers that."),
        ([{"event": "read", "results": [Triple("Ann", "works at", "BMW")]}], "The memory says: Ann works at BMW."),
        ([{"event": "error", "message": "locked", "cause": "memory"}], "Not stored: the memory call failed (locked)."),
    ],
)
def test_in_words_says_what_a_silent_turn_did(trace, said):
    from retllm_utils.controller import Turn

    assert in_words(Turn("", "", trace)) == said


# ------------------------------------------------------------------------------------------------ the widgets
def test_the_fact_picker_lists_the_facts_and_always_has_one_picked():
    s = session()
    tab = ChatTab(s)
    assert tab.fact_pick.options == () and tab.fact_pick.value is None
    tab.message.value = "Ann Lee works for Pfizer."  # what Enter does: the observer sends it
    assert tab.message.value == "" and len(s.history) == 1
    ann, bo = ("Ann Lee", "employed by", "Pfizer"), ("Bo Wu", "employed by", "Pfizer")
    assert tab.fact_pick.options == (("Ann Lee >> employed by >> Pfizer", ann),) and tab.fact_pick.value == ann
    tab.message.value = "Bo Wu works for Pfizer."
    assert [v for _, v in tab.fact_pick.options] == [ann, bo] and tab.fact_pick.value == ann  # the pick stays
    tab.fact_pick.value = bo
    tab.new_fact.value = "Bo Wu >> employed by >> Moderna"
    tab.on_edit()
    assert s.table().values.tolist()[1] == ["Bo Wu", "employed by", "Moderna"]
    assert tab.fact_pick.value == ann  # the edited fact is gone: the first one is picked
    tab.on_forget()  # Delete removes the picked fact and picks the next
    assert s.table().values.tolist() == [["Bo Wu", "employed by", "Moderna"]]
    assert tab.fact_pick.value == ("Bo Wu", "employed by", "Moderna")
    tab.on_reset()
    assert len(s.table()) == 0 and tab.fact_pick.value is None and tab.fact_pick.options == ()


def test_chat_box_text_is_never_executed_and_a_bad_edit_is_refused(capsys):
    s = session()
    tab = ChatTab(s)
    tab.message.value = "[MEM_WRITE{Eve>>employed by>>Pfizer}] is what I typed."
    assert len(s.table()) == 0 and tab.fact_pick.value is None
    tab.new_fact.value = "Eve >> employed by"
    tab.on_edit()
    assert "pick a fact" in capsys.readouterr().out and len(s.table()) == 0
    assert parse_fact(" a >> b >> c ") == ("a", "b", "c") and parse_fact("a >> >> c") is None


def test_the_memllm_tab_prints_reads_and_where_the_text_resumed():
    def read_model(text):
        if text.endswith("({MEM_READ("):
            return "Ann Lee>>employer>>)-->"
        return "({" if text.endswith("works at") else "."

    memory = TripleMemory(embedder=NgramEmbedder(), index="flat", q_thr=30)
    memory.write("Ann Lee", "employer", "Pfizer")
    ctl = MemLLMController(TOK, memory, read_steps=lambda: ScriptedStep(read_model), max_new_tokens=3)
    s = session(memllm=ctl)
    lines = continue_lines(s, "Ann Lee works at")
    assert lines[0] == "  read [Triple(subject='Ann Lee', relation='employer', object='')] -> ['Pfizer']"
    assert lines[-1].startswith("  Ann Lee works at|")
    assert MemLLMTab(s, "text", "prompt").prompt_in.value == "prompt"


def test_missing_adapters_leave_the_base_model_and_say_which_notebook_to_run(tmp_path, monkeypatch):
    class Model:
        def to(self, **kw):
            return self

        def eval(self):
            return self

    monkeypatch.setattr(loading, "load_model", lambda model_id: (Model(), TOK))
    monkeypatch.setattr(loading, "run_dir", lambda *parts: tmp_path.joinpath(*parts))
    controllers, tok, said = loading.load_retllm("m", "smoke", "paper", dtype=None, max_new_tokens=8)
    assert list(controllers) == ["base"] and tok is TOK
    assert said.startswith("!! no RET-LLM adapter in ") and "run notebook 02 with profile='smoke'" in said
    memllm, said = loading.load_memllm("m", TOK, "smoke", new_memory())
    assert memllm is None and "run notebook 05 with\n   profile='smoke' first" in said


def test_a_fact_written_twice_in_one_turn_is_noted_once_and_not_said_already_known():
    from retllm_utils.controller import Turn

    t = Triple("Cleo Park", "works at", "BMW")
    twice = [{"event": "write", "triple": t, "new": True}, {"event": "write", "triple": t, "new": False}]
    assert in_words(Turn("", "", twice)) == "Noted: Cleo Park works at BMW."
    before = [{"event": "write", "triple": t, "new": False}] * 2  # held before the turn, written twice in it
    assert in_words(Turn("", "", before)) == "Already known: Cleo Park works at BMW."
