"""Coordinated names written alike: the lists found in a statement, the facts they imply, the controller rule."""

import pandas as pd
import pytest

from retllm_utils.api import Triple
from retllm_utils.chat.coordination import coordinated_writes, name_lists
from retllm_utils.chat.session import trace_lines
from retllm_utils.controller import RetLLMController, ScriptedGenerator
from retllm_utils.memory import TripleMemory
from retllm_utils.models import NgramEmbedder


@pytest.mark.parametrize(
    "text, lists",
    [
        ("Elena Ivanova and Babajide Zhao work at eBay.", [["Elena Ivanova", "Babajide Zhao"]]),
        (
            "Kemal Nielsen, Pooja Kapoor-Shah, Pablo Herrera, and Priya Smith are managers at Oracle.",
            [["Kemal Nielsen", "Pooja Kapoor-Shah", "Pablo Herrera", "Priya Smith"]],
        ),
        ("Rosa Van der Berg and Bo Wu buy from Procter & Gamble.", [["Rosa Van der Berg", "Bo Wu"]]),
        ("Ann Lee works at BMW and Audi.", [["BMW", "Audi"]]),
        ("Bo Wu was born in Paris, France.", []),  # no "and": a place and its country, not a list
        ("IBM employs Ann Lee, while Bo Wu is on the payroll of Audi.", []),
        ("Keoni Soares is an employee of Chevron, and Sara Popov of BASF.", [["Chevron", "Sara Popov"]]),
        ("david ozturk and pilar lindqvist invest in lg.", []),  # no capitals: no name is known
    ],
)
def test_name_lists_are_capitalised_names_joined_by_commas_and_and(text, lists):
    assert name_lists(text) == lists


def test_a_listed_name_no_write_holds_takes_the_written_names_pattern():
    text = "Kemal Nielsen, Pablo Herrera, and Priya Smith are managers at Oracle."
    written = [("Kemal Nielsen", "manager of", "Oracle"), ("Priya Smith", "manager of", "Oracle")]
    assert coordinated_writes(text, written) == [Triple("Pablo Herrera", "manager of", "Oracle")]
    # coordinated objects too
    assert coordinated_writes("Ann Lee works at BMW and Audi.", [("Ann Lee", "employed by", "BMW")]) == [
        Triple("Ann Lee", "employed by", "Audi")
    ]
    # every listed name written: nothing to add
    assert coordinated_writes(text, [*written, ("Pablo Herrera", "manager of", "Oracle")]) == []


def test_no_fact_where_the_list_does_not_say_one():
    # the written names of the list differ in relation: which one the missing name takes is unknown
    text = "Ann Lee, Bo Wu and Cy Ma are tied to Siemens."
    assert coordinated_writes(text, [("Ann Lee", "employed by", "Siemens"), ("Bo Wu", "founder of", "Siemens")]) == []
    # "respectively": each written object goes with another subject
    text = "Leila Baker and Nia Lindqvist manage Hyundai and Adidas, respectively."
    written = [("Leila Baker", "manager of", "Hyundai"), ("Nia Lindqvist", "manager of", "Hyundai")]
    assert coordinated_writes(text, written) == []
    # no listed name written at all
    assert coordinated_writes("Ann Lee and Bo Wu work at BMW.", [("Cy Ma", "employed by", "BMW")]) == []
    # the other term in the list itself ("between A and B") is not a pattern; a leading "the" is the same name
    text = "a rivalry between the Cincinnati Bengals and Cleveland Browns"
    assert coordinated_writes(text, [("Cleveland Browns", "rival of", "the Cincinnati Bengals")]) == []


def _one_write(text):
    return "[MEM_WRITE{Ann Lee>>employed by>>BMW}]"


@pytest.mark.parametrize("rule", [True, False])
def test_the_controller_writes_the_listed_name_the_model_skipped(rule):
    memory = TripleMemory(embedder=NgramEmbedder(), index="flat")
    memory.write("Cy Ma", "customer of", "Audi")
    ctl = RetLLMController(ScriptedGenerator(_one_write), memory, lambda u: u, coordinated_writes=rule)
    turn = ctl.chat("Ann Lee and Bo Wu work at BMW.")
    added = [e for e in turn.trace if e.get("rule") == "coordinated"]
    assert [e["triple"] for e in added] == ([Triple("Bo Wu", "employed by", "BMW")] if rule else [])
    assert len(memory) == (3 if rule else 2) and ("Cy Ma", "customer of", "Audi") in set(memory)
    assert turn.model_text == _one_write("")  # the model's own calls are left as they were
    lines = trace_lines("Ann Lee and Bo Wu work at BMW.", turn)
    assert ("  controller → memory: write ('Bo Wu', 'employed by', 'BMW') (coordinated rule)" in lines) == rule


def test_the_rule_keeps_the_turns_write_cap():
    memory = TripleMemory(embedder=NgramEmbedder(), index="flat")
    ctl = RetLLMController(ScriptedGenerator(_one_write), memory, lambda u: u, coordinated_writes=True, max_writes=1)
    turn = ctl.chat("Ann Lee and Bo Wu work at BMW.")
    assert len(memory) == 1 and turn.trace[-1]["cause"] == "cap"


def test_by_shape_reports_the_memory_a_statement_leaves():
    from retllm_utils.retllm.shape_report import by_shape

    df = pd.DataFrame(
        {
            "id": ["a", "b"],
            "kind": ["write", "write"],
            "phrasing": ["verb", "verb"],
            "api_em": [False, False],
            "stored_exact": [True, False],
            "facts_ok": [None, None],
        }
    )
    t = by_shape(df)
    assert t.loc["verb", "writes exact"] == 0.0 and t.loc["verb", "stored exact"] == 0.5
