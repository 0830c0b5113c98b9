"""Coordinated names written alike: the lists found in a statement, the facts they imply, the controller rule."""

import dataclasses

import pandas as pd
import pytest
import torch

from retllm_utils.api import Triple
from retllm_utils.chat.coordination import EveryName, coordinated_writes, name_lists, unwritten_names
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


@pytest.mark.parametrize(
    "text, written, names",
    [
        # a second clause the model never wrote, whatever its shape
        ("Cisco, which Ann Lee runs, has Bo Wu as a shareholder.", [("Ann Lee", "manager of", "Cisco")], ["Bo Wu"]),
        # a written name inside a longer run is that name ("Prime Minister Ivan Kostov"); one capitalised word is no
        # name, and the pronoun "I" ends a run ("Yesterday I met ...")
        ("Yesterday I met Prime Minister Ivan Kostov in Sofia.", [("Ivan Kostov", "member of", "UDF")], []),
        ("Among Roche's bosses is Noor Goldberg.", [("Noor Goldberg", "manager of", "Roche")], []),
        # a sentence's first word is capitalised anyway: a word that begins sentences is no part of a name ...
        ("The East portal lies near Grants, Colorado.", [("Grants", "located in", "Colorado")], []),
        ("Yesterday Ann Lee joined BMW, and so did Bo Wu.", [("Bo Wu", "employed by", "BMW")], ["Ann Lee"]),
        # ... any other first word is: a name begins there, whole ("Goldman Sachs Group" holds the written name)
        ("BMW employs Ann Lee. Bo Wu invests in it.", [("Ann Lee", "employed by", "BMW")], ["Bo Wu"]),
        ("Goldman Sachs Group hired Ann Lee.", [("Ann Lee", "employed by", "Goldman Sachs")], []),
        # a name written with its slip corrected is written; a name one slip from another the statement says is not
        ("Johnsoon & Johnson pays Bella Banerjee.", [("Bella Banerjee", "employed by", "Johnson & Johnson")], []),
        ("BMW employs Bo Xu and Bo Wu.", [("Bo Wu", "employed by", "BMW")], ["Bo Xu"]),
        # a capitalised noun that begins a sentence joins the name after it; a possessive is dropped
        ("Shareholders Ann Lee and Bo Wu own BMW.", [("Bo Wu", "investor in", "BMW")], ["Shareholders Ann Lee"]),
        ("Yesterday Nestle's Bo Wu met Ann Lee.", [("Ann Lee", "employed by", "Nestle")], []),
        (
            "I heard that Nissan is run by Bella Fontaine and Marta Gashi.",
            [("Bella Fontaine", "manager of", "Nissan")],
            ["Marta Gashi"],
        ),
        # names in either role count as written; case and a leading "the" are not told apart
        (
            "The Cincinnati Bengals play the Cleveland Browns.",
            [("cleveland browns", "rival of", "Cincinnati Bengals")],
            [],
        ),
        ("david ozturk and pilar lindqvist invest in lg.", [("David Ozturk", "investor in", "LG")], []),
    ],
)
def test_unwritten_names_are_the_statements_names_no_write_holds(text, written, names):
    assert unwritten_names(text, written) == names


class _Scored(ScriptedGenerator):
    """A scripted model that also ranks whole calls: the write of "Bo Wu" as an investor is its likeliest."""

    def __init__(self, respond):
        super().__init__(respond)
        self.asked: list[tuple[str, list[str]]] = []

    def score(self, text, continuations):
        self.asked.append((text, list(continuations)))
        return [0.0 if c == "[MEM_WRITE{Bo Wu>>investor in>>Cisco}]" else -1.0 for c in continuations]


def _manager(text):
    return "[MEM_WRITE{Ann Lee>>manager of>>Cisco}]"


@pytest.mark.parametrize("rule", [True, False])
def test_the_controller_writes_an_unwritten_name_as_its_likeliest_call(rule):
    memory = TripleMemory(embedder=NgramEmbedder(), index="flat")
    gen = _Scored(_manager)
    names = ("employed by", "investor in", "manager of")
    ctl = RetLLMController(gen, memory, lambda u: u, relation_names=names, named_writes=rule)
    turn = ctl.chat("Cisco, which Ann Lee runs, has Bo Wu as a shareholder.")
    added = [e["triple"] for e in turn.trace if e.get("rule") == "named"]
    assert added == ([Triple("Bo Wu", "investor in", "Cisco")] if rule else [])
    assert turn.model_text == _manager("")  # the model's own calls are left as they were
    if rule:  # ranked after the turn's text: each name with the written object, and the name as an object
        text, options = gen.asked[0]
        assert text.endswith(_manager("")) and len(options) == 3 * 2  # (Bo Wu, r, Cisco) and (Ann Lee, r, Bo Wu)
        assert "[MEM_WRITE{Ann Lee>>manager of>>Bo Wu}]" in options


