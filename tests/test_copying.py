"""Names copied exactly: call terms limited to the user's words (writes) and stored phrases (reads), the
invented-name count that measures the same thing after the fact, and answers limited to the reply's facts."""

import pytest
import torch
from transformers import LogitsProcessor

from retllm_utils import api
from retllm_utils.chat.copying import (
    AllowedTerms,
    CopyAnswerNames,
    _in_relation,
    _made_up_reply,
    _open_term,
    allowed_terms,
    answer_continuations,
    answer_names_ok,
    content_stems,
    invented_terms,
    known_near,
    recased,
    said_whole,
    slips_of_known,
    stored_relation_by_words,
    user_spans,
)
from retllm_utils.controller import HFGenerator, RetLLMController, ScriptedGenerator
from retllm_utils.memory import TripleMemory
from retllm_utils.prompts import chat_prompt
from retllm_utils.retllm.synthetic import fact_sentence

USER = "Cyrus Alfred, Tia Batres, and Pasquale Ballif are customers of Pfizer's."


def test_user_spans_are_word_runs_without_edge_punctuation():
    spans = user_spans(USER)
    assert {"Cyrus Alfred", "Tia Batres", "Pasquale Ballif", "Pfizer", "Pfizer's", "customers of"} <= spans
    assert "Alfred," not in spans and "Pascule Ballif" not in spans and "Pfizer." not in spans


def test_reads_may_name_stored_phrases_writes_only_the_users_words():
    mem = TripleMemory(embedder=_Flat())
    mem.write("Dorothea Altemus", "employed by", "Pfizer")
    allowed = allowed_terms("Who works for Pfizer?", mem)
    assert "Dorothea Altemus" in allowed.read and "Dorothea Altemus" not in allowed.write
    assert allowed_terms("Who works for Pfizer?", mem, cap=0).read == allowed.write
    assert allowed_terms("Who works for Pfizer?", mem, read_stored_names=False).read == allowed.write


@pytest.mark.parametrize("from_user", [True, False])
def test_the_controller_holds_a_reads_names_to_the_users_words_when_asked(from_user):
    mem = TripleMemory(embedder=_Flat())
    mem.write("Ilse Keller", "employed by", "Adidas")
    gen = _Answers("[MEM_READ{Isabel Lombardi>>employed by>>}:")
    seen = []
    gen_call = gen.__call__
    ctl = RetLLMController(
        lambda text, pause=None, **kw: seen.append(kw["allowed"]) or gen_call(text, pause, **kw),
        mem,
        lambda u: u,
        copy_names=True,
        read_names_from_user=from_user,
    )
    ctl.chat("Remind me, who employs Isabel Lombardi?")
    assert "Isabel Lombardi" in seen[0].read and ("Ilse Keller" in seen[0].read) is not from_user


@pytest.mark.parametrize(
    "generated, state",
    [
        ("[MEM_WRITE{Pas", ("Pas", ">>", False)),
        ("[MEM_READ{>>employed by>>Pf", ("Pf", "}", True)),
        ("[MEM_WRITE{Ann>>employed ", None),  # the relation is free
        ("[MEM_WRITE{Ann>>employed by>>Pfizer}]", None),
        ("I don't know.", None),
    ],
)
def test_the_open_term_is_found_from_the_generated_text(generated, state):
    assert _open_term(generated) == state


@pytest.mark.parametrize(
    "generated, piece, made_up",
    [
        ("", ":{", True),  # a reply of the model's own, with no read before it
        ("", ":]", True),  # an empty one
        ("[MEM_READ{Ann>>>>SAP}]", ":{", True),
        ("[MEM_READ", "{", False),  # a call's own brace
        ("[MEM_WRITE{Ann>>employed by>>SAP}", "]", False),  # a write's close
        ("Ann Lee is employed by SAP", ".", False),
    ],
)
def test_a_reply_the_model_starts_itself_is_told_apart_from_the_calls_own_markup(generated, piece, made_up):
    assert _made_up_reply(generated, piece) is made_up


def test_the_relation_is_known_from_the_generated_text():
    assert _in_relation("[MEM_READ{Patel>>Volks") and _in_relation("[MEM_READ{>>")
    assert not _in_relation("[MEM_READ{Patel") and not _in_relation("[MEM_READ{>>employed by>>SAP")


