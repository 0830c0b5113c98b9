"""MemLLM perplexity evaluators (reference vs fast), metrics, and memory-write quality scoring."""

import contextlib
import math
import re
from collections import Counter
from types import SimpleNamespace
from unittest import mock

import numpy as np
import pytest
import torch

from retllm_utils.api import Triple, format_memllm_read_query, format_memllm_read_reply
from retllm_utils.memllm import perplexity as P
from retllm_utils.memllm.reading import ReadQuery
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
        # rows ③/⑤: branches mixed by P(opener); " the" stands for "({" so that p is not ~0 (not in the text)
        (P.ReadSetup(memory="m", positions="gold", queries="gold", mix=True), {"open_token": " the"}, False),
        (P.ReadSetup(memory="m", positions="gold", mix=True), {"open_token": " the"}, True),
        (P.ReadSetup(memory="m", positions="gold", mix=True), {"max_query_tokens": 5}, False),  # every read fails
    ]
    n_branching = 0
    for setup, kw, patch in setups:
        mask = {k: v for k, v in kw.items() if k in ("open_token", "mask_open")}
        none = P.fast_doc(model, tok, docs[0], P.ReadSetup(), **{"mask_open": setup.mask_open, **mask})
        with mock.patch.object(P, "read_query", fake_query) if patch else mock.patch.object(P, "OPEN", P.OPEN):
            ref = P.reference_doc(model, tok, docs[0], setup, lookup, **{k: v for k, v in kw.items() if k != "chunk"})
            fast = P.fast_doc(model, tok, docs[0], setup, lookup, **kw)
        assert abs(np.nanmean(ref.nll) - np.nanmean(fast.nll)) < 1e-4, setup
        assert np.nanmax(np.abs(ref.nll - fast.nll)) < 1e-3 and np.isnan(ref.nll[0]) and np.isnan(fast.nll[0])
        assert ref.reads == fast.reads and ref.attempts == fast.attempts
        assert ref.p_open.keys() == fast.p_open.keys() and ref.p_open == pytest.approx(fast.p_open, abs=1e-5)
        if setup.mix:
            assert len(ref.p_open) == len(docs[0].gold_reads) and all(0 < p < 1 for p in ref.p_open.values())
        if ref.reads:
            n_branching += 1
            t = ref.reads[0]["t"]
            if not setup.mix:  # (mixed, the call weighs p ~ 0.003 here; the toy-model test checks the formula)
                assert abs(ref.nll[t] - none.nll[t]) > 1e-3  # the call in context changed what follows
            assert np.allclose(ref.nll[:t], none.nll[:t], equal_nan=True, atol=1e-4)  # and nothing before it
    assert n_branching >= 5


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
    with pytest.raises(ValueError, match="gold read positions"):
        P.ReadSetup(memory="m", positions="model", mix=True)
    with pytest.raises(ValueError, match="need a memory"):
        P.ReadSetup(positions="gold")
    assert len(P.TABLE1_ROWS) == 10
    assert P.TABLE1_ROWS["⑨ gold target only"].results == "target"
    for name in ("③ MW[dev] memory", "⑤ gold dev triples"):  # official: gold positions, branches mixed by P("({")
        s = P.TABLE1_ROWS[name]
        assert s.positions == "gold" and s.queries == "model" and s.mix and not s.mask_open
    assert P.TABLE1_ROWS["⑤′ model-chosen positions (argmax)"].positions == "model"
    assert all(s.mask_open for n, s in P.TABLE1_ROWS.items() if not n.startswith(("③", "⑤ ")))
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
    kw = dict(tau_relation=0.9, tau_triple=0.5)
    assert score_embedded(near, gold, emb, tau_entity=cos - 0.01, **kw).precision == 1
    assert score_embedded(near, gold, emb, tau_entity=cos + 0.01, **kw).precision == 0
    assert score_exact(near, gold).precision == 0
    wrong_rel = [("United States of America", "continent", "North America")]
    assert score_embedded(wrong_rel, gold, emb, tau_entity=0.9, tau_relation=0.95, tau_triple=0.5).recall == 0
    # §3.1's tau_r: the subject's mean with the relation, (cos + 1) / 2, must reach it too
    mean = (cos + 1) / 2
    assert score_embedded(near, gold, emb, tau_entity=0.5, tau_relation=0.9, tau_triple=mean - 0.01).recall == 1
    assert score_embedded(near, gold, emb, tau_entity=0.5, tau_relation=0.9, tau_triple=mean + 0.01).recall == 0


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


