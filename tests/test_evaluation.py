"""RET-LLM evaluation metrics: entity-set answer accuracy, API exact match through parsing, write P/R, the
per-type summary, and the end-to-end evaluator with a scripted model."""

import pytest

from retllm_utils.metrics import PRF
from retllm_utils.models import NgramEmbedder
from retllm_utils.retllm import evaluation as ev

SCENE = [["Ann Lee", "employed by", "Pfizer"], ["Bo Wu", "employed by", "Pfizer"], ["Cy Li", "customer of", "BMW"]]
READ = {
    "id": "t-1",
    "kind": "read",
    "query_type": "org_rel",
    "relation": "employment",
    "user": "Who works for Pfizer?",
    "api": "[MEM_READ{>>employed by>>Pfizer}:",
    "answer": "Ann Lee and Bo Wu are employed by Pfizer.",
    "query": ["", "employed by", "Pfizer"],
    "triples": SCENE[:2],
    "memory": SCENE,
}
NONE = {
    **READ,
    "id": "t-2",
    "query_type": "per",
    "user": "Who is Dee Ray?",
    "api": "[MEM_READ{Dee Ray>>>>}:",
    "answer": "I don't know.",
    "query": ["Dee Ray", "", ""],
    "triples": [],
}
WRITE = {
    "id": "t-3",
    "kind": "write",
    "query_type": "write",
    "relation": "employment",
    "user": "Eve Po works for BMW.",
    "api": "[MEM_WRITE{Eve Po>>employed by>>BMW}]",
    "answer": "",
    "query": [],
    "triples": [["Eve Po", "employed by", "BMW"]],
    "memory": SCENE,
}


@pytest.mark.parametrize(
    "answer, ok",
    [
        ("Ann Lee and Bo Wu are employed by Pfizer.", True),
        ("Bo Wu and Ann Lee work there.", False),  # no Pfizer: not the gold set
        ("Ann Lee, Bo Wu and Cy Li are employed by Pfizer.", False),  # one too many
        ("Ann Lee is employed by Pfizer.", False),  # one missing
    ],
)
def test_answer_is_right_only_with_the_exact_entity_set(answer, ok):
    assert ev.answer_correct(answer, READ) is ok


def test_no_match_needs_an_answer_naming_nobody():
    assert ev.answer_correct("I don't know.", NONE)
    assert not ev.answer_correct("", NONE)
    assert not ev.answer_correct("Dee Ray is employed by Pfizer.", NONE)


def test_a_name_inside_a_longer_one_is_not_counted():
    assert ev.mentioned("Ann Leeson works at Pfizer Inc", ["Ann Lee", "Pfizer"]) == {"Pfizer"}
    assert ev.mentioned("Pfizer Health bought it", ["Pfizer", "Pfizer Health"]) == {"Pfizer Health"}


def test_predicted_api_is_the_parsed_calls():
    assert ev.predicted_api("[MEM_READ{>>employed by>>Pfizer}:{x>>y>>z}]Ann.") == READ["api"]
    assert ev.predicted_api("[MEM_WRITE{Eve Po>>employed by>>BMW}] ok") == WRITE["api"]
    assert ev.predicted_api("Sure! Eve works at BMW.") == ""


def test_write_precision_recall():
    prf = PRF.of_sets([("a", "b", "c"), ("x", "y", "z")], [("a", "b", "c")])
    assert (prf.precision, prf.recall) == (0.5, 1.0)
    prf = PRF.of_sets([], [("a", "b", "c")])
    assert (prf.precision, prf.recall) == (0.0, 0.0)


def test_evaluate_retllm_end_to_end_with_a_scripted_generator(monkeypatch):
    from retllm_utils.controller import ScriptedGenerator

    def respond(text):
        if "works for BMW." in text:
            return "[MEM_WRITE{Eve Po>>employed by>>BMW}]"
        if "Who works for Pfizer?" in text and not text.endswith("]"):
            return "[MEM_READ{>>employed by>>Pfizer}:"
        if text.endswith("]"):
            return "Ann Lee and Bo Wu are employed by Pfizer."
        return "[MEM_READ{Dee Ray>>>>}:"

    monkeypatch.setattr(ev, "HFGenerator", lambda *a, **k: ScriptedGenerator(respond))
    monkeypatch.setattr(ev, "chat_prompt", lambda tok, u: f"<user>{u}</user>")
    df = ev.evaluate_retllm(None, None, [READ, NONE, WRITE], NgramEmbedder())
    assert df["api_em"].tolist() == [True, True, True]
    assert df["answer_ok"].tolist()[:2] == [True, False]  # the no-match read got a made-up answer
    assert df.loc[2, "write_precision"] == 1.0 and df.loc[2, "write_recall"] == 1.0
    table = ev.summarize(df)
    assert table.loc["all", "n"] == 3 and table.loc["all", "answer_acc"] == 0.5
    assert list(table.index) == ["per", "org_rel", "write", "all"]
    # the scripted calls copy the user's words and the answers name stored people: nothing invented
    assert table.loc["all", "invented_rate"] == 0.0


