"""Table 4's write evaluation (`memllm.write_quality`): the paper's numbers, constrained decoding on toy models."""

import pytest
import torch
from test_generation import TOK, ProbStep, ids

from retllm_utils.api import Triple
from retllm_utils.memllm import generation as G
from retllm_utils.memllm import write_quality as W

SOURCE = "Duff Gibson ( born 1966 ) is a Canadian skeleton racer . He was born in Vaughan , Ontario . See Mediaș ."
RELATIONS = ["date of birth", "country of citizenship", "place of birth", "dissolved, abolished or demolished"]


def test_paper_table4_is_the_paper_s_table():
    assert list(W.PAPER_TABLE4) == ["late stopping", "without late stopping"]
    assert list(W.PAPER_TABLE4["late stopping"]) == ["Distant.", "+ Filtering", "+ 85% NoRel. Drop", "+ 10xAnnot."]
    assert list(W.PAPER_TABLE4["without late stopping"]) == ["Distant.", "+ All"]
    assert W.PAPER_TABLE4["late stopping"]["+ Filtering"] == {
        "Rec.": 0.517,
        "Prec.": 0.454,
        "Prec. (MB)": 0.827,
        "F1": 0.636,
    }
    assert W.paper_table4_row(True) == {"Rec.": 0.578, "Prec.": 0.425, "Prec. (MB)": 0.797, "F1": 0.670}
    assert W.paper_table4_row(False) == {"Rec.": 0.562, "Prec.": 0.448, "Prec. (MB)": 0.818, "F1": 0.666}
    for rows in W.PAPER_TABLE4.values():  # the paper's F1: harmonic mean of recall and model-based precision
        for row in rows.values():
            r, p = row["Rec."], row["Prec. (MB)"]
            assert row["F1"] == pytest.approx(2 * r * p / (r + p), abs=1.5e-3)


@pytest.mark.parametrize(
    "body, closed, ok",
    [
        ("", True, True),  # a call without triples
        ("Duff Gi", False, True),
        ("uff", False, False),  # not where a word starts
        ("Duff Gibson>>date of birth>>1966", True, True),
        ("Duff Gibson>>born>>1966", True, False),  # not a relation name
        ("Duff Gibson>>date of birth>>196", False, True),
        ("Duff Gibson>>date of birth>>196", True, False),  # not where a word ends
        ("Duff Gibson>>place of birth>>Vaughan\\, Ontario", True, True),  # escaped, whitespace ignored
        ("Duff Gibson>>place of birth>>Vaughan, Ontario", True, True),
        ("Duff Gibson>>place of birth>>Toronto", True, False),
        ("Duff Gibson>>place of birth>>(", False, False),  # an unescaped bracket would break the call
        ("Duff Gibson>>dissolved\\, ab", False, True),
        ("Duff Gibson>", False, True),  # the start of ">>"
        ("Duff Gibson>>>", False, False),
        ("Duff Gibson>>date of birth>>1966;", False, True),
        ("Duff Gibson>>date of birth>>1966;", True, False),
        (";", False, False),
        ("Duff Gibson>>date of birth", True, False),
        ("Duff Gibson>>date of birth>>1966>>x", False, False),
        ("Duff Gibson>>place of birth>>Media\ufffd", False, True),  # a byte token: its character comes next
        ("Duff Gibson>>place of birth>>Media\ufffd", True, False),
        ("Duff Gibson>>place of birth>>Mediaș", True, True),
        ("Duff Gibson>>place of birth>>Vaug\ufffd", False, False),  # no non-ASCII character follows "Vaug"
        ("Duff Gibson>>date of\ufffd", False, False),
        ("Duff\nGibson", False, False),  # a call's whitespace is single spaces
        ("Duff  Gibson", False, True),  # a space token, then a word token with its leading space
        ("Duff   Gibson", False, False),
    ],
)
def test_grammar_allows_spans_of_the_source_and_the_relation_names(body, closed, ok):
    assert W.WriteGrammar(SOURCE, RELATIONS)(body, closed) is ok


