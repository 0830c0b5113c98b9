"""The wide build (RetLLMConfig.phrasings = "wide"): every shape parses back to its triples, held-out shapes and
relations never reach training, names as the memory must store them, same seed same bytes."""

import json
import random
import re
from collections import Counter

import pytest

from retllm_utils.api import (
    MemRead,
    MemWrite,
    Triple,
    format_retllm_read_query,
    format_retllm_read_reply,
    format_retllm_write,
    parse_retllm,
)
from retllm_utils.paths import DATA, RUNS
from retllm_utils.retllm import docred_mix, wide
from retllm_utils.retllm.config import DATA_FIELDS, WIDE_FIELDS, RetLLMConfig
from retllm_utils.retllm.docred_mix import DATE_RELATIONS, HELD_OUT_RELATIONS, SYNTHETIC_TWINS
from retllm_utils.retllm.generator import QUERY_TYPES, load_names
from retllm_utils.retllm.phrasings import RELATIONS
from retllm_utils.retllm.synthetic import answer_sentence, dataset_dir, dataset_meta, lookup, make_dataset, save_dataset
from retllm_utils.retllm.wide_lexicon import FILLERS, LEXICON
from retllm_utils.retllm.wide_phrasings import (
    MARKERS,
    SHAPES,
    clause_templates,
    held_out_marker,
    held_out_shapes,
    questions,
    statements,
    training_shapes,
)

COMPANIES = load_names(DATA / "companies.txt")
TRAINED = ("train", "validation", "test")


def _config(seed=0, **sizes):
    # the open-relation rows have their own tests (below and tests/test_open_relations.py): none unless asked for
    sizes = {
        "n_train": 600,
        "n_val": 100,
        "n_test": 240,
        "n_paraphrase": 240,
        "open_rows": 0,
        "n_open_test": 0,
        **sizes,
    }
    return RetLLMConfig.for_profile("cpu", seed=seed, phrasings="wide", **sizes)


@pytest.fixture(scope="module")
def stmts():
    return docred_mix.load_statements()


@pytest.fixture(scope="module")
def dd():
    """Big enough that every shape of every kind occurs (~3 s)."""
    return make_dataset(_config())


def _rows(dd, splits=None):
    return [r for s in (splits or dd) for r in dd[s]]


# ------------------------------------------------------------------------------------------ parse back
def test_every_row_parses_back_to_its_triples(dd):
    for r in _rows(dd):
        if r["kind"] == "write":
            assert r["api"] == format_retllm_write(r["triples"])
            calls = parse_retllm(r["api"])
            assert all(isinstance(c, MemWrite) for c in calls) and calls[-1].end == len(r["api"])
            assert [list(t) for c in calls for t in c.triples] == r["triples"]
            assert r["reply"] == r["answer"] == "" and r["query"] == []
            assert not any(t in r["memory"] for t in r["triples"])
        else:
            assert r["api"] == format_retllm_read_query(r["query"])
            assert r["reply"] == format_retllm_read_reply(r["triples"])
            assert r["answer"] == answer_sentence(r["triples"])
            [call] = parse_retllm(r["api"] + r["reply"])
            assert isinstance(call, MemRead) and call.queries == (Triple(*r["query"]),)
            assert call.results == tuple(Triple(*t) for t in r["triples"])
            if r["phrasing"] != "typo_name":  # the query is the canonical one: the reply is its exact matches
                assert r["triples"] == lookup(r["memory"], r["query"])


def test_every_shape_occurs_under_its_own_name_in_the_right_splits(dd):
    for split in TRAINED:
        got = {(r["kind"], r["phrasing"]) for r in dd[split]}
        assert all(not SHAPES[p].held_out and k in SHAPES[p].kinds for k, p in got), got
    train = {(r["kind"], r["phrasing"]) for r in dd["train"]}
    for kind in ("write", "read"):
        assert {p for k, p in train if k == kind} == set(
            s for t in ("write", *QUERY_TYPES) for s in training_shapes(kind, t)
        ) | ({"redocred"} if kind == "write" else set())
    para = {(r["kind"], r["phrasing"]) for r in dd["paraphrase"]}
    assert para == {(k, s) for k in ("write", "read") for t in ("write", *QUERY_TYPES) for s in held_out_shapes(k, t)}
    for r in _rows(dd):
        assert r["query_type"] in SHAPES[r["phrasing"]].types
    types = Counter((r["query_type"], r["phrasing"]) for r in dd["paraphrase"])
    assert all(types[(t, s)] >= 3 for t in QUERY_TYPES for s in held_out_shapes("read", t)), types