# ------------------------------------------------------------------------------------------------ toy model tests
class _ToyTok:
    """A word-level tokenizer with offsets (MemLLM's "({", "})", "-->", ">>" one token each) for model-free tests."""

    PAT = re.compile(r"\(\{|\}\)|-->|>>|\s*[A-Za-z0-9]+|\s*[^\sA-Za-z0-9]")
    eos_token, chat_template = "</s>", None

    def __init__(self):
        self.inv = ["</s>"]
        self.vocab = {"</s>": 0}

    def convert_tokens_to_ids(self, s):
        if s not in self.vocab:
            self.vocab[s] = len(self.inv)
            self.inv.append(s)
        return self.vocab[s]

    def __call__(self, text, add_special_tokens=False, return_offsets_mapping=False):
        ms = list(self.PAT.finditer(text))
        out = {"input_ids": [self.convert_tokens_to_ids(m.group()) for m in ms]}
        if return_offsets_mapping:
            out["offset_mapping"] = [m.span() for m in ms]
        return out

    def decode(self, ids, **kw):
        return "".join(self.inv[i] for i in ids)


class _ToyCache:
    def __init__(self):
        self.ids = []

    def get_seq_length(self):
        return len(self.ids)

    def crop(self, k):
        self.ids = self.ids[:k]


class _ToyLM:
    """Next-token logits from the whole context: words of the reply in context are boosted (a reader that copies),
    "({" gets a logit that depends on the context length (so p differs between branches), the rest is flat."""

    V = 256

    def __init__(self, tok, boost=3.0):
        self.tok, self.boost, self.device = tok, boost, torch.device("cpu")

    def logits_for(self, ctx):
        tok, lg = self.tok, torch.zeros(self.V)
        arrow, close = tok.convert_tokens_to_ids("-->"), tok.convert_tokens_to_ids("})")
        if arrow in ctx:
            a = len(ctx) - 1 - ctx[::-1].index(arrow)
            if close in ctx[a:]:
                words = {tok.inv[i].strip() for i in ctx[a + 1 : ctx.index(close, a)]} - {","}
                for i, s in enumerate(tok.inv):
                    if s.strip() in words:
                        lg[i] += self.boost
        lg[tok.convert_tokens_to_ids("({")] = -1.0 + 0.5 * (len(ctx) % 3)
        return lg

    def __call__(self, input_ids, past_key_values=None, use_cache=True, logits_to_keep=None):
        assert len(self.tok.inv) < self.V
        cache = past_key_values if past_key_values is not None else _ToyCache()
        new, past = input_ids[0].tolist(), list(cache.ids)
        logits = torch.stack([self.logits_for(past + new[: i + 1]) for i in range(len(new))])[None]
        cache.ids = past + new
        return SimpleNamespace(logits=logits[:, -logits_to_keep:] if logits_to_keep else logits, past_key_values=cache)

    def probs(self, ctx):
        return torch.softmax(self.logits_for(list(ctx)).double(), -1)


def _toy_row(text, reads, mentions=()):
    """A docs_dev-shaped row: reads = [(word the read goes before, target, queries)]."""
    row = {
        "doc_idx": 0,
        "text": text,
        "read_chars": [],
        "read_target_spans": [],
        "read_targets": [],
        "mention_spans": [],
    }
    row["read_queries"] = []
    for word, target, queries in reads:
        a = text.index(word)
        row["read_chars"].append(a)
        row["read_target_spans"].append([a, a + len(target)])
        row["read_targets"].append([target])
        row["read_queries"].append([list(q) for q in queries])
    row["mention_spans"] = [[text.index(m), text.index(m) + len(m), 0] for m in mentions]
    return row


def _both(model, tok, doc, setup, lookup=None, **kw):
    return [fn(model, tok, doc, setup, lookup, **kw) for fn in (P.reference_doc, P.fast_doc)]


SKELETON = "Duff Gibson won gold with Jeff Pain and Melissa Hollingsworth in skeleton at Salt Lake ."
Q_TEAM, Q_SITE = [("", "teammate", "Duff Gibson")], [("skeleton", "location", "")]
SKELETON_READS = [
    ("Jeff", "Jeff Pain", Q_TEAM),
    ("Melissa", "Melissa Hollingsworth", Q_TEAM),
    ("Salt", "Salt Lake", Q_SITE),
]


