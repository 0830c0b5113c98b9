"""The synthetic RET-LLM data set: reproducible bytes, disjoint people, replies and answers that follow the scene."""

import dataclasses
import json
import re
import string
from collections import Counter

import pytest

from retllm_utils.api import (
    ApiError,
    MemRead,
    MemWrite,
    Triple,
    format_retllm_read_query,
    format_retllm_read_reply,
    format_retllm_write,
    parse_retllm,
    query_shape,
)
from retllm_utils.paths import DATA
from retllm_utils.prompts import retllm_example_text
from retllm_utils.retllm import generator, synthetic
from retllm_utils.retllm.config import RetLLMConfig
from retllm_utils.retllm.phrasings import (
    FORMS,
    JOIN_THREE,
    JOIN_TWO,
    PARAPHRASE_FORMS,
    PARAPHRASE_QUESTIONS,
    PARAPHRASE_TYPOS,
    QUESTIONS,
)
from retllm_utils.retllm.synthetic import (
    NO_ANSWER,
    PHRASINGS,
    QUERY_TYPES,
    RELATIONS,
    SPLITS,
    answer_sentence,
    dataset_meta,
    join_names,
    load_names,
    load_synthetic,
    lookup,
    make_dataset,
    relation_vocabulary,
    save_dataset,
    stated_facts,
)

SHAPES = {
    "per": (True, False, False),
    "per_org": (True, False, True),
    "per_rel": (True, True, False),
    "org": (False, False, True),
    "rel": (False, True, False),
    "org_rel": (False, True, True),
}


def _make(seed, n_train, n_val, n_test, n_paraphrase=120, *, first_names=None, last_names=None, **settings):
    """The data set of these sizes (and any other RetLLMConfig settings); the cpu profile's otherwise."""
    sizes = dict(n_train=n_train, n_val=n_val, n_test=n_test, n_paraphrase=n_paraphrase)
    config = RetLLMConfig.for_profile("cpu", seed=seed, **sizes, **settings)
    return make_dataset(config, first_names=first_names, last_names=last_names)


@pytest.fixture(scope="module")
def dd():
    """Big enough that every query type has misses and multi-person statements (~1 s)."""
    return _make(3, n_train=300, n_val=60, n_test=240)


def _rows(dd):
    return [r for split in dd.values() for r in split]


def _people(rows):
    out = set()
    for r in rows:
        out |= {t[0] for t in r["memory"] + r["triples"]}
        if r["query"] and r["query"][0]:
            out.add(r["query"][0])
    return out


def test_same_seed_gives_byte_identical_files(tmp_path):
    a = save_dataset(_make(7, 40, 10, 20, 12), tmp_path / "a", {"seed": 7})
    b = save_dataset(_make(7, 40, 10, 20, 12), tmp_path / "b", {"seed": 7})
    c = save_dataset(_make(8, 40, 10, 20, 12), tmp_path / "c", {"seed": 8})
    assert SPLITS == ("train", "validation", "test", "paraphrase")
    for split in SPLITS:
        assert (a / f"{split}.jsonl").read_bytes() == (b / f"{split}.jsonl").read_bytes()
        assert (a / f"{split}.jsonl").read_bytes() != (c / f"{split}.jsonl").read_bytes()
        assert (
            len((a / f"{split}.jsonl").read_text().splitlines())
            == {
                "train": 40,
                "validation": 10,
                "test": 20,
                "paraphrase": 12,
            }[split]
        )
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)  # the arrow files too
    from datasets import load_from_disk

    again = _make(7, 40, 10, 20, 12)
    for split in SPLITS:
        assert load_from_disk(str(a))[split].to_list() == again[split].to_list()


def test_held_out_splits_do_not_depend_on_train_size():
    a, b = _make(1, 40, 10, 20, 12), _make(1, 90, 10, 20, 12)
    for split in ("validation", "test", "paraphrase"):
        assert a[split].to_list() == b[split].to_list()
    c = _make(1, 40, 10, 20, 30)  # nor validation and test on the paraphrase split's size
    assert a["test"].to_list() == c["test"].to_list() and a["validation"].to_list() == c["validation"].to_list()