def test_invented_terms_counts_call_terms_the_user_never_wrote():
    allowed = AllowedTerms(frozenset(user_spans(USER)), frozenset(user_spans(USER)) | {"Dorothea Altemus"})
    text = "[MEM_WRITE{Cyrus Alfred>>customer of>>Pfizer}][MEM_WRITE{Pascule Ballif>>customer of>>Pfizer}]"
    assert invented_terms(text, allowed) == (["Pascule Ballif"], 4)
    assert invented_terms("[MEM_READ{Dorothea Altemus>>>>}:", allowed) == ([], 1)


class _Flat:
    """A trivial encoder (no model): every phrase the same vector; enough for exact reads and writes."""

    name, dim, thresholds = "flat-test", 4, {}

    def encode(self, texts):
        import numpy as np

        v = np.zeros((len(texts), 4), dtype="float32")
        v[:, 0] = 1
        return v


class _Push(LogitsProcessor):
    """Pushes the real model towards `texts` its output is still a prefix of, token by token, the first the most: a
    model that respells a name (the first text) and otherwise knows the API (the second)."""

    def __init__(self, tokenizer, prompt_len, *texts):
        self.tok, self.prompt_len, self.texts = tokenizer, prompt_len, texts
        self.vocab = {i: tokenizer.decode([i]) for i in range(len(tokenizer))}

    def __call__(self, input_ids, scores):
        done = self.tok.decode(input_ids[0, self.prompt_len :])
        scores = scores.clone()
        for k, text in enumerate(t for t in self.texts if t.startswith(done) and len(done) < len(t)):
            rest = text[len(done) :]
            best = max((i for i, t in self.vocab.items() if t and rest.startswith(t)), key=lambda i: len(self.vocab[i]))
            scores[0, best] += 100.0 / (k + 1)
        return scores


@pytest.mark.model
def test_a_pushed_respelling_is_written_only_without_the_copy_constraint(smol):
    model, tok = smol
    bad, good = (f"[MEM_WRITE{{{name}>>customer of>>Pfizer}}]" for name in ("Pascule Ballif", "Pasquale Ballif"))
    results = {}
    for copy in (False, True):
        prompt = chat_prompt(tok, USER)
        n = len(tok(prompt, add_special_tokens=False)["input_ids"])
        gen = HFGenerator(model, tok, max_new_tokens=24, logits_processor=[_Push(tok, n, bad, good)])
        mem = TripleMemory(embedder=_Flat())
        RetLLMController(gen, mem, lambda u: chat_prompt(tok, u), copy_names=copy).chat(USER)
        results[copy] = [tuple(t) for t in mem]
    assert results[False] == [("Pascule Ballif", "customer of", "Pfizer")]
    assert results[True] == [("Pasquale Ballif", "customer of", "Pfizer")]


@pytest.mark.model
def test_a_pushed_respelt_relation_is_stored_as_said_only_with_a_relation_vocabulary(smol):
    # a model that writes "is living in" for "lives in": free relations keep it; with `relation_names` the relation
    # must be a vocabulary name or the user's words, and a vocabulary name is still allowed where the model picks it
    model, tok = smol
    user = "Ivan Hughes lives in Curitiba."
    bad, good = "[MEM_WRITE{Ivan Hughes>>is living in>>Curitiba}]", "[MEM_WRITE{Ivan Hughes>>lives in>>Curitiba}]"
    voc = "[MEM_WRITE{Ivan Hughes>>residence>>Curitiba}]"
    results = {}
    for names, texts in ((None, (bad, good)), (["residence"], (bad, good)), (["residence"], (bad, voc, good))):
        prompt = chat_prompt(tok, user)
        n = len(tok(prompt, add_special_tokens=False)["input_ids"])
        gen = HFGenerator(model, tok, max_new_tokens=24, logits_processor=[_Push(tok, n, *texts)])
        mem = TripleMemory(embedder=_Flat())
        RetLLMController(gen, mem, lambda u: chat_prompt(tok, u), copy_names=True, relation_names=names).chat(user)
        results[len(texts), names is None] = [tuple(t) for t in mem]
    assert results[2, True] == [("Ivan Hughes", "is living in", "Curitiba")]
    assert results[2, False] == [("Ivan Hughes", "lives in", "Curitiba")]
    assert results[3, False] == [("Ivan Hughes", "residence", "Curitiba")]