def test_grammar_for_a_head_reads_the_pretext_and_the_focus_sentence():
    g = W.WriteGrammar.for_head(G.write_head("Ann Lee is a chemist.", "She studied at Oxford."), ["educated at"])
    assert g("Ann Lee>>educated at>>Oxford", True) and not g("Ann Lee>>educated at>>USER_ST", True)


@pytest.mark.parametrize(
    "body, closed, ok",
    [
        ("Duff Gibson>>date of birth>>1966;Duff Gibson>>place of birth>>Vaughan", True, True),
        ("Duff Gibson>>date of birth>>1966;Duff Gibson>>date of birth>>1966", True, False),
        ("Duff Gibson>>date of birth>>1966;Duff Gibson>>date of birth>>", False, False),
        ("Duff Gibson>>date of birth>>1966;Duff Gibson>>date of b", False, False),  # only a taken relation fits
        ("Duff Gibson>>date of birth>>1966;Duff Gibson>>place of b", False, True),
        ("Duff Gibson>>date of birth>>1966;Duff  Gibson>>date of b", False, False),  # whitespace ignored
        ("Duff Gibson>>date of birth>>1966;Vaughan>>date of birth>>1966", True, True),  # another subject
    ],
)
def test_distinct_pairs_give_a_subject_each_relation_once_per_call(body, closed, ok):
    assert W.WriteGrammar(SOURCE, RELATIONS, distinct_pairs=True)(body, closed) is ok
    assert W.WriteGrammar(SOURCE, RELATIONS)(body, closed)  # off by default: each body above is allowed


class Wants:
    """A stand-in write model as a `Step`: position by position it wants `target`'s next character most, "})" next,
    then every other token in a fixed random order."""

    def __init__(self, target, seed=0):
        self.target, self.fed = target, 0
        self.rest = torch.rand(len(TOK), generator=torch.Generator().manual_seed(seed))

    def __call__(self, new):
        gen = max(self.fed - len(ids("x({MEM_WRITE-->")), -1) + 1 if self.fed else 0
        self.fed += len(new)
        logits = self.rest.clone()
        logits[TOK.convert_tokens_to_ids("})")] = 5.0
        if gen < len(self.target):
            logits[ids(self.target[gen])[0]] = 10.0
        return logits


@pytest.mark.parametrize("k", [0, 5])
def test_a_constrained_call_cuts_an_entity_to_a_span_of_the_text(k):
    target = "Duff Gibson>>country of citizenship>>Canadian Olympic team"
    free = G.write_call(Wants(target), TOK, "x", late_stopping=k, max_new_tokens=120)
    assert free.triples == [Triple("Duff Gibson", "country of citizenship", "Canadian Olympic team")]
    grammar = W.WriteGrammar(SOURCE, RELATIONS)
    call = G.write_call(Wants(target), TOK, "x", late_stopping=k, max_new_tokens=120, constraint=grammar)
    assert call.text == "({MEM_WRITE-->Duff Gibson>>country of citizenship>>Canadian })"  # "O" not allowed: "})"
    assert call.triples == [Triple("Duff Gibson", "country of citizenship", "Canadian")] and call.errors == []


def test_the_top_token_is_replaced_by_the_best_allowed_one():
    # the model's top subject character is never allowed; its second is
    script = [{"X": 0.6, "D": 0.3}, {"u": 0.9}, {"f": 0.9}, {"f": 0.9}, {">": 0.9}, {">": 0.9}]
    script += [{c: 0.9} for c in "date of birth>>1966"] + [{"})": 0.9}]
    call = G.write_call(ProbStep(script), TOK, "x", constraint=W.WriteGrammar(SOURCE, RELATIONS))
    assert call == G.WriteCall("({MEM_WRITE-->Duff>>date of birth>>1966})", "closed")


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("k", [0, 3])
def test_a_constrained_call_only_ever_holds_allowed_entities_and_relations(seed, k):
    # a model with random preferences: every triple of the constrained call is allowed, and the call parses
    class Noise:
        def __init__(self):
            self.gen = torch.Generator().manual_seed(seed)

        def __call__(self, new):
            logits = torch.randn(len(TOK), generator=self.gen) * 3
            logits[TOK.convert_tokens_to_ids("})")] -= 4  # long enough calls
            return logits

    grammar = W.WriteGrammar(SOURCE, RELATIONS)
    call = G.write_call(Noise(), TOK, "x", late_stopping=k, max_new_tokens=80, constraint=grammar)
    assert call.errors == [] and call.end in G.WRITE_ENDS
    for t in call.triples:
        assert grammar.entity(t.subject, True) and grammar.entity(t.object, True) and t.relation in RELATIONS
        assert "".join(t.subject.split()) in "".join(SOURCE.split())


