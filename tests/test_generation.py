"""MemLLM's shared decoders (`memllm.generation`) on scripted stand-in models: no real model, fast."""

import math
import warnings
from collections import Counter

import pytest
import torch

from retllm_utils.api import Triple
from retllm_utils.memllm import generation as G
from retllm_utils.memllm import reading as R


class ToyTokenizer:
    """Characters as tokens, plus the markers that are one token in SmolLM2's vocabulary ("({", "})")."""

    chat_template = None
    eos_token = "<eos>"
    SPECIAL = ["<eos>", "({", "})"]

    def __init__(self):
        self.vocab = self.SPECIAL + [chr(i) for i in range(32, 127)]
        self.index = {t: i for i, t in enumerate(self.vocab)}

    def __len__(self):
        return len(self.vocab)

    def __call__(self, text, add_special_tokens=False):
        ids, i = [], 0
        while i < len(text):
            special = next((s for s in self.SPECIAL if text.startswith(s, i)), None)
            ids.append(self.index[special or text[i]])
            i += len(special or text[i])
        return {"input_ids": ids}

    def decode(self, ids, skip_special_tokens=False):
        return "".join(self.vocab[i] for i in ids)

    def convert_tokens_to_ids(self, token):
        return self.index[token]


TOK = ToyTokenizer()


def ids(text):
    return TOK(text)["input_ids"]


class ScriptedStep:
    """A stand-in read or write model as a `Step`: `respond(text so far)` says how the text goes on ("" ends it),
    and the next token is the first of that. The plan is kept while the fed tokens follow it; when they leave it (a
    memory reply) or it is used up, the script is asked again, and a forced piece (an opener fed with the text before
    it) keeps the plan the script makes for the text before the piece. The end token is always the second choice
    (late stopping takes it after a suppressed "})", so a scripted call ends where greedy decoding ends it)."""

    def __init__(self, respond, seen=None):
        self.respond, self.fed, self.plan, self.seen = respond, [], "", seen if seen is not None else []

    def __call__(self, new):
        start = len(TOK.decode(self.fed))
        self.fed += list(new)
        text = TOK.decode(self.fed)
        if not (self.plan.startswith(text) and len(self.plan) > len(text)):
            self.seen.append(text)
            self.plan = next(
                (
                    p
                    for c in range(start, len(text))
                    if (p := text[:c] + self.respond(text[:c])).startswith(text) and len(p) > len(text)
                ),
                text + self.respond(text),
            )
        rest = self.plan[len(text) :]
        logits = torch.full((len(TOK),), -10.0)
        logits[TOK.convert_tokens_to_ids("<eos>")] = 0.0
        logits[ids(rest)[0] if rest else TOK.convert_tokens_to_ids("<eos>")] = 10.0
        return logits


class ProbStep:
    """A stand-in model whose next-token probabilities follow a script, one {token text: prob} per call."""

    def __init__(self, script):
        self.script, self.calls, self.fed = script, 0, []

    def __call__(self, new):
        self.fed.append(list(new))
        probs = self.script[min(self.calls, len(self.script) - 1)]
        self.calls += 1
        logits = torch.full((len(TOK),), -30.0)
        for token, p in probs.items():
            logits[TOK.convert_tokens_to_ids(token) if token in TOK.SPECIAL else ids(token)[0]] = math.log(p)
        return logits


def chars(text, p=0.9):
    """A script writing `text` one character per step."""
    return [{c: p} for c in text]


# ------------------------------------------------------------------------------------------------ write
def test_write_call_feeds_the_opener_as_its_own_piece_and_parses_triples():
    step = ProbStep(chars("A>>r>>B;C>>r>>D") + [{"})": 0.9}])
    call = G.write_call(step, TOK, G.write_head("Pre.", "Focus."))
    assert step.fed[0] == ids("Pre.({USER_ST})Focus.({USER_END})") + ids("({MEM_WRITE-->")
    assert call == G.WriteCall("({MEM_WRITE-->A>>r>>B;C>>r>>D})", "closed")
    assert call.triples == [Triple("A", "r", "B"), Triple("C", "r", "D")] and call.errors == []


def letters(n, p=0.5, close=0.6):
    """A script writing ";X" for n new letters X, each followed by a top "})": every cut point scores worse."""
    return [s for c in "defghijklmnopqrstuvwxyz"[:n] for s in ({c: p, ";": 0.2}, {"})": close, ";": 1 - close})]


