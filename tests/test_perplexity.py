"""MemLLM perplexity evaluators (reference vs fast), metrics, and memory-write quality scoring."""

import math
from collections import Counter
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
import torch

from retllm_utils.api import Triple
from retllm_utils.memllm import perplexity as P
from retllm_utils.memllm.generation import ReadQuery
from retllm_utils.memllm.write_quality import generate_write, score_embedded, score_exact
from retllm_utils.models import NgramEmbedder

DOC = {  # a docs_dev-shaped row: two gold reads, at "Rihanna" and at "Loud"
    "doc_idx": 0,
    "text": "The Loud Tour was a concert tour by Barbadian artist Rihanna . It supported her album Loud , "
    "released in 2010 by Def Jam .",
    "read_chars": [],
    "read_target_spans": [],
    "read_targets": [["Rihanna"], ["Loud"]],
    "read_queries": [[["Loud Tour", "performer", ""]], [["", "notable work", "Rihanna"]]],
    "mention_spans": [],
}
for name in ("Rihanna", "Loud ,"):
    a = DOC["text"].index(name, 10)
    DOC["read_chars"].append(a)
    DOC["read_target_spans"].append([a, a + len(name.split()[0])])
for name in ("Loud Tour", "Rihanna", "Def Jam", "2010"):
    a = DOC["text"].index(name)
    DOC["mention_spans"].append([a, a + len(name), 0])
LOOKUP = {("Loud Tour", "performer", ""): ["Rihanna", "Katy Perry"], ("", "notable work", "Rihanna"): ["Loud"]}


def lookup(queries):
    return [e for q in queries for e in LOOKUP.get(tuple(q), ["Nobody"])]


def fake_query(step, tokenizer, prefix=(), *, max_new_tokens=64):
    """A fixed query in place of the model's (the base model writes no valid call), still fed through `step`."""
    opener = tokenizer("({MEM_READ(", add_special_tokens=False)["input_ids"]
    logits = step(list(prefix) + opener)
    nxt = int(logits.argmax())
    logits = step([nxt])
    return ReadQuery([Triple("Loud Tour", "performer", "")], opener + [nxt, int(logits.argmax())], "query")


@pytest.mark.model
def test_prepare_doc_tokens_are_the_plain_tokenization(smol):
    _, tok = smol
    doc = P.prepare_doc(tok, DOC)
    assert doc.ids == tok(DOC["text"], add_special_tokens=False)["input_ids"]  # cuts before a space change nothing
    assert sorted(doc.gold_reads.values()) == [0, 1] and len(doc.gold_reads) == 2
    for t, k in doc.gold_reads.items():  # a gold read sits right before the target's first token (" Rihanna")
        assert doc.offsets[t][0] == DOC["read_chars"][k] - 1 and doc.target_tokens[k][0] == t
    assert tok.decode([doc.ids[i] for i in doc.entity_tokens[2]]).strip() == "Def Jam"
    assert len(doc.entity_tokens) == 4 and all(0 not in tt for tt in doc.entity_tokens)
    short = P.prepare_doc(tok, DOC, max_tokens=12)
    assert len(short.ids) == 12 and len(short.gold_reads) == 1  # the read after token 12 is dropped