def test_gold_target_only_is_not_worse_than_gold_target_added_at_same_query_points():
    """Two consecutive points ask the same queries (doc 0 of dev: Duff Gibson -> Jeff Pain -> Melissa Hollingsworth):
    ⑨'s reply must hold both targets, so ⑨ <= ⑧ in TARGET (a stale ⑨ call held only the first)."""
    tok = _ToyTok()
    model, doc = _ToyLM(tok), P.prepare_doc(tok, _toy_row(SKELETON, SKELETON_READS))
    memory = {("", "teammate", "Duff Gibson"): ["Melissa Hollingsworth", "Jeff Pain", "Bob Smith"]}
    memory[("skeleton", "location", "")] = ["Salt Lake"]

    def lookup(queries):
        return [e for q in queries for e in memory.get(tuple(q), [])]

    rows = ("⑦ ⑥ + gold queries", "⑧ ⑦ + gold target added", "⑨ gold target only")
    target = {}
    for name in rows:
        ref, fast = _both(model, tok, doc, P.TABLE1_ROWS[name], lookup)
        assert np.allclose(ref.nll, fast.nll, equal_nan=True, atol=1e-5) and ref.reads == fast.reads
        target[name] = P.aggregate([doc], [ref]).target
    assert target[rows[2]] <= target[rows[1]] <= target[rows[0]] + 1e-9
    assert target[rows[2]] < target[rows[1]]  # the distractor costs ⑧ something


def test_prepare_doc_merges_same_query_points_idempotently():
    tok = _ToyTok()
    row = _toy_row(SKELETON, SKELETON_READS)
    doc = P.prepare_doc(tok, row)
    assert len(doc.gold_reads) == 2 and doc.targets == [["Jeff Pain", "Melissa Hollingsworth"], ["Salt Lake"]]
    assert len(doc.target_tokens) == 3  # TARGET still averages over the three target spans
    merged = dict(row, read_chars=row["read_chars"][::2], read_queries=row["read_queries"][::2])
    merged |= {"read_targets": [["Jeff Pain", "Melissa Hollingsworth"], ["Salt Lake"]]}
    merged |= {"read_target_spans_all": [row["read_target_spans"][:2], row["read_target_spans"][2:]]}
    again = P.prepare_doc(tok, merged)  # a data set that merged them itself gives the same document
    assert (again.ids, again.gold_reads, again.targets, again.target_tokens) == (
        doc.ids,
        doc.gold_reads,
        doc.targets,
        doc.target_tokens,
    )
    assert (
        P.prepare_doc(tok, dict(row, read_queries=[Q_TEAM, Q_SITE, Q_TEAM])).gold_reads.keys() != doc.gold_reads.keys()
    )


def _scripted_query(script):
    """A stand-in for `read_query`: the next queries of `script` (None: no valid call), fed through the step."""
    it = iter(script)

    def fake(step, tokenizer, prefix=(), *, max_new_tokens=64):
        qs = next(it)
        qs = None if qs is None else [Triple(*q) for q in qs]
        ids = tokenizer(format_memllm_read_query(qs) if qs else "({MEM_READ(oops)-->")["input_ids"]
        step(list(prefix) + ids[:-1])
        return ReadQuery(qs, ids, "query" if qs else "invalid")

    return fake


