"""The synthetic RET-LLM data set: reproducible bytes, disjoint people, replies and answers that follow the scene."""

import re
from collections import Counter

import pytest

from retllm_utils.api import ApiError, MemRead, MemWrite, Triple, format_retllm_write, parse_retllm, query_shape
from retllm_utils.paths import DATA
from retllm_utils.prompts import retllm_example_text
from retllm_utils.retllm import synthetic
from retllm_utils.retllm.profiles import PROFILES
from retllm_utils.retllm.synthetic import (
    NO_ANSWER,
    QUERY_TYPES,
    RELATIONS,
    join_names,
    load_names,
    load_synthetic,
    make_dataset,
    save_dataset,
)

SHAPES = {
    "per": (True, False, False),
    "per_org": (True, False, True),
    "per_rel": (True, True, False),
    "org": (False, False, True),
    "rel": (False, True, False),
    "org_rel": (False, True, True),
}


@pytest.fixture(scope="module")
def dd():
    """Big enough that every query type has misses and multi-person statements (~1 s)."""
    return make_dataset(seed=3, n_train=300, n_val=60, n_test=240)


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
    a = save_dataset(make_dataset(7, 40, 10, 20), tmp_path / "a", {"seed": 7})
    b = save_dataset(make_dataset(7, 40, 10, 20), tmp_path / "b", {"seed": 7})
    c = save_dataset(make_dataset(8, 40, 10, 20), tmp_path / "c", {"seed": 8})
    for split in ("train", "validation", "test"):
        assert (a / f"{split}.jsonl").read_bytes() == (b / f"{split}.jsonl").read_bytes()
        assert (a / f"{split}.jsonl").read_bytes() != (c / f"{split}.jsonl").read_bytes()
        assert (
            len((a / f"{split}.jsonl").read_text().splitlines()) == {"train": 40, "validation": 10, "test": 20}[split]
        )
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in files)  # the arrow files too
    from datasets import load_from_disk

    assert load_from_disk(str(a))["test"].to_list() == make_dataset(7, 40, 10, 20)["test"].to_list()


def test_test_split_does_not_depend_on_train_size():
    assert make_dataset(1, 40, 10, 20)["test"].to_list() == make_dataset(1, 90, 10, 20)["test"].to_list()


def test_people_are_disjoint_across_splits(dd):
    people = {s: _people(dd[s]) for s in dd}
    assert all(len(p) > 100 for p in people.values())
    assert not people["train"] & people["test"]
    assert not people["train"] & people["validation"]
    assert not people["validation"] & people["test"]
    train_text = " ".join(r["user"] + r["api"] + r["reply"] + r["answer"] for r in dd["train"])

    def whole(p: str) -> re.Pattern:
        return re.compile(r"(?<![\w'-])" + re.escape(p) + r"(?![\w'-])")  # "Ma" is not in "Martin"

    assert not [p for p in people["test"] if whole(p).search(train_text)]


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
    sizes = PROFILES["cpu"]
    counts = Counter(synthetic._slots(__import__("random").Random(0), sizes["n_test"], 0.25, 0.1))
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
        assert {(t[1], t[2]) for t in r["triples"]} == {(RELATIONS[r["relation"]], r["triples"][0][2])}
        assert r["triples"][0][2] in r["user"]
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


def test_answers_name_every_result_with_agreement(dd):
    plural = 0
    for r in _rows(dd):
        if r["kind"] != "read" or not r["triples"]:
            continue
        said = []
        for sentence in r["answer"].split(". "):
            m = _SENTENCE.fullmatch(sentence if sentence.endswith(".") else sentence + ".")
            assert m, r["answer"]
            subj, pred, org = m.groups()
            names = re.split(r", and |, | and ", subj)
            assert subj == (
                names[0]
                if len(names) == 1
                else " and ".join(names)
                if len(names) == 2
                else ", ".join(names[:-1]) + ", and " + names[-1]
            )
            assert pred.startswith("are ") == (len(names) > 1), r["answer"]
            plural += len(names) > 1
            said += [[n, _PREDICATES[pred], org] for n in names]
        assert sorted(said) == sorted(r["triples"]), r["answer"]
    assert plural > 50


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
        make_dataset(0, 100, 10, 10, first_names=["Ann", "Bob"], last_names=["Lee", "Wu"])
    with pytest.raises(ValueError, match="write_frac"):
        make_dataset(0, 10, 10, 10, write_frac=1.5)


def test_load_synthetic_builds_once_then_loads(tmp_path, monkeypatch):
    monkeypatch.setattr(synthetic, "dataset_dir", lambda profile="cpu": tmp_path / profile)
    first = load_synthetic("smoke", seed=0)
    stamp = (tmp_path / "smoke" / "test.jsonl").stat().st_mtime_ns
    again = load_synthetic("smoke", seed=0)
    assert again["test"].to_list() == first["test"].to_list()
    assert (tmp_path / "smoke" / "test.jsonl").stat().st_mtime_ns == stamp  # loaded, not rebuilt
    other = load_synthetic("smoke", seed=1)
    assert other["test"].to_list() != first["test"].to_list()