@pytest.mark.model
def test_fast_evaluator_matches_token_by_token_reference(smol):
    """Same NLLs (1e-4 in mean, per token too), same reads, for every kind of read decision."""
    model, tok = smol
    docs = [P.prepare_doc(tok, DOC, max_tokens=18)]
    setups = [
        (P.ReadSetup(model="base"), {}, False),
        (P.ReadSetup(positions="gold", queries="gold", results="target"), {}, False),
        (P.ReadSetup(memory="m", positions="gold", queries="gold", results="memory+target"), {}, False),
        (P.ReadSetup(memory="m", positions="gold"), {"max_query_tokens": 5}, False),  # real generation: no valid call
        # model-chosen positions: the base model never opens "({", so " a" and "." stand for the opener (document
        # tokens themselves, so not masked)
        (P.ReadSetup(memory="m", positions="model"), {"open_token": " a", "chunk": 3, "mask_open": False}, True),
        (P.ReadSetup(memory="m", positions="model"), {"open_token": ".", "chunk": 32, "mask_open": False}, True),
    ]
    n_branching = 0
    for setup, kw, patch in setups:
        mask = {k: v for k, v in kw.items() if k in ("open_token", "mask_open")}
        none = P.fast_doc(model, tok, docs[0], P.ReadSetup(), **mask)
        with mock.patch.object(P, "read_query", fake_query) if patch else mock.patch.object(P, "OPEN", P.OPEN):
            ref = P.reference_doc(model, tok, docs[0], setup, lookup, **{k: v for k, v in kw.items() if k != "chunk"})
            fast = P.fast_doc(model, tok, docs[0], setup, lookup, **kw)
        assert abs(np.nanmean(ref.nll) - np.nanmean(fast.nll)) < 1e-4, setup
        assert np.nanmax(np.abs(ref.nll - fast.nll)) < 1e-3 and np.isnan(ref.nll[0]) and np.isnan(fast.nll[0])
        assert ref.reads == fast.reads and ref.attempts == fast.attempts
        if ref.reads:
            n_branching += 1
            t = ref.reads[0]["t"]
            assert abs(ref.nll[t] - none.nll[t]) > 1e-3  # the call in context changed what follows
            assert np.allclose(ref.nll[:t], none.nll[:t], equal_nan=True, atol=1e-4)  # and nothing before it
    assert n_branching >= 3


def test_aggregate_pools_tokens_and_averages_spans():
    doc = P.EvalDoc(
        ids=[0] * 5,
        offsets=[(i, i + 1) for i in range(5)],
        gold_reads={},
        queries=[],
        targets=[],
        target_tokens=[[1, 2], [4]],
        entity_tokens=[[3]],
    )
    res = P.DocResult(np.array([np.nan, 1.0, 3.0, 0.5, 4.0]))
    doc2 = P.EvalDoc([0, 0], [(0, 1), (1, 2)], {}, [], [], [], [[1]])
    res2 = P.DocResult(np.array([np.nan, 2.0]))
    s = P.aggregate([doc, doc2], [res, res2])
    assert s.overall == pytest.approx((1 + 3 + 0.5 + 4 + 2) / 5)  # pooled over tokens, not per document
    assert s.target == pytest.approx((2.0 + 4.0) / 2)  # mean of per-target means
    assert s.entity == pytest.approx((0.5 + 2.0) / 2) and s.n_tokens == 5 and s.n_targets == 2
    assert s.row()["TARGET exp(NLL)"] == pytest.approx(math.exp(3.0))


def test_read_setup_validation_and_table_rows():
    with pytest.raises(ValueError, match="gold read positions"):
        P.ReadSetup(memory="m", positions="model", queries="gold")
    with pytest.raises(ValueError, match="need a memory"):
        P.ReadSetup(positions="gold")
    assert len(P.TABLE1_ROWS) == 9
    assert P.TABLE1_ROWS["⑨ gold target only"].results == "target"
    assert P._answer(
        P.ReadSetup(memory="m", positions="gold", results="memory+target"),
        [Triple("a", "r", "")],
        lambda q: ["x", "t"],
        ["t", "u"],
    ) == ["x", "t", "u"]


def test_exact_precision_recall_by_hand():
    gold = [("Ann", "employer", "Pfizer"), ("Pfizer", "country", "USA"), ("Bob", "spouse", "Ann")]
    pred = [
        ("Ann", "employer", "Pfizer"),
        (" Pfizer ", "country", "USA"),
        ("Ann", "spouse", "Bob"),
        ("Ann", "employer", "Pfizer"),
    ]  # a repeat counts once; whitespace is stripped
    s = score_exact(pred, gold)
    assert (s.correct_pred, s.n_pred, s.found_gold, s.n_gold) == (2, 3, 2, 3)
    assert s.precision == pytest.approx(2 / 3) and s.recall == pytest.approx(2 / 3)
    assert score_exact([], gold).precision == 0 and score_exact([], gold).recall == 0
    total = s.add(score_exact([("X", "r", "Y")], [("X", "r", "Y")]))
    assert total.precision == pytest.approx(3 / 4) and total.recall == pytest.approx(3 / 4)