# ------------------------------------------------------------------------------------------ held out stays out
def _training_templates() -> set[str]:
    out = set()
    for rel in RELATIONS:
        for plural in (False, True):
            for shape in training_shapes("write"):
                out |= set(statements(shape, rel, plural))
            out |= set(clause_templates(rel, plural))
        for q in QUERY_TYPES:
            for shape in training_shapes("read", q):
                out |= set(questions(shape, q, rel))
    return out


def _held_out_templates() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for rel in RELATIONS:
        for shape in held_out_shapes("write"):
            out.setdefault(shape, set()).update(statements(shape, rel, False) + statements(shape, rel, True))
        for q in QUERY_TYPES:
            for shape in held_out_shapes("read", q):
                out.setdefault(shape, set()).update(questions(shape, q, rel))
    return out


def test_no_training_template_has_a_held_out_construction():
    train = _training_templates()
    assert len(train) > 400
    assert not [t for t in train if held_out_marker(t)]
    assert not [p + s for k in FILLERS for p, s in FILLERS[k] if held_out_marker(p + "x" + s)]
    for shape, templates in _held_out_templates().items():
        if shape in MARKERS and shape != "respectively":  # respectively is put together by `wide`
            assert all(MARKERS[shape].search(t) for t in templates), shape
        assert not templates & train


def _unwrapped(r) -> str:
    """The user's message without its filler."""
    text = r["user"]
    if r["phrasing"] == "filler":
        [(p, s)] = [(p, s) for p, s in FILLERS[r["kind"]] if text.startswith(p) and text.endswith(s) and (p or s)]
        text = text[len(p) : len(text) - len(s)]
    return text


def _skeleton(r) -> str:
    """The message with every person and company replaced, lower-cased: its construction."""
    text = _unwrapped(r).lower()
    names = {x for t in r["memory"] + r["triples"] for x in (t[0], t[2])} | set(r["query"]) | set(COMPANIES)
    for name in sorted((n.lower() for n in names if n), key=len, reverse=True):
        text = text.replace(name, "#")
    return text


def test_no_held_out_construction_reaches_a_training_row(dd):
    trained = [r for r in _rows(dd, TRAINED)]
    leaks = [(r["id"], r["user"]) for r in trained if held_out_marker(_unwrapped(r))]
    assert not leaks
    for r in dd["paraphrase"]:
        if r["phrasing"] != "new_verb" or r["kind"] == "write":
            assert MARKERS[r["phrasing"]].search(r["user"]), r
    skeletons = {_skeleton(r) for r in trained if r["phrasing"] != "redocred"}
    assert not [r["user"] for r in dd["paraphrase"] if _skeleton(r) in skeletons]


def test_held_out_words_are_never_in_training_text(dd):
    held = [w for lex in LEXICON.values() for v in lex.held_verbs for w in v[:2]]
    held += [w for lex in LEXICON.values() for n in lex.held_nouns for w in n] + ["affiliated", "respectively"]
    text = " ".join(r["user"] for r in _rows(dd, TRAINED)).lower()
    assert not [w for w in held if re.search(r"\b" + re.escape(w) + r"\b", text)]


def test_held_out_relations_never_reach_training(dd, stmts):
    held, gone = set(HELD_OUT_RELATIONS), set(DATE_RELATIONS) | set(SYNTHETIC_TWINS)
    for r in _rows(dd, TRAINED):
        assert not {t[1] for t in r["triples"] + r["memory"]} & (held | gone), r
    new = dd["new_relations"]
    assert new.num_rows >= 40 and all(r["phrasing"] == "redocred" for r in new)
    assert all({t[1] for t in r["triples"]} <= held for r in new)
    assert len({t[1] for r in new for t in r["triples"]}) >= 5
    docred = [r for r in _rows(dd, TRAINED) if r["phrasing"] == "redocred"]
    assert len({t[1] for r in docred for t in r["triples"]}) >= 30