def test_allowed_relations_are_the_vocabulary_and_the_users_words_or_free():
    free = allowed_terms("Ann Lee lives in Lyon.")
    assert free.relations == frozenset()
    rel = allowed_terms("Ann Lee lives in Lyon.", relations=["employed by"]).relations
    assert {"employed by", "lives in", "lives"} <= rel and "is living in" not in rel
    assert allowed_terms("Ann Lee lives in Lyon.", relations=["employed by"]).read_relations == frozenset()
    memory = [("Bo Moss", "was born in", "Porto")]
    read = allowed_terms("Where was Bo Moss born?", memory, relations=["employed by"], read_relations=True)
    assert {"was born in", "employed by", "born", ""} <= read.read_relations and "is born in" not in read.read_relations
    stored = allowed_terms("Where was Bo Moss born?", memory, relations=["employed by"], read_relations="stored")
    assert stored.read_relations == {"was born in", "employed by", ""}  # no user span ("born", "Bo Moss")
    q, names = "Where was Bo Moss born?", ["employed by"]
    big = allowed_terms(q, memory * 3, cap=2, relations=names, read_relations="stored")
    assert big.read_relations == frozenset()  # a memory too large to list: the read's relation stays free


@pytest.mark.model
def test_a_pushed_made_up_reply_and_two_term_read_are_refused_by_the_copy_constraint(smol):
    # a model that closes a read after two terms (nothing parses, nothing pauses) and then answers with a memory
    # reply of its own, naming a person nobody stored; its next best is a well-formed read: with copy_names, that
    model, tok = smol
    user = "How are Parisa Patel and Volkswagen connected?"
    bad = "[MEM_READ{Parisa Patel>>Volkswagen}::{Pedro Patel>>customer of>>Volkswagen}]Pedro Patel is a customer."
    good = "[MEM_READ{Parisa Patel>>Volkswagen>>}:"
    mem = TripleMemory(embedder=_Flat())
    mem.write("Parisa Patel", "manager of", "Volkswagen")
    turns = {}
    for copy in (False, True):
        prompt = chat_prompt(tok, user)
        n = len(tok(prompt, add_special_tokens=False)["input_ids"])
        gen = HFGenerator(model, tok, max_new_tokens=40, logits_processor=[_Push(tok, n, bad, good)])
        turns[copy] = RetLLMController(gen, mem, lambda u: chat_prompt(tok, u), copy_names=copy).chat(user)
    assert "Pedro Patel" in turns[False].answer
    assert [e["event"] for e in turns[False].trace] == ["model", "error"]  # the two-term read did not parse
    assert "Pedro" not in turns[True].model_text
    assert any(e["event"] == "read" for e in turns[True].trace)


FACTS = ["Alessia Demir is employed by Uber.", "Mateus Lim is employed by SAP.", "Rafael Vu is employed by Uber."]


@pytest.mark.parametrize(
    "text, rests, complete",
    [
        ("", set(FACTS), False),  # any fact may come first; nothing stated is no answer
        ("Mateus Lim is employed by S", {"AP."}, False),
        # once each; may stop here
        ("Mateus Lim is employed by SAP.", {" " + FACTS[0], " " + FACTS[2]}, True),
        (" ".join(FACTS), set(), True),  # every fact stated: only the end is left
    ],
)
def test_an_answer_may_only_go_on_with_the_facts_not_yet_stated(text, rests, complete):
    assert answer_continuations(text, FACTS) == (rests, complete)


@pytest.mark.parametrize(
    "text, rests, complete",
    [
        ("", {FACTS[0]}, False),  # the reply's first fact first
        (FACTS[0], {" " + FACTS[1]}, True),  # then the next one, or the end
        (f"{FACTS[0]} {FACTS[1]} R", {"afael Vu is employed by Uber."}, False),
    ],
)
def test_in_order_an_answer_goes_on_with_the_next_fact_only(text, rests, complete):
    assert answer_continuations(text, FACTS, in_order=True) == (rests, complete)
    assert answer_continuations(f"{FACTS[0]} {FACTS[2]}", FACTS, in_order=True) is None  # Mateus Lim skipped


@pytest.mark.parametrize(
    "text",
    ["Alessia Demir is employed by SAP", "Mateus Lim is employed by SAP. Mateus Lim", "Mateus Lim is employed by SAP "],
)
def test_a_drifted_or_repeated_fact_is_no_answer_prefix(text):
    assert answer_continuations(text, FACTS) is None