def test_no_named_write_after_a_read_without_a_scoring_model_or_beside_the_users_relation_words():
    memory = TripleMemory(embedder=NgramEmbedder(), index="flat")
    names = ("employed by", "investor in", "manager of")
    ctl = RetLLMController(ScriptedGenerator(_manager), memory, lambda u: u, relation_names=names, named_writes=True)
    ctl.chat("Cisco, which Ann Lee runs, has Bo Wu as a shareholder.")
    assert set(memory) == {("Ann Lee", "manager of", "Cisco")}  # the model cannot rank calls: nothing added
    # a turn that wrote and then read: its text goes on past the writes, so no call is ranked after them
    gen = _Scored(lambda t: "" if "MEM_READ" in t else _manager(t) + "[MEM_READ{Bo Wu>>investor in>>}:")
    ctl = RetLLMController(gen, memory, lambda u: u, relation_names=names, named_writes=True)
    ctl.chat("Cisco, which Ann Lee runs, has Bo Wu as a shareholder?")
    assert gen.asked == [] and len(memory) == 1
    # a write in the user's own words: the second clause's relation is no name, so no ranked call could be right
    gen = _Scored(lambda t: "[MEM_WRITE{Ann Lee>>moved to>>Graz}]")
    ctl = RetLLMController(gen, memory, lambda u: u, relation_names=names, named_writes=True)
    ctl.chat("Ann Lee moved to Graz and is the neighbour of Bo Wu.")
    assert gen.asked == [] and ("Ann Lee", "moved to", "Graz") in set(memory) and len(memory) == 2


def test_named_writes_keep_the_turns_write_cap():
    memory = TripleMemory(embedder=NgramEmbedder(), index="flat")
    gen = _Scored(_manager)
    names = ("employed by", "investor in", "manager of")
    ctl = RetLLMController(gen, memory, lambda u: u, relation_names=names, named_writes=True, max_writes=1)
    turn = ctl.chat("Cisco, which Ann Lee runs, has Bo Wu as a shareholder.")
    assert len(memory) == 1 and gen.asked == [] and turn.trace[-1]["cause"] == "cap"


FIVE = frozenset({"employed by", "investor in", "manager of", "founder of", "customer of"})


@pytest.mark.parametrize(
    "generated, subjects",
    [
        ("", []),  # the model chooses the first write itself
        ("[MEM_WRITE{Ann Lee>>employed by>>BMW}]", ["Bo Wu"]),  # the first name no write holds, in text order
        ("[MEM_WRITE{Ann Lee>>employed by>>BMW}][MEM_WRITE{Cy Ma>>employed by>>BMW}]", ["Bo Wu"]),
        ("[MEM_WRITE{Ann Lee>>employed by>>BMW}][MEM_WRITE{Bo Wu>>employed by>>BMW}]", ["Cy Ma"]),
        ("[MEM_WRITE{Ann Lee>>employed by>>BMW}][MEM_WRITE{Bo Wu>>employed by>>BMW}][MEM_WRITE{Cy Ma>>f", ["Cy Ma"]),
        ("[MEM_WRITE{Ann Lee>>lives in>>BMW}]", []),  # a relation of the user's own words: subjects are not known
        ("[MEM_WRITE{Ann Lee>>employed by>>BMW}][MEM_READ{Bo Wu>>employed by>>}:", []),  # a read: no statement turn
    ],
)
def test_every_name_asks_for_the_first_unwritten_name_after_a_write(generated, subjects):
    every = EveryName("Ann Lee, Bo Wu and Cy Ma work at BMW.", FIVE, ("BMW",))
    assert every.subjects(generated) == subjects


def test_every_name_never_makes_a_known_name_a_subject_and_offers_a_names_endings():
    user = "Ann Lee works at Goldman Sachs, and Shareholders Bo Wu at Credit Suisse."
    every = EveryName(user, FIVE, ("Credit Suisse",))
    # Goldman Sachs is written (the first write's object); Credit Suisse is a known name, never a subject
    assert every.subjects("[MEM_WRITE{Ann Lee>>employed by>>Goldman Sachs}]") == ["Shareholders Bo Wu", "Bo Wu"]
    assert every.subjects("[MEM_WRITE{Ann Lee>>employed by>>Goldman Sachs}][MEM_WRITE{Bo Wu>>employed by>>BMW}]") == []