@pytest.mark.parametrize(
    "answer, names_ok, facts_ok",
    [
        ("Ann Lee is employed by Pfizer. Bo Wu is employed by Pfizer.", True, True),
        ("Ann Lee and Bo Wu are employed by Pfizer.", True, True),
        ("Ann Lee and Bo Wu are customers of Pfizer.", True, False),  # right people, wrong relation
        ("Ann Lee is employed by Pfizer. Bo Wu works there too.", True, False),  # Bo Wu's fact not stated
        ("Ann Lee is employed by Pfizer.", False, False),
    ],
)
def test_facts_score_is_stricter_than_names(answer, names_ok, facts_ok):
    assert ev.answer_correct(answer, READ) is names_ok
    assert ev.facts_correct(answer, READ) is facts_ok


def test_invented_names_in_calls_and_answers_are_recorded():
    rec = ev._record(WRITE, "", "", [], "[MEM_WRITE{Eve Poe>>employed by>>BMW}][MEM_WRITE{Eve Po>>employed by>>BMW}]")
    assert rec["invented"] == ["Eve Poe"] and rec["n_terms"] == 4
    rec = ev._record(READ, READ["api"], "Ann Lee is employed by Pfizer. Al Bo is employed by Pfizer.", [], "")
    assert rec["invented"] == ["Al Bo"]


def test_a_false_substitution_is_a_stand_in_other_than_the_gold_term():
    subs = [
        {"role": "subject", "term": "Pierre Patel", "stored": "Parisa Patel", "accepted": True},
        {"role": "object", "term": "Pfizer Inc.", "stored": "Pfizer", "accepted": True},
        {"role": "subject", "term": "Dee Rae", "stored": "Dee Ray", "accepted": False},
    ]
    row = {**READ, "query": ["Pierre Patel", "", "Pfizer"]}
    assert ev.false_substitutions(subs, row) == ["Pierre Patel -> Parisa Patel"]


def test_intervals_bracket_the_rate_and_shrink_with_more_examples():
    import pandas as pd

    small = pd.DataFrame({"query_type": ["per"] * 10, "api_em": [True] * 8 + [False] * 2})
    big = pd.DataFrame({"query_type": ["per"] * 1000, "api_em": [True] * 800 + [False] * 200})
    a, b = ev.with_intervals(small, ["api_em"]).loc["per"], ev.with_intervals(big, ["api_em"]).loc["per"]
    assert a["api_em_lo"] < 0.8 < a["api_em_hi"] and b["api_em_lo"] < 0.8 < b["api_em_hi"]
    assert b["api_em_hi"] - b["api_em_lo"] < (a["api_em_hi"] - a["api_em_lo"]) / 3


def test_notebook_03_figure_from_its_saved_results_has_every_pass_a_y_label_and_a_legend_clear_of_the_bars():
    import json

    import matplotlib

    matplotlib.use("Agg")
    from retllm_utils.paths import RESULTS

    results = json.loads((RESULTS / "03_retllm.json").read_text())
    shown = ev.plotted_scores(results)
    assert list(shown) == ["zero-shot base", "RET-LLM, test", "RET-LLM, paraphrase", "RET-LLM, paper's loss mask, test"]
    fig = ev.plot_by_query_type(shown, title="t")
    left, right = fig.axes
    assert left.get_ylabel() and not left.get_legend() and [t.get_text() for t in fig.legends[0].texts] == list(shown)
    fig.canvas.draw()
    legend = fig.legends[0].get_window_extent()
    assert all(legend.y1 < ax.get_window_extent().y0 for ax in (left, right))  # below the panels: it covers no bar
    # the bars are the saved numbers: RET-LLM's (per) call exact match on the test split
    heights = {round(p.get_x() + p.get_width() / 2, 3): p.get_height() for p in left.patches}
    assert heights[round(-0.1, 3)] == results["test"]["per"]["api_em"]


def test_a_misspelt_name_resolved_to_the_person_the_reply_names_is_no_false_stand_in():
    row = {"query": ["Jullian Clarke", "customer of", ""], "triples": [["Julian Clarke", "customer of", "BMW"]]}
    right = {"term": "Jullian Clarke", "stored": "Julian Clarke", "role": "subject", "accepted": True}
    wrong = {"term": "Jullian Clarke", "stored": "Jillian Clarke", "role": "subject", "accepted": True}
    assert ev.false_substitutions([right], row) == []
    assert ev.false_substitutions([wrong], row) == ["Jullian Clarke -> Jillian Clarke"]
    other_role = {"term": "Jullian Clarke", "stored": "Julian Clarke", "role": "object", "accepted": True}
    assert ev.false_substitutions([other_role], row) == ["Jullian Clarke -> Julian Clarke"]


def test_a_misspelt_name_in_a_no_match_question_may_resolve_to_the_stored_person_it_misspells():
    """A no-match question about a misspelt person has an empty gold reply: the stand-in is right when it is the one
    stored name the typo is nearest to, and false when another name is as near (the data set never builds that)."""
    memory = [["Parisa Castillo", "founder of", "Google"], ["Enrique Oliveira", "manager of", "Google"]]
    row = {"query": ["Parisa Caastillo", "manager of", ""], "triples": [], "memory": memory}
    sub = {"term": "Parisa Caastillo", "stored": "Parisa Castillo", "role": "subject", "accepted": True}
    assert ev.false_substitutions([sub], row) == []
    other = {**sub, "stored": "Enrique Oliveira"}
    assert ev.false_substitutions([other], row) == ["Parisa Caastillo -> Enrique Oliveira"]
    tie = {**row, "memory": memory + [["Parisa Caastilo", "customer of", "BMW"]]}  # as near as Castillo
    assert ev.false_substitutions([sub], tie) == ["Parisa Caastillo -> Parisa Castillo"]