def test_redocred_rows_come_from_the_test_split_with_their_gold_triples(dd, stmts):
    assert docred_mix.DOCRED_FILE.name == "test_revised.json"
    by_text = {st.text: st for st in stmts}
    doc_of = {}
    for split in (*TRAINED, "new_relations"):
        for r in dd[split]:
            if r["phrasing"] != "redocred":
                continue
            st = by_text[r["user"]]
            assert r["triples"] == [list(t) for t in st.triples] and 1 <= len(r["triples"]) <= docred_mix.MAX_TRIPLES
            at = [(r["user"].find(t[0]), r["user"].find(t[2])) for t in r["triples"]]
            assert min(min(a) for a in at) >= 0 and at == sorted(at)  # every name verbatim, in sentence order
            if split != "new_relations":
                doc_of.setdefault(split, set()).add(st.doc)
    assert set(doc_of) == set(TRAINED)  # documents split: no sentence of a test document is trained on
    assert not doc_of["train"] & doc_of["test"] and not doc_of["train"] & doc_of["validation"]
    dev = json.loads((DATA / "redocred" / "dev_revised.json").read_text(encoding="utf-8"))
    dev_sentences = {docred_mix.detokenize(" ".join(s)) for d in dev for s in d["sents"]}
    # Re-DocRED's dev and test documents share one sentence word for word; it is kept (a test document's sentence
    # with its test labels), said so in docred_mix
    assert len([st.text for st in stmts if st.text in dev_sentences]) <= 1


# ------------------------------------------------------------------------------------------ names
def test_lower_case_rows_name_everyone_canonically(dd):
    rows = [r for r in _rows(dd, TRAINED) if r["phrasing"] == "lowercase"]
    assert len(rows) > 50
    for r in rows:
        names = [t[0] for t in r["triples"]] if r["kind"] == "write" else [r["query"][0]]
        for name in filter(None, names):
            assert (name.lower() if wide.recasable(name) else name) in r["user"]
        orgs = [t[2] for t in r["triples"]] if r["kind"] == "write" else [r["query"][2]]
        assert all(o.lower() in r["user"] for o in orgs if o)
        assert not [w for w in re.findall(r"\b[A-Z]\w*", r["user"]) if not any(w in n for n in names)], r["user"]


def test_misspelt_companies_are_written_and_queried_canonically(dd):
    rows = [r for r in _rows(dd, TRAINED) if r["phrasing"] == "typo_company"]
    assert len(rows) > 20
    for r in rows:
        org = r["triples"][0][2] if r["kind"] == "write" else r["query"][2]
        assert org in COMPANIES and org not in r["user"]
        assert org in (r["api"] if r["kind"] == "write" else r["query"])


def test_misspelt_people_only_in_questions_and_copied_as_typed(dd):
    rows = [r for r in _rows(dd, TRAINED) if r["phrasing"] == "typo_name"]
    assert len(rows) > 20 and all(r["kind"] == "read" for r in rows)
    for r in rows:
        typed = r["query"][0]
        assert typed in r["user"]
        people = {t[0] for t in r["memory"]}
        assert typed not in people
        if r["triples"]:  # the facts of the person meant: the scene's nearest name to what was typed
            meant = r["triples"][0][0]
            assert 1 <= wide._distance(typed, meant) <= 2
            assert all(wide._distance(typed, p) > wide._distance(typed, meant) for p in people - {meant})
            canonical = [meant, *r["query"][1:]]
            assert r["triples"] == lookup(r["memory"], canonical)
    for r in _rows(dd):  # a statement names each person exactly as written (a slip would store someone else)
        if r["kind"] == "write" and r["phrasing"] not in ("lowercase", "redocred"):
            assert all(re.search(r"(?<![\w'-])" + re.escape(t[0]) + r"(?![\w-])", r["user"]) for t in r["triples"])


def test_recasable_and_misspell():
    assert wide.recasable("Ann Lee") and wide.recasable("Ji-woo Park")
    assert not wide.recasable("Ann McCarthy") and not wide.recasable("Ana Van der Berg")
    slips = {wide.misspell(random.Random(i), "Siemens") for i in range(30)}
    assert None not in slips and "Siemens" not in slips and all(s[0] == "S" for s in slips)
    assert all(1 <= wide._distance(s, "Siemens") <= 2 for s in slips)
    assert wide.misspell(random.Random(0), "BMW") is None  # too short to misspell recognisably
    near = ["Siemens", "Siemenss", "Siemns", "Seimens", "Siemes"]  # another name a slip would hit stays out
    assert not {wide.misspell(random.Random(i), "Siemens", near) for i in range(30)} & set(near[1:])