def _whole(p: str) -> re.Pattern:
    return re.compile(r"(?<![\w'-])" + re.escape(p) + r"(?![\w'-])")  # "Ma" is not in "Martin"


def test_people_are_disjoint_across_splits(dd):
    people = {s: _people(dd[s]) for s in dd}
    assert set(people) == set(SPLITS)
    assert all(len(p) > 100 for p in people.values())
    for i, a in enumerate(SPLITS):
        for b in SPLITS[i + 1 :]:
            assert not people[a] & people[b], (a, b)
    train_text = " ".join(r["user"] + r["api"] + r["reply"] + r["answer"] for r in dd["train"])
    assert not [p for s in ("test", "paraphrase") for p in people[s] if _whole(p).search(train_text)]


def test_every_query_shape_and_relation_is_present(dd):
    for split, ds in dd.items():
        kinds = Counter(r["query_type"] for r in ds)
        n_write = round(len(ds) * 0.25)
        assert kinds["write"] == n_write
        assert all(abs(kinds[t] - (len(ds) - n_write) / 6) < 1 for t in QUERY_TYPES), kinds
        assert {r["relation"] for r in ds} == set(RELATIONS)
    test = Counter((r["query_type"], r["relation"]) for r in dd["test"])
    assert all(test[(t, rel)] >= 5 for t in QUERY_TYPES for rel in RELATIONS)  # relations cycled per type
    for r in _rows(dd):
        if r["kind"] == "read":
            assert query_shape(Triple(*r["query"])) == SHAPES[r["query_type"]]
            assert r["query"][1] in ("", RELATIONS[r["relation"]])
            # the question names every known term except the relation, which is paraphrased
            assert r["query"][0] in r["user"] and r["query"][2] in r["user"]


def test_cpu_profile_covers_each_query_type_40_times():
    cpu = RetLLMConfig.for_profile("cpu")
    counts = Counter(generator.slots(__import__("random").Random(0), cpu.n_test, cpu.write_frac, cpu.no_match_frac))
    per_type = Counter(q for (q, _, _), n in counts.items() for _ in range(n))
    assert min(per_type[t] for t in QUERY_TYPES) >= 40


def test_read_reply_is_exactly_the_matching_scene_triples(dd):
    misses = Counter()
    for r in _rows(dd):
        if r["kind"] != "read":
            continue
        expected = [t for t in r["memory"] if all(q in ("", x) for q, x in zip(r["query"], t))]
        assert r["triples"] == expected
        [call] = parse_retllm(r["api"] + r["reply"])
        assert isinstance(call, MemRead)
        assert call.queries == (Triple(*r["query"]),)
        assert call.results == tuple(Triple(*t) for t in expected)
        assert r["api"].endswith(":") and r["reply"].endswith("]")
        [paused] = parse_retllm(r["api"])
        assert isinstance(paused, MemRead) and paused.results is None
        assert 3 <= len({t[0] for t in r["memory"]}) <= 8
        if not expected:
            misses[r["query_type"]] += 1
            assert r["reply"] == "]" and r["answer"] == NO_ANSWER
    assert set(misses) == set(QUERY_TYPES)  # each type teaches "nothing found" too
    reads = sum(r["kind"] == "read" for r in _rows(dd))
    assert 0.05 < sum(misses.values()) / reads < 0.15
    sizes = Counter(len(r["triples"]) for r in _rows(dd) if r["query_type"] in ("org", "rel", "org_rel"))
    assert sum(n for k, n in sizes.items() if k >= 3) > 50  # aggregation queries return several facts


