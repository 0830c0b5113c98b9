"""Scoring relations the model was never trained on: a write in the model's own relation words counts when its
names are exact and the relation means the gold one; the read-back answer must name the gold object."""

import re

from retllm_utils.api import parse_retllm
from retllm_utils.controller import ScriptedGenerator
from retllm_utils.models import NgramEmbedder
from retllm_utils.retllm.new_relations import evaluate_new_relations, relation_matches, summarize_new_relations

ROWS = [
    {"id": "n0", "user": "Betley died in Warsaw at age 72.", "triples": [["Betley", "place of death", "Warsaw"]]},
    {"id": "n1", "user": "Ann Lee lives in Lyon.", "triples": [["Ann Lee", "residence", "Lyon"]]},
]


def _script(text: str) -> str:
    """Writes n0 exactly and n1 with another relation; reads back by the question's relation, answers from the reply."""
    user = re.search(r"<user>(.*)</user>", text, re.S).group(1)
    done = text.split("<assistant>", 1)[1]
    if "Betley died" in user:
        return "[MEM_WRITE{Betley>>place of death>>Warsaw}]Noted."
    if "Ann Lee lives" in user:
        return "[MEM_WRITE{Ann Lee>>lives in>>Lyon}]Noted."
    m = re.match(r"What is the (.+) of (.+)\?$", user)
    if not done:
        return "[MEM_READ{" + m[2] + ">>" + m[1] + ">>}:"
    objects = [t.object for c in parse_retllm(done) for t in (c.results or ())]
    return (", ".join(objects) or "I don't know") + "."


def test_a_write_in_other_relation_words_counts_only_when_the_relation_means_the_same():
    emb = NgramEmbedder()
    emb.thresholds["tau_relation"] = 0.99  # the n-gram encoder cannot tell 'lives in' means 'residence'
    df = evaluate_new_relations(
        None, None, ROWS, emb, generator=ScriptedGenerator(_script), prompt_fn=lambda u: f"<user>{u}</user><assistant>"
    )
    assert df["write_exact"].tolist() == [True, False]
    assert df["names_exact"].tolist() == [True, True]
    assert df["write_names_relation_fuzzy"].tolist() == [True, False]
    assert df.loc[0, "answer_ok"] and df.loc[0, "answer"] == "Warsaw."
    table = summarize_new_relations(df)
    assert table.loc["all", "n"] == 2 and table.loc["all", "write_exact"] == 0.5


def test_answer_names_ends_a_read_back_answer_at_a_sentence_said_twice():
    def looping(text: str) -> str:
        """As `_script`, but the read-back answer says its sentence again."""
        out = _script(text)
        return out if out.startswith("[") else f"Betley died in {out} Betley died in {out}"

    kw = dict(generator=ScriptedGenerator(looping), prompt_fn=lambda u: f"<user>{u}</user><assistant>")
    free = evaluate_new_relations(None, None, ROWS[:1], NgramEmbedder(), **kw)
    held = evaluate_new_relations(None, None, ROWS[:1], NgramEmbedder(), answer_names=True, **kw)
    assert free.loc[0, "answer"] == "Betley died in Warsaw. Betley died in Warsaw."
    assert held.loc[0, "answer"] == "Betley died in Warsaw."


def test_relation_matches_by_threshold():
    emb = NgramEmbedder()
    emb.thresholds["tau_relation"] = -1.0
    assert relation_matches(emb, ["lives in", "x"], ["residence", "y"]) == [True, True]
    emb.thresholds["tau_relation"] = 1.01
    assert relation_matches(emb, ["residence", "x"], ["residence", "y"]) == [True, False]


def test_by_shape_scores_writes_reads_and_free_answers_per_shape():
    import pandas as pd

    from retllm_utils.retllm.shape_report import by_shape

    df = pd.DataFrame(
        {
            "id": ["a", "b", "c", "d"],
            "kind": ["write", "read", "read", "write"],
            "phrasing": ["passive", "passive", "cleft", "cleft"],
            "api_em": [True, False, True, False],
            "facts_ok": [None, True, False, None],
        }
    )
    free = pd.DataFrame({"id": ["b", "c"], "facts_ok": [False, False]})
    t = by_shape(df, free)
    assert t.loc["passive", "writes exact"] == 1.0 and t.loc["passive", "read calls"] == 0.0
    assert t.loc["cleft", "answers"] == 0.0 and t.loc["passive", "answers"] == 1.0
    assert t.loc["all", "statements"] == 2 and t.loc["all", "free answers"] == 0.0 and t.loc["all", "free n"] == 2