def test_fact_sentence_speaks_the_data_sets_words_and_knows_no_other_relation():
    assert fact_sentence(("Ann Lee", "investor in", "Tesla")) == "Ann Lee is an investor in Tesla."
    assert fact_sentence(("Joe Biden", "president of", "United States")) is None


class _Record:
    """A generator that records the `answer` option of each call: the controller passes the reply's sentences."""

    def __init__(self):
        self.answers = []

    def __call__(self, text, pause=None, allowed=None, answer=None):
        self.answers.append(answer)
        return (
            ("[MEM_READ{>>employed by>>}:", False) if len(self.answers) == 1 else ("Ann Lee is employed by SAP.", True)
        )


class _RecordOrder(_Record):
    """`_Record` that also records each call's `in_order`."""

    def __init__(self):
        super().__init__()
        self.orders = []

    def __call__(self, text, pause=None, allowed=None, answer=None, in_order=False):
        self.orders.append(in_order)
        return super().__call__(text, pause, allowed, answer)


def test_facts_in_order_reaches_the_answers_generator_call_only():
    mem = TripleMemory(embedder=_Flat())
    mem.write("Ann Lee", "employed by", "SAP")
    for flag in (False, True):
        gen = _RecordOrder()
        RetLLMController(gen, mem, lambda u: u, answer_form=fact_sentence, facts_in_order=flag).chat("Who works where?")
        assert gen.orders == [False, flag]


@pytest.mark.parametrize("form, want", [(fact_sentence, ["Ann Lee is employed by SAP."]), (None, None)])
def test_the_controller_hands_the_replys_sentences_to_the_answer(form, want):
    mem = TripleMemory(embedder=_Flat())
    mem.write("Ann Lee", "employed by", "SAP")
    gen = _Record()
    RetLLMController(gen, mem, lambda u: u, answer_form=form).chat("Who is employed where?")
    assert gen.answers == [None, want]


@pytest.mark.model
def test_a_pushed_drift_is_answered_only_without_the_answer_constraint(smol):
    # a model that would copy the reply wrong (Uber's people said to be SAP's) states only true facts with it
    model, tok = smol
    mem = TripleMemory(embedder=_Flat())
    for fact in (("Mateus Lim", "employed by", "SAP"), ("Alessia Demir", "employed by", "Uber")):
        mem.write(*fact)
    query = "[MEM_READ{>>employed by>>}:"
    # the push sees the reply too: it is generated text's context
    reply = api.format_retllm_read_reply(list(mem))
    bad = query + reply + "Mateus Lim is employed by SAP. Alessia Demir is employed by SAP."
    results = {}
    for form in (None, fact_sentence):
        prompt = chat_prompt(tok, "Who is employed by which company?")
        n = len(tok(prompt, add_special_tokens=False)["input_ids"])
        gen = HFGenerator(model, tok, max_new_tokens=40, logits_processor=[_Push(tok, n, query, bad)])
        turn = RetLLMController(gen, mem, lambda u: chat_prompt(tok, u), answer_form=form).chat(
            "Who is employed by which company?"
        )
        results[form is not None] = turn.answer
    assert "Alessia Demir is employed by SAP" in results[False]
    assert "Alessia Demir is employed by SAP" not in results[True]
    assert results[True].startswith("Mateus Lim is employed by SAP.")


def test_ranked_is_every_token_best_first():
    """The processors' candidate order: a cheap top-k first, then the rest, each id once, best first."""
    from retllm_utils.chat.copying import _Choose

    scores = torch.randn(1, 500, generator=torch.Generator().manual_seed(0))
    order = list(_Choose._ranked(scores, first=8))
    assert sorted(order) == list(range(500))
    assert order == torch.argsort(scores[0], descending=True).tolist()


def test_allowed_terms_recase_lower_case_names_and_known_names_typed_with_a_slip():
    text = "uber has beatriz tamura as a shareholder. Soraya Park joined Catterpillar and Diseny."
    plain = allowed_terms(text)
    assert {"Beatriz Tamura", "Uber"} <= plain.write and "Caterpillar" not in plain.write
    assert "Beatriz Tamura" not in user_spans(text)  # re-cased, not typed
    terms = allowed_terms(text, known=["Caterpillar", "Disney", "Uber", "Cisco"])
    assert {"Beatriz Tamura", "Uber", "Caterpillar", "Disney"} <= terms.write
    assert "Cisco" not in terms.write  # a known name the user did not type stays out
    assert recased("min-jun kapoor-shah") == "Min-jun Kapoor-shah"
    # a slip is one edit: two edits away is another name, not a typo
    assert known_near(["Ciscoo"], ["Cisco"]) == {"Cisco"} and known_near(["Cissoo"], ["Cisco"]) == set()