@pytest.mark.model
def test_copy_terms_with_every_name_write_the_skipped_name_instead_of_ending(smol):
    # the processor alone: after the first write a model that would end the turn (its end token scored highest) or
    # skip to the last name gets the next write's opener and the first unwritten name
    from retllm_utils.chat.copying import CopyTerms, allowed_terms

    _, tok = smol
    user = "Ann Lee, Bo Wu and Cy Ma work at BMW."
    allowed = allowed_terms(user, relations=FIVE)
    every = dataclasses.replace(allowed, every_name=EveryName(user, FIVE, ("BMW",)))
    end = tok.convert_tokens_to_ids("<|im_end|>")
    for generated, want in [
        ("[MEM_WRITE{Ann Lee>>employed by>>BMW}]", "[MEM_WRITE{Bo Wu>>"),
        ("[MEM_WRITE{Ann Lee>>employed by>>BMW}][MEM_WRITE{", "Bo Wu>>"),
    ]:
        ids = tok(generated, add_special_tokens=False)["input_ids"]
        cy = tok("Cy", add_special_tokens=False)["input_ids"][0]
        scores = torch.zeros(1, len(tok))
        scores[0, end], scores[0, cy] = 10.0, 9.0  # the model would end, or write Cy Ma next
        for a, held in ((allowed, False), (every, True)):
            pick = int(CopyTerms(tok, 0, a)(torch.tensor([ids]), scores.clone()).argmax())
            piece = tok.decode([pick])
            assert (piece and want.startswith(piece)) == held, (generated, held, piece)


@pytest.mark.model
def test_the_controller_writes_every_name_in_order_when_asked(smol):
    # a model pushed to write Ann Lee, skip Bo Wu, write Cy Ma and end: with the rule the turn writes all three, in
    # the statement's order, the model choosing each relation and object
    from test_copying import _Push

    from retllm_utils.controller import HFGenerator
    from retllm_utils.prompts import chat_prompt

    model, tok = smol
    user = "Ann Lee, Bo Wu and Cy Ma work at BMW."
    pushed = "[MEM_WRITE{Ann Lee>>employed by>>BMW}][MEM_WRITE{Cy Ma>>employed by>>BMW}]<|im_end|>"
    subjects = {}
    for rule in (False, True):
        n = len(tok(chat_prompt(tok, user), add_special_tokens=False)["input_ids"])
        gen = HFGenerator(model, tok, max_new_tokens=80, logits_processor=[_Push(tok, n, pushed)])
        memory = TripleMemory(embedder=NgramEmbedder(), index="flat")
        ctl = RetLLMController(
            gen,
            memory,
            lambda u: chat_prompt(tok, u),
            copy_names=True,
            known_names=("BMW",),
            relation_names=sorted(FIVE),
            write_every_name=rule,
        )
        ctl.chat(user)
        subjects[rule] = [t.subject for t in memory]
    assert subjects[False] == ["Ann Lee", "Cy Ma"]
    assert subjects[True][:3] == ["Ann Lee", "Bo Wu", "Cy Ma"]


class _Recording(ScriptedGenerator):
    """Keeps the terms each generator call was handed."""

    def __init__(self, respond):
        super().__init__(respond)
        self.allowed = []

    def __call__(self, text, pause=None, allowed=None, **kw):
        self.allowed.append(allowed)
        return super().__call__(text, pause, allowed, **kw)


@pytest.mark.parametrize(
    "user, kw, on",
    [
        ("Ann Lee and Bo Wu work at BMW.", {}, True),
        ("Do Ann Lee and Bo Wu work at BMW?", {}, False),  # a question: the model may read after writing
        ("Ann Lee and Bo Wu work at BMW.", {"write_every_name": False}, False),
        ("Ann Lee and Bo Wu work at BMW.", {"relation_names": None}, False),  # no relations to hold writes to
    ],
)
def test_every_name_reaches_the_generator_only_for_a_statement_with_relation_names(user, kw, on):
    gen = _Recording(lambda t: "")
    args = {"copy_names": True, "relation_names": sorted(FIVE), "write_every_name": True, **kw}
    RetLLMController(gen, TripleMemory(embedder=NgramEmbedder(), index="flat"), lambda u: u, **args).chat(user)
    every = gen.allowed[0].every_name
    assert (every is not None) == on
    if on:
        assert every.statement == user and every.relations == FIVE