# ------------------------------------------------------------------------------------------ several facts
def test_multi_fact_statements_write_every_fact_in_sentence_order(dd):
    seen = Counter()
    for r in _rows(dd):
        if r["kind"] != "write" or r["phrasing"] not in wide.MULTI_SHAPES:
            continue
        seen[r["phrasing"]] += 1
        people = [t[0] for t in r["triples"]]
        assert len(people) >= 2 and len(set(people)) == len(people)
        at = [r["user"].index(p) for p in people]
        assert at == sorted(at), r["user"]
        rels, orgs = [t[1] for t in r["triples"]], [t[2] for t in r["triples"]]
        assert rels[0] == RELATIONS[r["relation"]]
        if r["phrasing"] == "relative_two":
            assert len(set(rels)) == 2 and len(set(orgs)) == 1
        elif r["phrasing"] in ("gapping", "respectively"):
            assert len(set(rels)) == 1 and len(set(orgs)) >= 2
        else:
            assert len(set(zip(rels, orgs))) >= 2
        if r["phrasing"] == "respectively":
            assert len(set(orgs)) == len(orgs) and r["user"].endswith(", respectively.")
    assert set(seen) == set(wide.MULTI_SHAPES) and min(seen.values()) >= 5


# ------------------------------------------------------------------------------------------ seeds and the switch
def test_same_seed_same_bytes_and_the_paper_default(tmp_path, stmts):
    config = _config(seed=4, n_train=60, n_val=20, n_test=40, n_paraphrase=40, n_new_relations=10)
    a = save_dataset(make_dataset(config), tmp_path / "a", dataset_meta(config))
    b = save_dataset(make_dataset(config), tmp_path / "b", dataset_meta(config))
    for f in sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file()):
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    other = make_dataset(config.replace(seed=5))
    assert other["train"].to_list() != make_dataset(config)["train"].to_list()
    assert make_dataset(config)["new_relations"].num_rows == 10
    assert json.loads((a / "build.json").read_text())["phrasings"] == "wide"
    assert set(dataset_meta(config)) == set(DATA_FIELDS + WIDE_FIELDS)
    paper = RetLLMConfig.for_profile("cpu")
    assert paper.phrasings == "paper" and set(dataset_meta(paper)) == set(DATA_FIELDS)
    assert dataset_dir("cpu", "wide").is_relative_to(RUNS) and dataset_dir("cpu") == DATA / "retllm_synthetic"
    with pytest.raises(ValueError, match="^phrasings must be one of 'paper', 'wide'"):
        RetLLMConfig.for_profile("cpu", phrasings="broad")


def test_every_profile_builds_wide():
    smoke = make_dataset(RetLLMConfig.for_profile("smoke", phrasings="wide"))
    assert {s: smoke[s].num_rows for s in smoke} == dict(
        train=48, validation=10, test=20, paraphrase=8, new_relations=2, open_relations=4
    )
    assert Counter(smoke["train"]["phrasing"])["redocred"] == 4  # docred_frac 0.1 of the 40 wide rows
    gpu = RetLLMConfig.for_profile("gpu", phrasings="wide")  # its sizes fit the name lists (not built here: ~30 s)
    assert gpu.n_new_relations is None and gpu.docred_frac == 0.1


def test_load_synthetic_builds_the_wide_set_apart(tmp_path, monkeypatch):
    from retllm_utils.retllm import synthetic

    monkeypatch.setattr(synthetic, "dataset_dir", lambda profile="cpu", phrasings="paper": tmp_path / phrasings)
    wide_set = synthetic.load_synthetic("smoke", phrasings="wide")
    assert "new_relations" in wide_set and (tmp_path / "wide" / "new_relations.jsonl").is_file()
    again = synthetic.load_synthetic("smoke", phrasings="wide")
    assert again["train"].to_list() == wide_set["train"].to_list()
    assert "new_relations" not in synthetic.load_synthetic("smoke")  # the paper build, in its own folder


def test_detokenize():
    text = "the Sneaker Pimps ' Kelli Ali , who said \" Hello \" ( twice ) , it 's"
    assert docred_mix.detokenize(text) == "the Sneaker Pimps' Kelli Ali, who said \"Hello\" (twice), it's"