def test_greedy_stops_at_the_first_close_late_stopping_picks_the_best_cut():
    # a barely-top first "})", then near-certain "B" and "})": the second cut has the better mean log-prob (over a
    # longer sequence) and is chosen; the later ones pay for the unlikely ";" and are not
    script = [{"A": 0.99}, {"})": 0.51, ";": 0.49}] + [
        s for c in "BCDEFG" for s in ({c: 0.999}, {"})": 0.99, ";": 0.01})
    ]
    assert G.write_call(ProbStep(script), TOK, "x").text == "({MEM_WRITE-->A})"
    stats = Counter()
    late = G.write_call(ProbStep(script), TOK, "x", late_stopping=2, max_new_tokens=40, stats=stats)
    assert late == G.WriteCall("({MEM_WRITE-->A;B})", "late stop") and stats == {"late stop": 1} and late.cuts == 3
    # the first cut is the best when the text after it only gets less likely
    script2 = [{"A": 0.99}, {"})": 0.6, ";": 0.4}] + letters(10, 0.3, 0.55)
    late2 = G.write_call(ProbStep(script2), TOK, "x", late_stopping=5, max_new_tokens=40)
    assert late2.text == "({MEM_WRITE-->A})" and late2.cuts == 5


@pytest.mark.parametrize("k", [1, 3, 5])
def test_late_stopping_stops_once_the_best_cut_is_k_cut_points_old(k):
    # every later cut scores worse: the K-th top "})" without improvement is taken (appendix A; the official
    # processor records K cut points, the best first), with the repeat rule on (the default): no triple repeats
    script = [{"A": 0.99}, {"})": 0.9, ";": 0.1}] + letters(20)
    step = ProbStep(script)
    call = G.write_call(step, TOK, "x", late_stopping=k, max_new_tokens=60)
    assert call.text == "({MEM_WRITE-->A})" and call.end == "late stop" and call.cuts == k
    assert step.calls == 1 + 1 + 2 * k  # the prompt, "A", then K times ";X" before the (K+1)-th "})" ends it


def test_late_stopping_writes_more_than_greedy_when_the_model_repeats_itself_first():
    # a model that repeats its triple after the first suppressed "})", then writes a new one: stopping at the first
    # repeat would end decoding with one cut point (greedy's output); late stopping goes on and cuts after the new
    # triple, the repeat removed from the call
    script = (
        chars("A>>r>>B", 0.99)
        + [{"})": 0.51, ";": 0.49}]
        + chars("A>>r>>B;C>>r>>D", 0.99)
        + [{"})": 0.95, ";": 0.05}]
        + letters(10, 0.3)
    )
    greedy = G.write_call(ProbStep(script), TOK, "x")
    stats = Counter()
    late = G.write_call(ProbStep(script), TOK, "x", late_stopping=5, max_new_tokens=120, stats=stats)
    assert greedy.triples == [Triple("A", "r", "B")] and greedy.end == "closed"
    assert late.triples == [Triple("A", "r", "B"), Triple("C", "r", "D")]
    assert late.text == "({MEM_WRITE-->A>>r>>B;C>>r>>D})" and stats == {"late stop": 1} and late.cuts == 1 + 5


def test_a_repeated_triple_ends_the_call_and_keeps_what_came_before():
    loop = chars("A>>r>>B;C>>r>>D;A>>r>>B;C>>r>>D;" * 4)
    stats = Counter()
    call = G.write_call(ProbStep(loop), TOK, "x", stats=stats)
    assert call == G.WriteCall("({MEM_WRITE-->A>>r>>B;C>>r>>D})", "repeat") and stats == {"repeat": 1}


def test_under_late_stopping_the_kth_repeat_ends_a_loop_and_repeats_leave_the_call():
    # no "})" at all: K = 3 repeated triples end decoding (a loop's cost is bounded), the call keeps one copy
    step = ProbStep(chars("A>>r>>B;C>>r>>D;" * 6))
    call = G.write_call(step, TOK, "x", late_stopping=3, max_new_tokens=200)
    assert call == G.WriteCall("({MEM_WRITE-->A>>r>>B;C>>r>>D})", "repeat") and call.cuts == 0
    assert step.calls == len("A>>r>>B;C>>r>>D;A>>r>>B;C>>r>>D;A>>r>>B;")
    # a loop with ever likelier "})": the best cut lies inside the loop; its repeats are removed from the call
    unsure = [{c: 0.6, "~": 0.4} for c in "A>>r>>B"]  # a costly first triple, a near-certain loop after it
    loop = unsure + [s for _ in range(9) for s in ({"})": 0.51, ";": 0.49}, *chars("A>>r>>B", 0.999))]
    late = G.write_call(ProbStep(loop), TOK, "x", late_stopping=5, max_new_tokens=200)
    assert late.text == "({MEM_WRITE-->A>>r>>B})" and late.end == "late stop" and late.cuts == 6