def test_prefer_known_leaves_only_the_known_spelling():
    """The controller's rule: a company typed with a slip or in lower case is copied as listed, never as typed."""
    text = "Oliver Walker founded Mersk. Pilar Nagy invests in lg and Nokia."
    known = ["Maersk", "LG", "Nokia", "Cisco"]
    lenient = allowed_terms(text, known=known)
    assert {"Mersk", "Maersk", "lg", "Lg", "LG"} <= lenient.write  # the invented-name measure keeps both
    strict = allowed_terms(text, known=known, prefer_known=True)
    assert {"Maersk", "LG", "Nokia", "Oliver Walker", "Pilar Nagy"} <= strict.write
    assert not {"Mersk", "lg", "Lg"} & strict.write
    assert not {"Mersk", "lg", "Lg"} & strict.read
    # typed exactly, a known name may be capitalised as a call does ("EBay"); the controller respells it
    exact = allowed_terms("Who works at eBay? ask ebay", known=["eBay"], prefer_known=True)
    assert {"eBay", "EBay"} <= exact.write and "Ebay" not in exact.write and "ebay" not in exact.write
    assert slips_of_known(["Mersk", "lg", "Nokia", "Oliver"], known) == {
        "Mersk": {"Maersk"},
        "lg": {"LG"},
        "Nokia": {"Nokia"},
    }


def test_a_relation_in_other_words_finds_the_one_stored_relation_sharing_a_content_word():
    assert content_stems("is living in") == content_stems("lives in") == {"liv"}
    assert content_stems("studies at") == content_stems("studied at") and content_stems("is in") == frozenset()
    stored = {"lives in", "was born in", "plays for", "founder of", "is married to"}
    assert stored_relation_by_words("is born in", stored) == "was born in"
    assert stored_relation_by_words("founded", stored) == "founder of"
    assert stored_relation_by_words("lives in", stored) is None  # stored as asked
    assert stored_relation_by_words("is in", stored) is None  # no content word
    assert stored_relation_by_words("works for", stored) is None  # none shares one
    assert stored_relation_by_words("play with", stored | {"played against"}) is None  # two do: no guess


NAMES = ["Kenji Mensah", "Nuno Conti", "Coca-Cola", "Goldman Sachs", "Who founded Coca-Cola"]


@pytest.mark.parametrize(
    "text, ok",
    [
        ("Kenji Mensah is a founder of Coca-Cola.", True),
        ("Kenji Mensah is a founder of Coca-Cola. Nu", True),  # stops inside a name
        ("Kenji Mensah is a founder of Coca-Cola. Kuno", False),  # respelt
        ("Kenji Mensah is a founder of Coca-Cola. Mensah", False),  # half a name
        ("Nuno Contini is", False),  # a name that runs past one
        ("Kenji Mensah's company is Coca-Cola's.", True),  # a possessive
        ("I don't know.", True),
        ("Ivan", False),
        ("The founders are Kenji Mensah.", False),  # a capitalised word no one said
        ("Who founded Coca-Cola? Kenji Mensah.", True),  # the user's own words
        ("Goldman Sachs", True),
        ("Goldman Sachs Group", False),
        ("Nuno Conti Kenji Mensah", False),  # two names run into one
        ("Nuno Conti and Kenji Mensah", True),
        ("[MEM_READ{Xavi Doe>>", True),  # a call: CopyTerms' part
        ("[MEM_READ{>>founder of>>}:{Kenji Mensah>>founder of>>Coca-Cola}]Nuno Conti is", True),
        ("[MEM_READ{>>founder of>>}:{Kenji Mensah>>founder of>>Coca-Cola}]Kuno Conti is", False),
        ("eBay is", True),  # a name that begins in lower case is not held
    ],
)
def test_a_free_answers_names_are_the_given_ones(text, ok):
    assert answer_names_ok(text, NAMES + ["I"]) is ok


def test_a_name_that_begins_in_lower_case_may_be_said_whole():
    names = ["Paolo Wisniewski", "the Chicago Cubs"]
    assert said_whole(["the Chicago Cubs", "eBay"]) == {"the Chicago Cubs", "Chicago Cubs", "The Chicago Cubs", "eBay"}
    assert answer_names_ok("Paolo Wisniewski plays for the Chicago Cubs.", names)
    assert answer_names_ok("The Chicago Cubs have Paolo Wisniewski.", names)
    assert not answer_names_ok("Paolo Wisniewski plays for the Chicago Bears.", names)
    assert not answer_names_ok("Paolo Wisniewski plays for the Chicago.", names)  # half a name