def test_train_write_frac_sets_the_training_statements_alone():
    """More statements in training only: the evaluation splits stay the write_frac build's, row for row."""
    sizes = dict(n_train=200, n_val=40, n_test=60, n_paraphrase=24, n_new_relations=4)
    more, fewer = (make_dataset(_config(**sizes, train_write_frac=f)) for f in (0.6, 0.25))
    for split in ("validation", "test", "paraphrase", "new_relations"):
        assert more[split].to_list() == fewer[split].to_list(), split

    def synthetic_writes(ds):
        syn = [r for r in ds if r["phrasing"] != "redocred"]
        return sum(r["kind"] == "write" for r in syn) / len(syn)

    assert synthetic_writes(more["train"]) == pytest.approx(0.6, abs=0.01)
    assert synthetic_writes(fewer["train"]) == pytest.approx(0.25, abs=0.01)
    assert synthetic_writes(more["test"]) == pytest.approx(0.25, abs=0.02)
    with pytest.raises(ValueError, match="train_write_frac"):
        _config(train_write_frac=1.5)


def test_multi_weight_gives_multi_fact_shapes_more_training_statements_alone():
    """multi_weight=2: each trained multi-fact shape takes two turns in the training statements' cycle, its rows still
    parse back to every fact in sentence order, and the evaluation splits stay the default build's, row for row."""
    sizes = dict(n_train=600, n_val=40, n_test=60, n_paraphrase=24, n_new_relations=4)
    one, two = (make_dataset(_config(**sizes, multi_weight=w)) for w in (1, 2))
    for split in ("validation", "test", "paraphrase", "new_relations"):
        assert one[split].to_list() == two[split].to_list(), split
    assert one["train"].to_list() == make_dataset(_config(**sizes))["train"].to_list()  # 1 is the default build

    def statement_shapes(ds):
        return Counter(r["phrasing"] for r in ds if r["kind"] == "write")

    a, b = statement_shapes(one["train"]), statement_shapes(two["train"])
    assert sum(a.values()) == sum(b.values())
    for shape in ("coordinated", "gapping", "relative_two"):
        assert b[shape] >= 1.4 * a[shape], (shape, a[shape], b[shape])  # 2 turns in 17, not 1 in 14: 1.65
    assert b["verb"] < a["verb"] and b["respectively"] == a["respectively"] == 0  # held out stays held out
    for r in two["train"]:
        if r["kind"] == "write" and r["phrasing"] in wide.MULTI_SHAPES:
            assert [list(t) for c in parse_retllm(r["api"]) for t in c.triples] == r["triples"]
            at = [r["user"].index(t[0]) for t in r["triples"]]
            assert len(at) >= 2 and at == sorted(at), r["user"]
    with pytest.raises(ValueError, match="multi_weight"):
        _config(multi_weight=0)


def test_open_rows_join_training_only_and_the_held_out_open_relations_only_evaluation():
    """open_rows adds rows over trained-on open relations to the train split and changes no other row; the
    open_relations split states and asks only the held-out ones."""
    from retllm_utils.retllm import open_relations

    sizes = dict(n_train=120, n_val=20, n_test=40, n_paraphrase=16, n_new_relations=4, n_open_test=20)
    with_open, without = (make_dataset(_config(**sizes, open_rows=n)) for n in (30, 0))
    for split in ("validation", "test", "paraphrase", "new_relations", "open_relations"):
        assert with_open[split].to_list() == without[split].to_list(), split
    assert with_open["train"].to_list()[:120] == without["train"].to_list()
    added = with_open["train"].to_list()[120:]
    assert len(added) == 30 and all(r["phrasing"].startswith("open_") for r in added)
    assert not {r["relation"] for r in added} & set(open_relations.HELD_OUT)
    held = with_open["open_relations"].to_list()
    assert len(held) == 20 and {r["relation"] for r in held} <= set(open_relations.HELD_OUT)
    for r in held:
        assert all(t[1] in open_relations.HELD_OUT for t in r["triples"])