def test_write_examples_make_one_call_per_person(dd):
    sizes = Counter()
    for r in _rows(dd):
        if r["kind"] != "write":
            continue
        calls = parse_retllm(r["api"])
        assert all(isinstance(c, MemWrite) for c in calls)
        assert [list(c.triples[0]) for c in calls] == r["triples"]
        people = [t[0] for t in r["triples"]]
        assert len(set(people)) == len(people) == len(calls)
        assert all(p in r["user"] for p in people)
        pairs = {(t[1], t[2]) for t in r["triples"]}
        if r["phrasing"] == "multi_fact":  # several (relation, organisation), the first the row's relation
            assert len(pairs) >= 2 and r["triples"][0][1] == RELATIONS[r["relation"]]
        else:
            assert pairs == {(RELATIONS[r["relation"]], r["triples"][0][2])}
        assert all(t[2] in r["user"] for t in r["triples"])
        assert not any(t in r["memory"] for t in r["triples"])  # the memory before the write
        assert r["reply"] == r["answer"] == "" and r["query"] == []
        sizes[len(people)] += 1
    assert sizes[1] > 0 and sum(n for k, n in sizes.items() if k >= 3) > 0


def test_join_names():
    assert join_names(["Ann Lee"]) == "Ann Lee"
    assert join_names(["Ann Lee", "Bob Wu"]) == "Ann Lee and Bob Wu"
    assert join_names(["A", "B", "C"]) == "A, B, and C"
    assert join_names(["A", "B", "C", "D"]) == "A, B, C, and D"
    with pytest.raises(ValueError):
        join_names([])


_PREDICATES = {
    "is employed by": "employed by",
    "are employed by": "employed by",
    "is a manager of": "manager of",
    "are managers of": "manager of",
    "is an investor in": "investor in",
    "are investors in": "investor in",
    "is a founder of": "founder of",
    "are founders of": "founder of",
    "is a customer of": "customer of",
    "are customers of": "customer of",
}
_SENTENCE = re.compile(r"(.+?) (" + "|".join(_PREDICATES) + r") (.+)\.")


def _said(answer: str) -> tuple[list[list[str]], int]:
    """The facts an answer states, parsed independently of `stated_facts`, and how many sentences were plural."""
    said, plural = [], 0
    for sentence in answer.split(". "):
        m = _SENTENCE.fullmatch(sentence if sentence.endswith(".") else sentence + ".")
        assert m, answer
        subj, pred, org = m.groups()
        names = re.split(r", and |, | and ", subj)
        assert subj == (
            names[0]
            if len(names) == 1
            else " and ".join(names)
            if len(names) == 2
            else ", ".join(names[:-1]) + ", and " + names[-1]
        )
        assert pred.startswith("are ") == (len(names) > 1), answer
        plural += len(names) > 1
        said += [[n, _PREDICATES[pred], org] for n in names]
    return said, plural


def test_answers_state_every_result_one_sentence_per_fact_in_reply_order(dd):
    for r in _rows(dd):
        if r["kind"] != "read" or not r["triples"]:
            continue
        said, plural = _said(r["answer"])
        assert said == r["triples"] and plural == 0, r["answer"]
        assert stated_facts(r["answer"]) == set(map(tuple, r["triples"]))


def test_grouped_answers_name_every_result_with_agreement(dd):
    plural = 0
    for r in _rows(dd):
        if r["kind"] != "read" or not r["triples"]:
            continue
        answer = answer_sentence(r["triples"], grouped=True)
        said, p = _said(answer)
        plural += p
        assert sorted(said) == sorted(r["triples"]), answer
        assert stated_facts(answer) == set(map(tuple, r["triples"]))
    assert plural > 50


def test_stated_facts_reads_nothing_into_other_words():
    assert stated_facts("I don't know.") == set()
    assert stated_facts("Ann Lee works with Pfizer.") == set()
    assert stated_facts("Ann Lee and Bo Wu are customers of L'Oreal. Cy is a manager of BMW.") == {
        ("Ann Lee", "customer of", "L'Oreal"),
        ("Bo Wu", "customer of", "L'Oreal"),
        ("Cy", "manager of", "BMW"),
    }