@pytest.mark.parametrize(
    "text, ok",
    [
        ("Petra Dogan plays for the P\ufffd", False),  # "the Perth Scorchers" goes on with "e"
        ("Petra Dogan plays for Jos\ufffd", True),  # "José Ruiz" goes on with "é"
        ("Petra Dogan plays for Jos\ufffd\ufffd", True),
        ("Petra Dogan\ufffd", True),  # after a whole name: not inside one
        ("Petra Dogan plays for Z\ufffd", False),
        ("Petra Dogan plays \ufffd", True),  # not inside a capitalised word: free
    ],
)
def test_part_of_a_character_inside_a_name_is_held(text, ok):
    assert answer_names_ok(text, ["Petra Dogan", "the Perth Scorchers", "José Ruiz"]) is ok


@pytest.mark.model
def test_the_answer_hold_decodes_a_characters_bytes_together(smol):
    _, tok = smol
    names = ["Petra Dogan", "José Ruiz", "the Perth Scorchers"]
    ids = tok("é", add_special_tokens=False)["input_ids"]
    if len(ids) == 1:  # "é" is one token here: split it into its two byte tokens
        ids = tok.convert_tokens_to_ids(list(tok.convert_ids_to_tokens(ids[0])))
    lead, tail = ids
    assert tok.decode([lead]) == "\ufffd" and tok.decode([lead, tail]) == "é"

    def chosen(text: str, extra: list[int], best: int) -> int:
        prefix = tok(text, add_special_tokens=False)["input_ids"] + extra
        scores = torch.zeros(1, len(tok))
        scores[0, best] = 10.0
        out = CopyAnswerNames(tok, 0, names)(torch.tensor([prefix]), scores)
        return int(out[0].argmax())

    assert chosen("Petra Dogan plays for the P", [], lead) != lead  # no name goes on with a byte there
    assert chosen("Petra Dogan plays for Jos", [], lead) == lead  # "José" does
    assert chosen("Petra Dogan plays for Jos", [lead], tail) == tail  # and the two bytes make "é"


PAIRS = [("Mikael Castillo", "Amazon"), ("Mikael Borges", "AMD"), ("Alma Le", "AMD"), ("Rahul Lam", "the Chicago Cubs")]
PAIR_NAMES = sorted({x for p in PAIRS for x in p} | {"Who", "I"})


@pytest.mark.parametrize(
    "text, ok",
    [
        ("Mikael Castillo is employed by Amazon. Mikael Borges is employed by AMD.", True),
        ("Mikael Castillo is employed by Amazon. Mikael Borges is employed by Amazon.", False),  # not the reply's pair
        ("Mikael Borges is employed by Am", False),  # refused as soon as only Amazon can follow
        ("Mikael Borges is employed by A", True),  # AMD can
        ("Mikael Borges and Alma Le are employed by AMD.", True),  # two subjects, each paired with AMD
        ("Mikael Castillo and Alma Le are employed by AMD.", False),
        ("AMD employs Alma Le and Mikael Borges.", True),  # the pair in either order
        ("Mikael Borges works at AMD; Mikael Castillo works at Amazon.", True),  # a new clause, a new pair
        ("Mikael Borges works at AMD, Mikael Castillo at Amazon.", False),  # one sentence: held as one
        ("Who? Rahul Lam plays for the Chicago Cubs.", True),  # the user's words go with any; a lower-case name
        ("Rahul Lam plays for the Chicago Cubs. Alma Le plays for the Chicago Cubs.", False),
    ],
)
def test_the_replys_names_in_one_sentence_go_together_as_the_reply_pairs_them(text, ok):
    assert answer_names_ok(text, PAIR_NAMES, PAIRS) is ok
    assert answer_names_ok(text, PAIR_NAMES)  # without the pairs each is allowed: only the pairs refuse


class _Names:
    """Records the names the controller hands to each generator call."""

    def __init__(self):
        self.names = []

    def __call__(self, text, pause=None, allowed=None, answer=None, names=None, pairs=None):
        self.names.append(names)
        self.pairs = pairs
        return ("[MEM_READ{>>lives in>>}:", False) if len(self.names) == 1 else ("Ann Lee lives in Lyon.", True)