def test_open_people_give_the_builds_open_rows():
    """experiments/open_relations.py builds its open rows from `open_people` and `open_relations.rows`: with the
    build's count and seed they are exactly the rows the build appends, and its held-out split."""
    from retllm_utils.retllm import open_relations
    from retllm_utils.retllm.wide import open_people

    config = _config(n_train=120, n_val=20, n_test=40, n_paraphrase=16, n_new_relations=4, n_open_test=20, open_rows=30)
    built, people = make_dataset(config), open_people(config)
    same_train = open_relations.rows(30, people["train"], held_out=False, seed=config.seed, split="train")
    assert built["train"].to_list()[120:] == same_train
    same_test = open_relations.rows(20, people["test"], held_out=True, seed=config.seed, split="open_test")
    assert built["open_relations"].to_list() == same_test


def test_more_training_rows_leave_every_evaluation_split_as_it_was(stmts):
    """A bigger train split or another share of statements in it (experiments/open_relations.py --n-train,
    --train-write-frac) must not move the rows it is scored on."""
    from retllm_utils.retllm.wide import make_rows

    names = load_names(DATA / "first_names.txt"), load_names(DATA / "last_names.txt")
    companies = sorted(load_names(DATA / "companies.txt"))
    small = make_rows(_config(n_train=100, open_rows=8, n_open_test=8), *names, companies, stmts)
    big = make_rows(_config(n_train=300, open_rows=8, n_open_test=8), *names, companies, stmts)
    # fewer statements among the synthetic training rows (--train-write-frac): more questions, the same evaluation
    asking = make_rows(_config(n_train=300, open_rows=8, n_open_test=8, train_write_frac=0.2), *names, companies, stmts)
    for split in ("validation", "test", "paraphrase", "new_relations", "open_relations"):
        assert small[split] == big[split] == asking[split], split
    assert len(big["train"]) == 308 and small["train"] != big["train"][: len(small["train"])]
    reads = lambda rows: sum(r["kind"] == "read" and not r["phrasing"].startswith("open_") for r in rows)  # noqa: E731
    assert reads(asking["train"]) > reads(big["train"])


def test_balanced_train_questions_give_each_verb_its_share_and_leave_evaluation_splits_as_they_were():
    """train_questions="balanced" changes the train split alone, its reads still parse back to their triples, and
    each relation's verbs get their share of the verb-bearing questions (drawn, the cpu build's manager questions
    said "run(s)" 4 times and "manage" 14)."""
    sizes = dict(n_train=1500, n_val=40, n_test=60, n_paraphrase=24, n_new_relations=4)
    drawn, balanced = (make_dataset(_config(**sizes, train_questions=q)) for q in ("drawn", "balanced"))
    for split in ("validation", "test", "paraphrase", "new_relations"):
        assert drawn[split].to_list() == balanced[split].to_list(), split
    assert drawn["train"].to_list() != balanced["train"].to_list()
    for r in balanced["train"]:
        if r["kind"] == "read":
            assert r["api"] == format_retllm_read_query(r["query"]) and r["answer"] == answer_sentence(r["triples"])
            if r["phrasing"] != "typo_name":
                assert r["triples"] == lookup(r["memory"], r["query"])

    def verb_counts(ds, rel):
        counts = [0] * len(LEXICON[rel].verbs)
        for r in ds:
            if r["kind"] == "read" and r["relation"] == rel and r["query_type"] in ("per_rel", "rel", "org_rel"):
                if (v := wide.verb_of(rel, r["user"])) is not None:
                    counts[v] += 1
        return counts

    even = lambda c: 2 * min(c) >= max(c)  # noqa: E731  no verb said less than half as often as the commonest
    assert all(even(verb_counts(balanced["train"], rel)) for rel in LEXICON)
    assert not all(even(verb_counts(drawn["train"], rel)) for rel in LEXICON)


def test_verb_of_and_verb_balance():
    assert wide.verb_of("founder", "Did {X} co-found a company?") == 3  # "co-found", not "found"
    assert wide.verb_of("manager", "Which company does {X} run?") == 1
    assert wide.verb_of("manager", "Which company is under {X}'s management?") is None
    pick = wide.VerbBalance(random.Random(0))
    options = questions("which", "per_rel", "manager")
    said = [wide.verb_of("manager", pick(("per_rel", "manager"), options)) for _ in range(10)]
    assert sorted(said) == sorted(list(range(5)) * 2)  # every verb twice in ten
    nouns = questions("possessive", "per_rel", "manager")  # no verb: drawn as before
    assert pick(("per_rel", "manager"), nouns) in nouns
    with pytest.raises(ValueError, match="train_questions"):
        _config(train_questions="cycled")