def test_embedded_matching_respects_thresholds():
    emb = NgramEmbedder()
    gold = [("United States of America", "country", "North America")]
    near = [("United States of Amerika", "country", "North America")]
    cos = float((emb.encode(["United States of America"]) @ emb.encode(["United States of Amerika"]).T).item())
    assert 0.5 < cos < 0.99
    assert score_embedded(near, gold, emb, tau_entity=cos - 0.01, tau_relation=0.9).precision == 1
    assert score_embedded(near, gold, emb, tau_entity=cos + 0.01, tau_relation=0.9).precision == 0
    assert score_exact(near, gold).precision == 0
    wrong_rel = [("United States of America", "continent", "North America")]
    assert score_embedded(wrong_rel, gold, emb, tau_entity=0.9, tau_relation=0.95).recall == 0


class _ScriptedLM:
    """A stand-in causal LM whose next-token log-probs follow a script: one dict {token: prob} per step."""

    def __init__(self, script, vocab):
        self.script, self.vocab, self.step, self.device = script, vocab, 0, torch.device("cpu")

    def __call__(self, input_ids, past_key_values=None, use_cache=True, logits_to_keep=None):
        probs = self.script[min(self.step, len(self.script) - 1)]
        self.step += 1
        logits = torch.full((self.vocab,), -30.0)
        for tok_id, p in probs.items():
            logits[tok_id] = math.log(p)
        return SimpleNamespace(logits=logits.view(1, 1, -1), past_key_values=None)


@pytest.mark.model
def test_late_stopping_picks_the_best_cut_point(smol):
    _, tok = smol

    def ids(s):
        return tok(s, add_special_tokens=False)["input_ids"]

    close, a, semi = ids("})")[0], ids("A")[0], ids(";")[0]
    # step 0: "A" sure; step 1: close 0.6 vs ";" 0.4; then "A" unsure (0.3) and close again: the first cut is best
    script = [{a: 0.99}, {close: 0.6, semi: 0.4}] + [{a: 0.3, semi: 0.2}, {close: 0.55, semi: 0.45}] * 10
    greedy = generate_write(_ScriptedLM(script, len(tok)), tok, "x", late_stopping=0)
    assert greedy == "({MEM_WRITE-->A})"
    late = generate_write(_ScriptedLM(script, len(tok)), tok, "x", late_stopping=5, max_new_tokens=40)
    assert late == "({MEM_WRITE-->A})"
    # a barely-top first close, then a near-certain "A" and close: the second cut scores better (its mean log-prob
    # is over a longer sequence) and is chosen; the third pays for the unlikely ";" and is not
    script2 = [{a: 0.99}, {close: 0.51, semi: 0.49}] + [{a: 0.999}, {close: 0.99, semi: 0.01}] * 10
    late2 = generate_write(_ScriptedLM(script2, len(tok)), tok, "x", late_stopping=2, max_new_tokens=40)
    assert late2 == "({MEM_WRITE-->A;A})"


@pytest.mark.model
def test_write_generation_stops_on_a_repeated_triple_and_keeps_complete_triples_at_the_limit(smol):
    _, tok = smol

    def ids(s):
        return tok(s, add_special_tokens=False)["input_ids"]

    a, b, semi = ids("A")[0], ids("B")[0], ids(";")[0]
    loop = [{a: 0.9}, {semi: 0.9}, {b: 0.9}, {semi: 0.9}] * 20  # A;B;A;B;... never closed
    stats = Counter()
    assert generate_write(_ScriptedLM(loop, len(tok)), tok, "x", stats=stats) == "({MEM_WRITE-->A;B})"
    assert stats == {"repeat": 1}
    # without the repeat rule the token limit ends it mid-triple: the complete triples survive, the partial one not
    out = generate_write(_ScriptedLM(loop, len(tok)), tok, "x", stop_on_repeat=False, max_new_tokens=7, stats=stats)
    assert out == "({MEM_WRITE-->A;B;A})" and stats["limit"] == 1