@pytest.mark.parametrize("copy", [True, False])
def test_a_free_answer_is_handed_the_replys_and_the_users_names_when_names_are_copied(copy):
    mem = TripleMemory(embedder=_Flat())
    mem.write("Ann Lee", "lives in", "Lyon")
    mem.write("Bo Wu", "lives in", "Oslo")
    gen = _Names()
    # a relation with no sentence form ("lives in"): the answer is the model's own words
    ctl = RetLLMController(gen, mem, lambda u: u, copy_names=copy, answer_form=fact_sentence, answer_names=True)
    ctl.chat("Who lives where?")
    assert gen.names[0] is None
    if copy:
        assert {"Ann Lee", "Lyon", "Bo Wu", "Oslo", "Who lives where"} <= set(gen.names[1])
        assert gen.pairs == [("Ann Lee", "Lyon"), ("Bo Wu", "Oslo")]
    else:
        assert gen.names[1] is None


def test_answer_pairs_off_hands_the_names_without_their_pairs():
    mem = TripleMemory(embedder=_Flat())
    mem.write("Ann Lee", "lives in", "Lyon")
    gen = _Names()
    kw = dict(copy_names=True, answer_form=fact_sentence, answer_names=True, answer_pairs=False)
    RetLLMController(gen, mem, lambda u: u, **kw).chat("Who lives where?")
    assert "Ann Lee" in gen.names[1] and gen.pairs is None


@pytest.mark.model
def test_a_pushed_respelt_name_in_a_free_answer_is_said_only_without_copied_names(smol):
    model, tok = smol
    mem = TripleMemory(embedder=_Flat())
    for fact in (("Kenji Mensah", "founder of", "Coca-Cola"), ("Nuno Conti", "founder of", "Coca-Cola")):
        mem.write(*fact)
    query = "[MEM_READ{>>founder of>>Coca-Cola}:"
    reply = api.format_retllm_read_reply(list(mem))
    bad = query + reply + "Kenji Mensah is a founder of Coca-Cola. Kuno Mensah is a founder of Coca-Cola."
    answers = {}
    for copy in (False, True):
        user = "Who founded Coca-Cola?"
        n = len(tok(chat_prompt(tok, user), add_special_tokens=False)["input_ids"])
        gen = HFGenerator(model, tok, max_new_tokens=48, logits_processor=[_Push(tok, n, query, bad)])
        ctl = RetLLMController(gen, mem, lambda u: chat_prompt(tok, u), copy_names=copy, answer_names=copy)
        answers[copy] = ctl.chat(user).answer
    assert "Kuno Mensah" in answers[False]
    assert "Kuno" not in answers[True] and answers[True].startswith("Kenji Mensah is a founder of Coca-Cola.")


class _Answers:
    """Scripts a read, then records what the controller hands the answer."""

    def __init__(self, read: str):
        self.read, self.answers = read, []

    def __call__(self, text, pause=None, allowed=None, answer=None, names=None, pairs=None):
        self.answers.append(answer)
        return (self.read, False) if len(self.answers) == 1 else ("I don't know.", True)


@pytest.mark.parametrize("no_answer", [None, "I don't know."])
def test_an_empty_reply_is_answered_in_the_data_sets_words_when_given(no_answer):
    mem = TripleMemory(embedder=_Flat())
    mem.write("Ann Lee", "employed by", "Intel")
    gen = _Answers("[MEM_READ{Ann Lee>>>>Tesla}:")
    kw = dict(copy_names=True, answer_form=fact_sentence, answer_names=True, no_answer=no_answer)
    RetLLMController(gen, mem, lambda u: u, **kw).chat("How are Ann Lee and Tesla connected?")
    assert gen.answers[1] == (None if no_answer is None else [no_answer])