def test_all_api_text_round_trips(dd):
    for r in _rows(dd):
        text = r["api"] + r["reply"]
        calls = parse_retllm(text)
        assert calls and not any(isinstance(c, ApiError) for c in calls)
        if r["kind"] == "write":
            assert format_retllm_write([list(c.triples[0]) for c in calls]) == r["api"]
        assert calls[-1].end == len(text)


def test_rows_render_with_the_shared_prompt_format(dd):
    class NoTemplate:  # Alpaca fallback: no tokenizer files needed
        chat_template = None
        eos_token = "</s>"

    for r in dd["test"].select(range(20)):
        text, spans = retllm_example_text(NoTemplate(), r)
        assert text[spans[0][0] : spans[0][1]] == r["api"]
        assert text[spans[-1][0] : spans[-1][1]] == r["answer"] + "</s>"  # '' for writes


def test_shipped_name_lists():
    first, last = load_names(DATA / "first_names.txt"), load_names(DATA / "last_names.txt")
    companies = load_names(DATA / "companies.txt")
    assert len(first) >= 200 and len(last) >= 200 and len(companies) >= 50
    assert not set(companies) & set(first)


def test_bad_name_lists_are_refused(tmp_path):
    (tmp_path / "dup.txt").write_text("Ann\nBob\nAnn\n")
    with pytest.raises(ValueError, match="dup.txt:3: duplicate name 'Ann'"):
        load_names(tmp_path / "dup.txt")
    (tmp_path / "bad.txt").write_text("Ann\nB{ob}\n")
    with pytest.raises(ValueError, match="API delimiter"):
        load_names(tmp_path / "bad.txt")
    with pytest.raises(ValueError, match="distinct people"):
        _make(0, 100, 10, 10, first_names=["Ann", "Bob"], last_names=["Lee", "Wu"])
    with pytest.raises(ValueError, match="write_frac"):
        _make(0, 10, 10, 10, write_frac=1.5)


def test_load_synthetic_builds_once_then_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(synthetic, "dataset_dir", lambda profile="cpu": tmp_path / profile)
    first = load_synthetic("smoke", seed=0)
    stamp = (tmp_path / "smoke" / "test.jsonl").stat().st_mtime_ns
    again = load_synthetic("smoke", seed=0)
    assert again["test"].to_list() == first["test"].to_list()
    assert (tmp_path / "smoke" / "test.jsonl").stat().st_mtime_ns == stamp  # loaded, not rebuilt
    other = load_synthetic("smoke", seed=1)
    assert other["test"].to_list() != first["test"].to_list()


# ------------------------------------------------------------------------------------------ paraphrase split
@pytest.fixture(scope="module")
def cpu_para():
    """The cpu profile's paraphrase split (its people depend on the sizes of test and validation, not of train)."""
    p = RetLLMConfig.for_profile("cpu")
    return _make(0, 0, p.n_val, p.n_test, p.n_paraphrase)["paraphrase"]


def _norm(text: str) -> str:
    """Case and punctuation do not make a new phrasing."""
    return " ".join(re.findall(r"[a-z0-9{}]+", text.lower()))


def _fill(template: str) -> str:
    return template.format(P="Ann Lee", X="Ann Lee", O="Acme")


def _training_templates() -> set[str]:
    out = {t for qs in QUESTIONS.values() for t in qs}
    for f in FORMS.values():
        out |= {*f.write_sg, *f.write_pl, *f.per_rel, *f.rel, *f.org_rel}
    return out


def _paraphrase_templates(typos: bool | None = None) -> set[str]:
    """Every paraphrase template; only those with typos (True) or only those without (False)."""
    out = set()
    if typos is not True:
        out |= {t for qs in PARAPHRASE_QUESTIONS.values() for t in qs}
    if typos is not False:
        out |= {t for qs in PARAPHRASE_TYPOS.values() for t in qs}
    for p in PARAPHRASE_FORMS.values():
        for f in dataclasses.fields(p):
            if typos is None or f.name.startswith("typo_") == typos:
                out |= set(getattr(p, f.name))
    return out


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]+", re.sub(r"\{\w\}", " ", text.lower())))