def test_an_unclosed_call_keeps_its_complete_triples():
    stats = Counter()
    call = G.write_call(ProbStep(chars("A>>r>>B;C>>r>>D;E>>r")), TOK, "x", max_new_tokens=18, stats=stats)
    assert call == G.WriteCall("({MEM_WRITE-->A>>r>>B;C>>r>>D})", "limit") and stats == {"limit": 1}
    ended = G.write_call(ProbStep(chars("A>>r>>B;E>>") + [{"<eos>": 0.9}]), TOK, "x")
    assert ended.text == "({MEM_WRITE-->A>>r>>B})" and ended.end == "limit"
    nothing = G.write_call(ProbStep(chars("A>>r>>B")), TOK, "x", max_new_tokens=5)
    assert nothing.text == "({MEM_WRITE-->})" and nothing.triples == []


def test_the_close_token_must_be_one_token():
    class Split(ToyTokenizer):
        SPECIAL = ["<eos>", "({"]

    with pytest.raises(ValueError, match="one"):
        G.write_call(ProbStep([{"A": 1.0}]), Split(), "x")


# ------------------------------------------------------------------------------------------------ read
def test_read_query_after_the_forced_opener():
    step = ScriptedStep(lambda text: "Ann>>employer>>;>>founded by>>Bob)-->" if text.endswith("({MEM_READ(") else "?")
    q = R.read_query(step, TOK, ids("Text "))
    assert step.fed[: len(ids("Text ({MEM_READ("))] == ids("Text ") + ids("({MEM_READ(")
    assert q.queries == [Triple("Ann", "employer", ""), Triple("", "founded by", "Bob")] and q.end == "query"
    assert TOK.decode(q.ids) == "({MEM_READ(Ann>>employer>>;>>founded by>>Bob)-->"
    assert len(step.fed) == len(ids("Text ")) + len(q.ids) - 1  # the last token is left to the caller


def test_a_read_query_is_not_cut_at_an_escaped_separator_inside_a_term():
    # a subject ending in ")--" is written "x\\)--" and then ">>": the text passes through "x\\)-->", which must not
    # end the query (the call's own ")-->" does)
    step = ScriptedStep(lambda text: r"x\)-->>r>>)-->" if text.endswith("({MEM_READ(") else "?")
    q = R.read_query(step, TOK, ids("Text "))
    assert q.end == "query" and q.queries == [Triple("x)--", "r", "")]


@pytest.mark.parametrize(
    "query, end",
    [
        ("a>>r>>;b>>r>>;c>>r>>;d>>r>>)-->", "too many"),  # MAX_QUERIES = 3: a fourth query is abandoned as it starts
        ("a>>r>>;a>>r>>;b>>r>>)-->", "repeat"),
        ("a>>r>>b)-->", "invalid"),  # both entities given: not a MemLLM query
        ("a" * 40, "limit"),
    ],
)
def test_read_query_abandons_degenerate_calls_when_a_limit_is_given(query, end):
    q = R.read_query(ScriptedStep(lambda text: query), TOK, max_new_tokens=30, max_queries=3)
    assert q.queries is None and q.end == end
    if end in ("too many", "repeat"):  # at once: at the ';' that starts the fourth or ends the repeated query
        assert TOK.decode(q.ids).endswith(";") and TOK.decode(q.ids).count(";") == (3 if end == "too many" else 2)
    three = R.read_query(ScriptedStep(lambda text: "a>>r>>;b>>r>>;c>>r>>)-->"), TOK)
    assert len(three.queries) == 3


@pytest.mark.parametrize(
    "query, queries, end",
    [
        ("a>>r>>;b>>r>>;c>>r>>;d>>r>>)-->", ["a", "b", "c", "d"], "query"),  # no limit on their number
        ("a>>r>>;a>>r>>;b>>r>>)-->", ["a", "b"], "query"),  # a repeat is kept once, not the end of the call
        ("a>>r>>b;c>>r>>;>>>>x)-->", ["c"], "query"),  # invalid queries are skipped, the valid one kept
        ("a>>r>>;b>>r>>;b>>r>>;b>>r>>;b>>r", ["a", "b"], "limit"),  # cut short: its complete queries
    ],
)
def test_read_query_keeps_every_valid_query_as_the_official_evaluation(query, queries, end):
    q = R.read_query(ScriptedStep(lambda text: query), TOK, max_new_tokens=len(TOK(query)["input_ids"]))
    assert q.end == end and [t.subject for t in q.queries] == queries


def test_read_query_ends_at_the_end_token():
    q = R.read_query(ScriptedStep(lambda text: "a>>r" if text.endswith("(") else ""), TOK)
    assert q.queries is None and q.end == "end" and TOK.decode(q.ids) == "({MEM_READ(a>>r"