@pytest.mark.parametrize("either_order", [True, False])
def test_a_two_name_read_without_relation_finds_the_names_the_other_way_round(either_order):
    mem = TripleMemory(embedder=_Flat())
    mem.write("Emil Jansen", "investor in", "Ericsson")
    gen = _Answers("[MEM_READ{Ericsson>>>>Emil Jansen}:")
    ctl = RetLLMController(gen, mem, lambda u: u, answer_form=fact_sentence, either_order=either_order)
    turn = ctl.chat("describe the tie between emil jansen and ericsson.")
    reads = [e for e in turn.trace if e["event"] == "read"]
    assert [e["query"] for e in reads] == [("Ericsson", "", "Emil Jansen")] + [
        ("Emil Jansen", "", "Ericsson")
    ] * either_order
    assert gen.answers[1] == (["Emil Jansen is an investor in Ericsson."] if either_order else None)
    # the other way round only with the names exact: a misspelt person is not matched in the object's role
    gen = _Answers("[MEM_READ{Ericsson>>>>Emil Jansenn}:")
    turn = RetLLMController(gen, mem, lambda u: u, either_order=True).chat("How are Emil Jansenn and Ericsson tied?")
    assert len([e for e in turn.trace if e["event"] == "read"]) == 1
    # a read with a relation is directed: never turned round
    gen = _Answers("[MEM_READ{Ericsson>>investor in>>Emil Jansen}:")
    turn = RetLLMController(gen, mem, lambda u: u, either_order=True).chat("Does Ericsson invest in Emil Jansen?")
    assert len([e for e in turn.trace if e["event"] == "read"]) == 1


@pytest.mark.parametrize("either_role", [True, False])
def test_a_one_name_read_in_the_role_the_name_never_holds_is_asked_in_the_other(either_role):
    mem = TripleMemory(embedder=_Flat())
    mem.write("Emil Jansen", "investor in", "Ericsson")
    mem.write("Ann Lee", "customer of", "Ericsson")
    for call, turned in [
        ("[MEM_READ{Ericsson>>>>}:", ("", "", "Ericsson")),
        ("[MEM_READ{Ericsson>>investor in>>}:", ("", "investor in", "Ericsson")),
        ("[MEM_READ{>>>>Ann Lee}:", ("Ann Lee", "", "")),
    ]:
        gen = _Answers(call)
        turn = RetLLMController(gen, mem, lambda u: u, answer_form=fact_sentence, either_role=either_role).chat("?")
        reads = [e["query"] for e in turn.trace if e["event"] == "read"]
        assert reads[1:] == ([turned] if either_role else [])
        assert bool(gen.answers[1]) == either_role
    assert gen.answers[1] == (["Ann Lee is a customer of Ericsson."] if either_role else None)
    # names exact, and never when the name holds the asked role too, or the read names two entities
    mem.write("Ericsson", "customer of", "Nokia")
    for call in ["[MEM_READ{Ericssonn>>>>}:", "[MEM_READ{Ericsson>>investor in>>}:", "[MEM_READ{Nokia>>>>Ann Lee}:"]:
        turn = RetLLMController(_Answers(call), mem, lambda u: u, either_role=True).chat("?")
        assert len([e for e in turn.trace if e["event"] == "read"]) == 1


@pytest.mark.parametrize("copy", [True, False])
def test_a_known_name_capitalised_in_a_call_is_stored_and_read_as_known(copy):
    mem = TripleMemory(embedder=_Flat())
    script = {0: "[MEM_WRITE{Ann Lee>>employed by>>EBay}]", 1: "[MEM_READ{>>employed by>>EBay}:"}
    calls = []

    def respond(text):
        calls.append(text)
        return script[len(calls) - 1] if len(calls) <= 2 else "Ann Lee is employed by eBay."

    ctl = RetLLMController(ScriptedGenerator(respond), mem, lambda u: u, copy_names=copy, known_names=["eBay", "SAP"])
    turn = ctl.chat("Ann Lee works at eBay.")
    assert list(mem) == [("Ann Lee", "employed by", "eBay" if copy else "EBay")]
    assert turn.model_text == ("[MEM_WRITE{Ann Lee>>employed by>>eBay}]" if copy else script[0])
    turn = ctl.chat("Who works at eBay?")
    assert turn.model_text.startswith("[MEM_READ{>>employed by>>eBay}:" if copy else script[1])
    read = next(e for e in turn.trace if e["event"] == "read")
    assert read["query"].object == ("eBay" if copy else "EBay")


def test_known_names_set_after_construction_are_respelt_too():
    mem = TripleMemory(embedder=_Flat())
    gen = _Answers("[MEM_WRITE{Ann Lee>>employed by>>EBay}]")
    ctl = RetLLMController(gen, mem, lambda u: u, copy_names=True)
    ctl.known_names = ("eBay",)
    ctl.chat("Ann Lee works at eBay.")
    assert list(mem) == [("Ann Lee", "employed by", "eBay")]