@pytest.mark.parametrize("failure", ["no result", "no valid query"])
def test_a_failed_read_leaves_no_call_in_context(failure):
    """After a failed read the text continues from the plain pretext: its tokens score as with memory disabled."""
    tok = _ToyTok()
    model = _ToyLM(tok)
    text = "Duff Gibson won gold with Jeff Pain in skeleton and Jeff Pain won silver ."
    reads = [("Jeff", "Jeff Pain", Q_TEAM), ("Jeff Pain won", "Jeff Pain", Q_SITE)]
    row = _toy_row(text, reads)
    row["read_chars"][1] = text.index("Jeff Pain won")
    doc = P.prepare_doc(tok, row)
    t1, t2 = sorted(doc.gold_reads)
    plain = P.reference_doc(model, tok, doc, P.ReadSetup())

    def lookup(queries):  # the first call's reply holds "Jeff Pain", which a stale call would boost at t2
        return ["Jeff Pain"] if tuple(queries[0]) == Q_TEAM[0] else []

    if failure == "no result":
        setup, script = P.TABLE1_ROWS["⑦ ⑥ + gold queries"], None
    else:
        setup = P.TABLE1_ROWS["⑥ ⑤ + gold positions"]
        script = [Q_TEAM, None]
    for fn in (P.reference_doc, P.fast_doc):
        patch = mock.patch.object(P, "read_query", _scripted_query(script)) if script else contextlib.nullcontext()
        with patch:
            res = fn(model, tok, doc, setup, lookup)
        assert [r["t"] for r in res.reads] == [t1] and res.attempts == 2
        assert np.all(np.abs(res.nll[t1:t2] - plain.nll[t1:t2]) > 1e-3)  # the first call changed what followed
        assert np.allclose(res.nll[t2:], plain.nll[t2:], atol=1e-6), fn.__name__  # and left with the failed read


@pytest.mark.parametrize("row", ["⑤ gold dev triples", "⑥ ⑤ + gold positions"])
def test_a_repeated_query_is_read_again_in_every_row(row):
    """The official perplexity_eval never refuses a query equal to the call in context: ⑤ and ⑥ read by one rule."""
    tok = _ToyTok()
    model = _ToyLM(tok)
    text = "Duff Gibson won gold with Jeff Pain in skeleton and Jeff Pain won silver ."
    row_ = _toy_row(text, [("Jeff", "Jeff Pain", Q_TEAM), ("Jeff Pain won", "Jeff Pain", Q_SITE)])
    row_["read_chars"][1] = text.index("Jeff Pain won")
    doc = P.prepare_doc(tok, row_)
    for fn in (P.reference_doc, P.fast_doc):
        with mock.patch.object(P, "read_query", _scripted_query([Q_TEAM, Q_TEAM])):
            res = fn(model, tok, doc, P.TABLE1_ROWS[row], lambda queries: ["Jeff Pain"])
        assert [r["t"] for r in res.reads] == sorted(doc.gold_reads) and res.attempts == 2, fn.__name__


def test_merged_points_fold_on_the_first_query():
    """Official eval builder: a point whose first query is the previous point's first query folds into it."""
    row = {
        "read_chars": [5, 20, 40],
        "read_target_spans": [[5, 9], [20, 24], [40, 44]],
        "read_targets": [["A"], ["B"], ["C"]],
        "read_queries": [[["x", "r", ""], ["y", "s", ""]], [["x", "r", ""]], [["z", "r", ""]]],
    }
    from retllm_utils.memllm.table1 import _merged_points

    points = _merged_points(row)
    assert [p["char"] for p in points] == [5, 40] and points[0]["targets"] == ["A", "B"]
    assert len(points[0]["queries"]) == 2  # the merged point keeps its own queries


def test_memory_lookup_reads_as_the_official_evaluation():
    """Exact matches first, and a broad query kept (the reply truncates it) unless `drop_broad` asks otherwise."""
    from retllm_utils.memory import TripleMemory
    from retllm_utils.models import NgramEmbedder

    mem = TripleMemory(None, embedder=NgramEmbedder(), q_thr=3)
    mem.write_many([("Ann", "employer", f"Firm {i}") for i in range(5)] + [("Anne", "employer", "Other")])
    got = P.memory_lookup(mem)([Triple("Ann", "employer", "")])
    assert len(got) == 5 and "Other" not in got  # exact "Ann" first: the near miss "Anne" is left out
    assert P.memory_lookup(mem, drop_broad=True)([Triple("Ann", "employer", "")]) == []