def test_no_paraphrase_is_a_training_template():
    train, para = _training_templates(), _paraphrase_templates()
    assert len(para) > 200
    assert not para & train
    assert not {_norm(t) for t in para} & {_norm(t) for t in train}
    filled = {_norm(_fill(t)) for t in train}  # nor the same sentence once the names are in
    assert not [t for t in para if _norm(_fill(t)) in filled]


def test_paraphrase_tables_cover_every_relation_and_query_type_with_the_right_slots():
    assert set(PARAPHRASE_FORMS) == set(RELATIONS)
    assert set(PARAPHRASE_QUESTIONS) == set(PARAPHRASE_TYPOS) == set(QUESTIONS) == {"per", "per_org", "org"}
    slots = {"per": {"X"}, "per_org": {"X", "O"}, "org": {"O"}, "per_rel": {"X"}, "rel": set(), "org_rel": {"O"}}

    def names(t: str) -> set[str]:
        return {f for _, f, _, _ in string.Formatter().parse(t) if f is not None}

    for table in (PARAPHRASE_QUESTIONS, PARAPHRASE_TYPOS):
        for q, ts in table.items():
            assert ts and all(names(t) == slots[q] for t in ts), q
    for p in PARAPHRASE_FORMS.values():
        for f in dataclasses.fields(p):
            ts = getattr(p, f.name)
            want = slots.get(f.name.removeprefix("typo_"), {"P", "O"})
            assert len(ts) >= 4 and all(names(t) == want for t in ts), f.name
            if f.name.startswith(("write", "passive")):  # clauses of a multi-fact statement start with a name
                assert all(t.startswith("{") and t.endswith(".") for t in ts), f.name
    for j in (*JOIN_TWO, *JOIN_THREE):
        assert j.endswith(".")


def test_every_typo_template_has_a_misspelt_word():
    correct = set().union(*map(_words, _training_templates() | _paraphrase_templates(typos=False)))
    typos = _paraphrase_templates(typos=True)
    assert len(typos) >= 50
    assert not [t for t in typos if not _words(t) - correct]


def test_paraphrase_split_has_the_profiles_size():
    profiles = RetLLMConfig.PROFILES
    assert {p: c.n_paraphrase for p, c in profiles.items()} == {"smoke": 8, "cpu": 120, "gpu": 600}
    meta = dataset_meta(profiles["smoke"])
    assert meta["n_paraphrase"] == 8
    dd = make_dataset(profiles["smoke"])
    assert {s: dd[s].num_rows for s in dd} == {"train": 40, "validation": 10, "test": 20, "paraphrase": 8}
    gpu = profiles["gpu"]  # the shipped name lists hold the gpu profile's people, paraphrase pool included
    first, last = load_names(DATA / "first_names.txt"), load_names(DATA / "last_names.txt")
    sizes = {"train": gpu.n_train, "validation": gpu.n_val, "test": gpu.n_test, "paraphrase": 600}
    pools = generator.name_pools(0, first, last, sizes, gpu.scene_size)
    assert len(pools["paraphrase"]) == 600 * 9 and not set(pools["paraphrase"]) & set(pools["train"])


def test_cpu_paraphrase_split_is_balanced_like_the_others(cpu_para):
    assert cpu_para.num_rows == RetLLMConfig.for_profile("cpu").n_paraphrase
    kinds = Counter(cpu_para["query_type"])
    assert kinds["write"] == 30 and all(kinds[t] == 15 for t in QUERY_TYPES), kinds
    assert {r["relation"] for r in cpu_para if r["kind"] == "write"} == set(RELATIONS)
    misses = Counter(r["query_type"] for r in cpu_para if r["kind"] == "read" and not r["triples"])
    assert set(misses) == set(QUERY_TYPES)
    shapes = Counter((r["kind"], r["phrasing"]) for r in cpu_para)
    assert {p for _, p in shapes} == set(PHRASINGS) - {"template"}
    assert shapes[("write", "multi_fact")] >= 0.1 * kinds["write"]
    typo_types = {r["query_type"] for r in cpu_para if r["phrasing"] == "typo"}
    assert typo_types == set(QUERY_TYPES)