# ------------------------------------------------------------------------------------------------ text
def test_continue_text_stops_before_the_read_opener_unless_reads_are_off():
    def respond(text):
        return "Ann studied at ({MEM_READ(" if text == "Hi." else "x"

    step = ScriptedStep(respond)
    out = R.continue_text(step, step(ids("Hi.")), TOK, max_new_tokens=50)
    assert TOK.decode(out.ids) == "Ann studied at " and out.end == "read"
    assert int(out.logits.argmax()) == TOK.convert_tokens_to_ids("({")
    off = ScriptedStep(respond)
    out = R.continue_text(off, off(ids("Hi.")), TOK, max_new_tokens=50, reads=False)
    assert "({" not in TOK.decode(out.ids) and out.end == "end"  # "({" removed: the end token is the next best
    long = ScriptedStep(lambda text: "x" * 10)
    limited = R.continue_text(long, long(ids("Hi.")), TOK, max_new_tokens=3)
    assert TOK.decode(limited.ids) == "xxx" and limited.end == "limit" and long.fed == ids("Hi.xx")


def test_model_step_feeds_only_new_ids_and_keeps_the_cache():
    class Model:
        device = "cpu"

        def __init__(self):
            self.calls = []

        def __call__(self, input_ids, past_key_values=None, use_cache=True, **kw):
            self.calls.append((input_ids[0].tolist(), past_key_values, kw))
            cache = (past_key_values or 0) + input_ids.shape[1]
            return type("Out", (), {"logits": torch.zeros(1, input_ids.shape[1], 5), "past_key_values": cache})()

    m = Model()
    step = G.ModelStep(m)
    assert step([1, 2, 3]).shape == (5,) and step([4]).shape == (5,)
    assert m.calls == [([1, 2, 3], None, {"logits_to_keep": 1}), ([4], 3, {"logits_to_keep": 1})] and step.cache == 4
    G.ModelStep(m, 7, last_logits_only=False)([5])
    assert m.calls[-1] == ([5], 7, {})


def test_model_step_passes_the_cache_under_the_name_the_installed_transformers_uses():
    # transformers 5.24 renamed `past_key_values` to `cache`: the old name raises a FutureWarning (removal in 5.40)
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2)
    model = AutoModelForCausalLM.from_config(cfg).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        full, _ = G.forward_cached(model, [1, 2, 3, 4, 5])
        step = G.ModelStep(model)
        first, last = step([1, 2, 3]), step([4, 5])
    assert full.shape == (5, 50)
    assert torch.allclose(first, full[2], atol=1e-5) and torch.allclose(last, full[4], atol=1e-5)


class HashedNoise:
    """A random model whose logits depend only on the tokens fed so far (two runs agree wherever their texts do)."""

    def __init__(self, seed):
        self.seed, self.fed = seed, []

    def __call__(self, new):
        self.fed += list(new)
        gen = torch.Generator().manual_seed(hash((self.seed, *self.fed)) % 2**62)
        logits = torch.randn(len(TOK), generator=gen) * 3
        logits[TOK.convert_tokens_to_ids("})")] += 1.5  # calls close now and then
        logits[[TOK.convert_tokens_to_ids(c) for c in ">;AB"]] += 3  # short, repeating triples
        return logits


@pytest.mark.parametrize("seed", range(40))
@pytest.mark.parametrize("k", [1, 3, 5])
def test_the_greedy_call_a_late_stopping_run_carries_is_a_greedy_run_s_call(seed, k):
    late = G.write_call(HashedNoise(seed), TOK, "x", late_stopping=k, max_new_tokens=60)
    greedy = G.write_call(HashedNoise(seed), TOK, "x", max_new_tokens=60)
    assert late.greedy is not None and (late.greedy.text, late.greedy.end) == (greedy.text, greedy.end)
    assert greedy.greedy is None


def test_the_greedy_call_on_the_way_for_scripted_ends():
    # closed by "})", a repeat before any "})", and the token limit
    closing = chars("A>>r>>B", 0.99) + [{"})": 0.51, ";": 0.49}] + chars("C>>r>>D", 0.99) + letters(10, 0.3)
    looping = chars("A>>r>>B;C>>r>>D;" * 6)
    for script, end in ((closing, "closed"), (looping, "repeat"), (chars("A>>r>>B;C>>r"), "limit")):
        late = G.write_call(ProbStep(script), TOK, "x", late_stopping=3, max_new_tokens=40)
        greedy = G.write_call(ProbStep(script), TOK, "x", max_new_tokens=40)
        assert late.greedy == greedy and greedy.end == end