def test_branch_mixing_nll_equals_the_formula():
    """Rows ③/⑤: -log(p p(x|read) + (1-p) p(x|no read)), p = P("({") mixed over branches; computed by hand."""
    tok = _ToyTok()
    model = _ToyLM(tok)
    text = "Duff Gibson won gold with Jeff Pain in skeleton at Salt Lake in Utah ."
    row = _toy_row(text, [("Jeff", "Jeff Pain", Q_TEAM), ("Salt", "Salt Lake", Q_SITE)])
    doc = P.prepare_doc(tok, row)
    ids, (t1, t2), o = doc.ids, sorted(doc.gold_reads), tok.convert_tokens_to_ids("({")
    replies = {Q_TEAM[0]: ["Jeff Pain", "Bob"], Q_SITE[0]: ["Salt Lake"]}

    def lookup(queries):
        return [e for q in queries for e in replies[tuple(q)]]

    setup = P.ReadSetup(memory="m", positions="gold", mix=True)
    with mock.patch.object(P, "read_query", _scripted_query([Q_TEAM, Q_SITE])):
        ref = P.reference_doc(model, tok, doc, setup, lookup)
    with mock.patch.object(P, "read_query", _scripted_query([Q_TEAM, Q_SITE])):
        fast = P.fast_doc(model, tok, doc, setup, lookup)

    def branch(t, q):
        return tok(format_memllm_read_query([q]) + format_memllm_read_reply(replies[q]))["input_ids"]

    want, p = np.full(len(ids), np.nan), {}
    for t in range(1, t1):  # before the first read: plain, "({" not masked
        want[t] = -math.log(model.probs(ids[:t])[ids[t]])
    p[t1] = float(model.probs(ids[:t1])[o])
    for k, (a, b, q) in enumerate([(t1, t2, Q_TEAM[0]), (t2, len(ids), Q_SITE[0])]):
        call = branch(a, q)
        for t in range(a, b + (k == 0)):
            pm, pp = model.probs(ids[:a] + call + ids[a:t]), model.probs(ids[:t])
            if t == b:  # the next read's p: P("({") of both branches, mixed
                p[b] = float(p[a] * pm[o] + (1 - p[a]) * pp[o])
                break
            no_read = pp[ids[t]] / (1 - pp[o]) if t == a else pp[ids[t]]  # no call opens at the read point
            want[t] = -math.log(p[a] * pm[ids[t]] + (1 - p[a]) * no_read)
    for res in (ref, fast):
        assert np.allclose(res.nll, want, equal_nan=True, atol=1e-5)
        assert res.p_open == pytest.approx(p) and len(res.reads) == 2
    # a read with no result leaves the no-read branch only, "({" masked at its read point
    with mock.patch.object(P, "read_query", _scripted_query([None, Q_SITE])):
        failed = P.fast_doc(model, tok, doc, setup, lookup)
    pp = model.probs(ids[:t1])
    assert failed.nll[t1] == pytest.approx(-math.log(pp[ids[t1]] / (1 - pp[o])), abs=1e-5)
    assert failed.p_open[t2] == pytest.approx(float(model.probs(ids[:t2])[o]))


def _toy_results(rng, n_docs, shift=0.0):
    docs, res = [], []
    for _ in range(n_docs):
        n = int(rng.integers(5, 12))
        docs.append(P.EvalDoc([0] * n, [(i, i + 1) for i in range(n)], {}, [], [], [[1, 2], [n - 1]], [[3]]))
        res.append(P.DocResult(np.concatenate([[np.nan], rng.gamma(2.0, 1.0, n - 1) + shift])))
    return docs, res


def test_paired_bootstrap_intervals():
    rng = np.random.default_rng(1)
    docs, a = _toy_results(rng, 40)
    b = [P.DocResult(r.nll - 0.3 + 0.1 * rng.standard_normal(len(r.nll))) for r in a]  # b lower by ~0.3
    for metric in ("OVERALL", "TARGET", "ENTITY"):
        diff, lo, hi = P.paired_bootstrap(docs, a, b, metric, n=500, seed=3)
        sa, sb = P.aggregate(docs, a), P.aggregate(docs, b)
        assert diff == pytest.approx(getattr(sa, metric.lower()) - getattr(sb, metric.lower()))
        assert lo <= diff <= hi and lo > 0  # the point difference inside, the ordering resolved
        assert (diff, lo, hi) == P.paired_bootstrap(docs, a, b, metric, n=500, seed=3)  # deterministic given seed
        assert P.paired_bootstrap(docs, a, a, metric, n=200, seed=0) == (0.0, 0.0, 0.0)
    names = [P.PAPER_CLAIMS[1][0], P.PAPER_CLAIMS[1][1]]
    table = P.claim_intervals(docs, {names[0]: a, names[1]: b}, n=200)
    assert [r["metric"] for r in table] == ["OVERALL", "TARGET", "ENTITY"]
    assert all(r["holds at 95%"] == "yes" and r["paper a - b"] > 0 for r in table)
    assert P.claim_intervals(docs, {names[0]: b, names[1]: a}, n=200)[0]["holds at 95%"] == "reversed"
    noise = [P.DocResult(r.nll + 1e-8) for r in a]  # rows that differ by float noise only: no ordering
    assert {r["holds at 95%"] for r in P.claim_intervals(docs, {names[0]: noise, names[1]: a}, n=200)} == {"undecided"}