def test_other_splits_are_said_with_the_training_templates(dd):
    for split in ("train", "validation", "test"):
        assert set(dd[split]["phrasing"]) == {"template"}
    assert set(dd["paraphrase"]["phrasing"]) == set(PHRASINGS) - {"template"}


def _check_gold(r):
    if r["kind"] == "read":
        assert r["triples"] == lookup(r["memory"], r["query"])
        assert r["api"] == format_retllm_read_query(r["query"])
        assert r["reply"] == format_retllm_read_reply(r["triples"])
        assert r["answer"] == answer_sentence(r["triples"])
        [call] = parse_retllm(r["api"] + r["reply"])
        assert isinstance(call, MemRead) and call.queries == (Triple(*r["query"]),)
        assert call.results == tuple(Triple(*t) for t in r["triples"])
        assert r["query"][0] in r["user"] and r["query"][2] in r["user"]  # no typo inside a name
        return
    calls = parse_retllm(r["api"])
    assert all(isinstance(c, MemWrite) for c in calls)
    assert [list(c.triples[0]) for c in calls] == r["triples"]
    assert r["reply"] == r["answer"] == "" and r["query"] == []
    assert not any(t in r["memory"] for t in r["triples"])
    assert r["triples"][0][1] == RELATIONS[r["relation"]]
    # every triple in sentence order: each person named once, later triples' people further on
    at = []
    for p, _, o in r["triples"]:
        [m] = list(_whole(p).finditer(r["user"]))
        at.append(m.start())
        assert o in r["user"]
    assert at == sorted(at), r["user"]


def test_paraphrase_gold_is_computed_as_for_test(dd, cpu_para):
    rows = [*dd["paraphrase"], *cpu_para]
    for r in rows:
        _check_gold(r)
    for r in dd["test"]:
        _check_gold(r)


def test_multi_fact_statements_mix_relations_and_organisations(cpu_para):
    multi = [r for r in cpu_para if r["phrasing"] == "multi_fact"]
    assert len(multi) >= 3
    for r in multi:
        pairs = list(dict.fromkeys((t[1], t[2]) for t in r["triples"]))
        assert 2 <= len(pairs) <= 3
        assert len(r["triples"]) == len({t[0] for t in r["triples"]})
    assert any(len({t[1] for t in r["triples"]}) > 1 for r in multi)  # different relations in one statement
    # different organisations in one statement
    assert any(len({t[2] for t in r["triples"]}) > 1 for r in multi)
    assert any(len({(t[1], t[2]) for t in r["triples"]}) == 3 for r in multi)  # three clauses
    others = [r for r in cpu_para if r["kind"] == "write" and r["phrasing"] != "multi_fact"]
    assert all(len({(t[1], t[2]) for t in r["triples"]}) == 1 for r in others)


def test_no_paraphrase_row_says_what_the_training_generator_would(dd, cpu_para):
    questions = _training_templates() - {t for f in FORMS.values() for t in (*f.write_sg, *f.write_pl)}
    for r in [*dd["paraphrase"], *cpu_para]:
        if r["phrasing"] == "multi_fact":
            continue  # several clauses: no training template states more than one (relation, organisation)
        if r["kind"] == "write":
            [(_, o)] = {(t[1], t[2]) for t in r["triples"]}
            forms = FORMS[r["relation"]]
            people = join_names([t[0] for t in r["triples"]])
            said = {_norm(t.format(P=people, O=o)) for t in (*forms.write_sg, *forms.write_pl)}
        else:
            x, _, o = r["query"]
            said = {_norm(t.format(X=x, O=o)) for t in questions}
        assert _norm(r["user"]) not in said, r["user"]