def test_write_document_constrains_each_row_to_its_own_head():
    class ToyLM:
        device = "cpu"

        def __init__(self, target):
            self.step = Wants(target)

        def __call__(self, input_ids, past_key_values=None, use_cache=True, **kw):
            if past_key_values is None:  # a new call: the step counts from its prompt ("x" stands for the head)
                self.step.fed = 0
                input_ids = torch.tensor([ids("x({MEM_WRITE-->")])
            logits = self.step(input_ids[0].tolist())
            return type("Out", (), {"logits": logits[None, None], "past_key_values": 1})()

    head = G.write_head("Ann Lee is a chemist.", "She studied at Oxford.")
    rows = [{"text": head + "({MEM_WRITE-->})", "spans": [[len(head), len(head) + 16]]}]
    target = "Ann Lee>>educated at>>Oxford University"
    free, _ = W.write_document(ToyLM(target), TOK, rows)
    assert free == [Triple("Ann Lee", "educated at", "Oxford University")]
    constrained, raw = W.write_document(ToyLM(target), TOK, rows, relations=["educated at", "employer"])
    assert constrained == [Triple("Ann Lee", "educated at", "Oxford")] and raw == [
        "({MEM_WRITE-->" + target[:29] + "})"
    ]


@pytest.mark.parametrize("seed", range(12))
def test_a_constrained_late_stopping_call_carries_the_constrained_greedy_call(seed):
    class HashedNoise:  # logits depend only on the tokens fed so far: two runs agree wherever their texts do
        def __init__(self):
            self.fed = []

        def __call__(self, new):
            self.fed += list(new)
            logits = torch.randn(len(TOK), generator=torch.Generator().manual_seed(hash((seed, *self.fed)) % 2**62))
            logits[TOK.convert_tokens_to_ids("})")] += 2
            return logits * 3

    grammar = W.WriteGrammar(SOURCE, RELATIONS)
    late = G.write_call(HashedNoise(), TOK, "x", late_stopping=3, max_new_tokens=80, constraint=grammar)
    greedy = G.write_call(HashedNoise(), TOK, "x", max_new_tokens=80, constraint=grammar)
    assert late.greedy == greedy


def test_stored_write_calls_decode_once_and_again_when_the_settings_change(tmp_path):
    from retllm_utils.memllm.generation import WriteCall
    from retllm_utils.memllm.write_quality import stored_write_calls

    path, seen = tmp_path / "calls.json", []

    def decode(rows):
        seen.extend(r["id"] for r in rows)
        return [
            WriteCall(f"({{MEM_WRITE-->{r['id']}>>r>>x}})", "closed", greedy=WriteCall("g", "closed")) for r in rows
        ]

    rows = {0: [{"id": "a"}, {"id": "b"}], 1: [{"id": "c"}]}
    first, spent = stored_write_calls(path, {"adapter": "1"}, rows, decode)
    assert seen == ["a", "b", "c"] and first[0][1].greedy.text == "g"
    again, spent = stored_write_calls(path, {"adapter": "1"}, {0: rows[0][:1], 1: rows[1]}, decode)
    assert seen == ["a", "b", "c"] and spent == 0 and again[0] == first[0][:1]  # fewer sentences: a prefix
    stored_write_calls(path, {"adapter": "2"}, rows, decode)  # another adapter: decoded again
    assert seen == ["a", "b", "c", "a", "b", "c"]