def test_paper_table1_is_the_papers():
    assert len(P.PAPER_TABLE1) == 11 and P.PAPER_TABLE1["⑨ gold target only"] == (1.535, 0.337, 1.124)
    assert P.PAPER_TABLE1["#1 base model"] == (1.774, 1.180, 1.420)
    assert P.PAPER_TABLE1["④ ③ + gold positions and queries"] == (1.578, 0.786, 1.287)
    assert set(P.TABLE1_ROWS) - set(P.PAPER_TABLE1) == {"⑤′ model-chosen positions (argmax)"}
    assert all(a in P.TABLE1_ROWS and b in P.TABLE1_ROWS for a, b in P.PAPER_CLAIMS)


def test_rows_that_share_a_query_cache_decode_each_query_once_and_score_the_same():
    """A read's query depends on its plain pretext only: rows ③, ⑤ and ⑥ may share the decoded queries."""
    tok = _ToyTok()
    model = _ToyLM(tok)
    doc = P.prepare_doc(tok, _toy_row(SKELETON, SKELETON_READS))
    decoded = []

    def fake(step, tokenizer, prefix=(), *, max_new_tokens=64):
        decoded.append(1)
        ids = tokenizer(format_memllm_read_query([Triple(*Q_SITE[0])]))["input_ids"]
        step(list(prefix) + ids[:-1])
        return ReadQuery([Triple(*Q_SITE[0])], ids, "query")

    def lookup(queries):
        return ["Salt Lake", "Jeff Pain"]

    rows = [P.TABLE1_ROWS[r] for r in ("③ MW[dev] memory", "⑤ gold dev triples", "⑥ ⑤ + gold positions")]
    with mock.patch.object(P, "read_query", fake):
        alone = [fn(model, tok, doc, s, lookup) for s in rows for fn in (P.reference_doc, P.fast_doc)]
        n_alone, cache = len(decoded), {}
        shared = [
            fn(model, tok, doc, s, lookup, query_cache=cache) for s in rows for fn in (P.reference_doc, P.fast_doc)
        ]
    assert n_alone == 6 * len(doc.gold_reads) and len(decoded) - n_alone == len(doc.gold_reads) == len(cache)
    for a, b in zip(alone, shared):
        assert a.reads == b.reads and a.reads
        assert np.allclose(a.nll, b.nll, atol=1e-6, equal_nan=True)


def test_row_interval_and_target_gap_by_reply():
    """Error bars bracket the row's metric; a TARGET gap splits by whether the reply held other entities."""
    from retllm_utils.memllm.table1 import DocResult, EvalDoc, aggregate, row_interval, target_gap_by_reply

    docs, a, b = [], [], []
    for i in range(8):
        q = [[Triple("x", "r", "")], [Triple("y", "r", "")]]
        docs.append(
            EvalDoc(
                list(range(6)),
                [(k, k + 1) for k in range(6)],
                {2: 0, 4: 1},
                q,
                [["T"], ["U"]],
                [[2], [4]],
                [[1]],
                i,
                [0, 1],
            )
        )
        a.append(
            DocResult(
                np.array([np.nan, 1, 2.0 + i / 10, 1, 3, 1]),
                [{"t": 2, "queries": [], "results": ["T"]}, {"t": 4, "queries": [], "results": ["U", "V"]}],
            )
        )
        b.append(DocResult(np.array([np.nan, 1, 1.0, 1, 1, 1])))
    lo, hi = row_interval(docs, a, "TARGET")
    assert lo <= aggregate(docs, a).target <= hi and lo < hi
    gap = target_gap_by_reply(docs, a, b)
    assert gap["targets only"]["spans"] == 8 and gap["with other entities"]["a - b"] == pytest.approx(2.0)
    total = aggregate(docs, a).target - aggregate(docs, b).target
    assert sum(g["share of the gap"] for g in gap.values()) == pytest.approx(total)