def test_typo_questions_keep_the_names_whole(cpu_para):
    correct = set().union(*map(_words, _training_templates() | _paraphrase_templates(typos=False)))
    typos = [r for r in cpu_para if r["phrasing"] == "typo"]
    assert len(typos) >= 20
    for r in typos:
        x, _, o = r["query"]
        rest = r["user"]
        for name in (x, o):
            if name:
                assert rest.count(name) == 1  # verbatim, once
                rest = rest.replace(name, " ")
        assert _words(rest) - correct, r["user"]  # the typo is outside the names


def test_paraphrase_split_is_deterministic_for_a_seed():
    a = _make(5, 10, 10, 20, 30)["paraphrase"].to_list()
    assert a == _make(5, 10, 10, 20, 30)["paraphrase"].to_list()
    assert a != _make(6, 10, 10, 20, 30)["paraphrase"].to_list()
    assert [r["id"] for r in a] == [f"paraphrase-{i:05d}" for i in range(30)]


# ------------------------------------------------------------------------------------------ the config
def test_cpu_config_is_the_committed_data_sets_build():
    # load_synthetic("cpu") reuses data/retllm_synthetic only if its build.json is the cpu config's
    committed = json.loads((DATA / "retllm_synthetic" / "build.json").read_text(encoding="utf-8"))
    assert dataset_meta(RetLLMConfig.for_profile("cpu")) == committed


def test_default_build_is_the_committed_data_set_byte_for_byte():
    # phrasings="paper" (the default) rebuilds data/retllm_synthetic exactly: notebooks 01-03 and the committed
    # adapters stay valid while the wide build (tests/test_wide.py) waits for its own training run
    config = RetLLMConfig.for_profile("cpu")
    assert config.phrasings == "paper"
    dd = make_dataset(config)
    for split in SPLITS:
        text = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in dd[split])
        assert text.encode("utf-8") == (DATA / "retllm_synthetic" / f"{split}.jsonl").read_bytes(), split


def test_config_names_a_bad_value_and_an_unknown_profile_or_setting():
    with pytest.raises(ValueError, match="profile must be one of smoke, cpu, gpu; got 'laptop'"):
        RetLLMConfig.for_profile("laptop")
    bad = {"lr": 0, "batch_size": 2.5, "scene_size": (5, 2), "no_match_frac": 1.2, "eval_n": -1, "micro_batch": 3}
    for name, value in bad.items():
        with pytest.raises(ValueError, match=f"^{name} must "):
            RetLLMConfig.for_profile("cpu", **{name: value})
    with pytest.raises(TypeError, match="no setting 'epoch'"):
        RetLLMConfig.for_profile("cpu", epoch=2)


def test_a_given_value_wins_and_none_keeps_the_profiles():
    cpu = RetLLMConfig.for_profile("cpu")
    mine = RetLLMConfig.for_profile("cpu", lr=None, epochs=3, scene_size=[2, 4])
    assert (mine.lr, mine.epochs, mine.scene_size, mine.n_train) == (cpu.lr, 3, (2, 4), 1500)
    assert dataset_meta(mine)["scene_size"] == [2, 4]  # JSON-ready


def test_gpu_profile_keeps_batch_32_in_micro_batches_with_checkpointing():
    gpu = RetLLMConfig.for_profile("gpu")
    assert gpu.batch_size == 32 and gpu.gradient_checkpointing and gpu.batch_split() == (4, 8)
    assert RetLLMConfig.for_profile("cpu").batch_split() == (8, 1)  # cpu: one pass per step, as committed


def test_the_write_vocabulary_is_the_five_relations_unless_redocred_is_asked_for():
    # Re-DocRED's names let the model store "lives in" as "located in the administrative territorial entity"
    assert relation_vocabulary() == list(RELATIONS.values())
    wide = relation_vocabulary(redocred=True)
    assert wide[:5] == list(RELATIONS.values()) and len(set(wide)) == len(wide) > 90
    assert "located in the administrative territorial entity" in wide
