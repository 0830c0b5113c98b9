"""MemLLM rows from Re-DocRED: exact formats, supervised spans, relation placement, read filters, seeds, and the
committed cpu data set rebuilt byte for byte."""

import re
from collections import Counter

import pytest

from retllm_utils.api import Triple, format_memllm_read_reply, parse_memllm
from retllm_utils.memllm.dataset import make_dataset, render
from retllm_utils.memllm.docred import DocView, GoldMemory, gold_triples, load_docred, relation_names
from retllm_utils.memllm.examples import AMBIGUOUS_QUERIES, build_write_rows, read_examples, write_examples
from retllm_utils.paths import DATA

EOS = "<|im_end|>"
DOCS = (0, 1, 2)  # three real documents of Re-DocRED's test split


@pytest.fixture(scope="module")
def corpus():
    docs = load_docred(DATA / "redocred" / "test_revised.json")
    return docs, relation_names(DATA / "redocred" / "rel_info.json")


def _first_sentence(doc, e):
    return min((m["sent_id"], m["pos"][0]) for m in doc["vertexSet"][e])[0]


def _expected_sentence(doc, lab):
    """The documented rule, re-derived here: max(max(evidence), first(h), first(t)); empty evidence: first
    sentence mentioning both."""
    ev = list(lab["evidence"])
    if not ev:
        both = sorted(
            {m["sent_id"] for m in doc["vertexSet"][lab["h"]]} & {m["sent_id"] for m in doc["vertexSet"][lab["t"]]}
        )
        ev = both[:1]
    return max(ev + [_first_sentence(doc, lab["h"]), _first_sentence(doc, lab["t"])])


def test_write_text_matches_official_format_exactly(corpus):
    docs, rn = corpus
    doc = docs[0]
    rows = write_examples(doc, rn, doc_idx=0, split="train")
    assert len(rows) == len(doc["sents"])
    names = DocView.of(doc).names
    for s, row in enumerate(rows):
        mine = [t for k, t in gold_triples(doc, rn) if _expected_sentence(doc, doc["labels"][k]) == s]
        assert sorted(map(tuple, row["triples"])) == sorted(mine)
        pretext = " ".join(" ".join(x) for x in doc["sents"][:s])
        call = "({MEM_WRITE-->" + ";".join(">>".join(t) for t in row["triples"]) + "})"
        expected = pretext + "({USER_ST})" + " ".join(doc["sents"][s]) + "({USER_END})" + call
        assert row["text"] == expected
        text, spans = render(EOS, row)
        assert text == expected + EOS and spans == [(len(expected) - len(call), len(text))]
        assert text[spans[0][0] : spans[0][1]] == call + EOS
        assert all(t[0] in names and t[2] in names for t in row["triples"])
    assert rows[1]["text"].startswith("The Loud Tour was") and "Loud Tour>>performer>>Rihanna" in rows[1]["text"]
    empty = [r for r in rows if not r["triples"]]
    assert empty and all(r["text"].endswith("({USER_END})({MEM_WRITE-->})") for r in empty)
    assert sum(len(r["triples"]) for r in rows) == len(gold_triples(doc, rn)) > 0


def test_relation_in_exactly_one_sentence_once_both_entities_seen(corpus):
    docs, rn = corpus
    for d in DOCS:
        doc = docs[d]
        rows, n = build_write_rows(docs, rn, [d], split="t", drop_empty=0.0, max_triples=None)
        where = {}
        for row in rows:
            for t in map(Triple._make, row["triples"]):
                assert t not in where, f"{t} written twice"
                where[t] = row["sent_id"]
        gold = gold_triples(doc, rn)
        assert set(where) == {t for _, t in gold}
        for k, t in gold:
            lab = doc["labels"][k]
            s = where[t]
            assert s >= _first_sentence(doc, lab["h"]) and s >= _first_sentence(doc, lab["t"])
            assert s >= max(lab["evidence"], default=0)
            if lab["evidence"]:
                assert s == max(lab["evidence"] + [_first_sentence(doc, lab["h"]), _first_sentence(doc, lab["t"])])
        # "drop" leaves out exactly the labels without evidence
        dropped = write_examples(doc, rn, empty_evidence="drop")
        kept = {Triple._make(t) for r in dropped for t in r["triples"]}
        assert kept == {t for k, t in gold if doc["labels"][k]["evidence"]}


def test_no_relation_sentences_dropped_at_the_rate_asked(corpus):
    docs, rn = corpus
    ids = range(120)
    rows, n = build_write_rows(docs, rn, ids, split="t", drop_empty=0.85)
    assert n["sentences_without_relation"] > 200
    kept = n["write_examples_without_relations"] / n["sentences_without_relation"]
    assert 0.09 < kept < 0.22
    assert n["write_examples"] == len(rows) == n["sentences"] - n["dropped_no_relation"] - n["dropped_too_many_triples"]
    assert build_write_rows(docs, rn, ids, split="t", drop_empty=1.0)[1]["write_examples_without_relations"] == 0
    assert build_write_rows(docs, rn, ids, split="t", drop_empty=0.0)[1]["dropped_no_relation"] == 0
    with pytest.raises(ValueError, match="drop_empty"):
        build_write_rows(docs, rn, ids, split="t", drop_empty=1.5)


def _read_rows(docs, rn, lookup=None, **kw):
    lookup = lookup or GoldMemory.from_docs(docs, rn)
    return {d: read_examples(docs[d], rn, lookup, doc_idx=d, split="t", **kw) for d in DOCS}


def test_read_examples_format_spans_and_seen_entities(corpus):
    docs, rn = corpus
    for d, rows in _read_rows(docs, rn, early_shift=1.0).items():
        view = DocView.of(docs[d])
        first = {view.names[e]: view.first[e] for e in range(len(view.names))}
        assert rows
        prev = -1
        for i, row in enumerate(rows):
            text, (call, cont) = row["text"], row["spans"]
            assert render(EOS, row) == (text, [tuple(call), tuple(cont)])  # reads get no end token
            assert text[call[0] : call[1]].startswith("({MEM_READ(") and text[call[0] : call[1]].endswith(")-->")
            # the memory's reply sits between the two spans, never inside one
            assert text[call[1] : cont[0]] == format_memllm_read_reply(row["results"])
            assert cont[1] == len(text)
            assert text.endswith("({") != row["eot"] and row["eot"] == (i == len(rows) - 1)
            (read,) = [c for c in parse_memllm(text) if not isinstance(c, str)]
            assert [list(q) for q in read.queries] == row["queries"] and list(read.results) == row["results"]
            assert 1 <= len(row["queries"]) <= 3
            # queries name only entities whose first mention starts before the read point
            for q in row["queries"]:
                known = q[0] or q[2]
                assert first[known][0] < row["read_word"]
                assert (q[1], "subject" if q[0] else "object") not in AMBIGUOUS_QUERIES
            # the target is first mentioned at target_word, at or after the read point, not earlier in the text
            ta, tb = row["target_word"]
            assert first[row["targets"][0]][:2] == (ta, tb) and row["read_word"] == ta - row["shift"] <= ta
            assert text[slice(*row["target_span"])] == view.words_text(ta, tb)
            assert row["target_span"][0] >= cont[0]
            assert not re.search(r"(?<!\w)" + re.escape(row["targets"][0]) + r"(?!\w)", view.words_text(0, ta))
            for a, b, e in row["entity_spans"]:
                assert cont[0] <= a < b <= cont[1]
            assert text[: call[0]] == view.words_text(0, row["read_word"])  # no pretext budget given
            assert row["read_word"] > prev
            prev = row["read_word"]


def test_gold_results_contain_the_target_and_early_shift(corpus):
    docs, rn = corpus
    rows = [r for rs in _read_rows(docs, rn).values() for r in rs]
    assert all(r["shift"] == 0 for r in rows)
    assert all(r["targets"][0] in r["results"] for r in rows)
    shifted = [r for rs in _read_rows(docs, rn, early_shift=1.0).values() for r in rs]
    assert [r["target_word"] for r in shifted] == [r["target_word"] for r in rows]
    assert any(r["shift"] > 0 for r in shifted) and all(r["shift"] >= 0 for r in shifted)


def test_q_thr_and_ambiguity_filters(corpus):
    docs, rn = corpus
    base = _read_rows(docs, rn)
    # ambiguity: without the paper's list, ambiguous queries appear; with it, none (checked above) and fewer queries
    loose = _read_rows(docs, rn, ambiguous=())
    loose_q = [(q[1], "subject" if q[0] else "object") for rs in loose.values() for r in rs for q in r["queries"]]
    assert any(k in AMBIGUOUS_QUERIES for k in loose_q)
    # Q_thr: give one query 30 answers (the target + 29 others) and it goes; 29 answers and it stays
    row = base[DOCS[0]][0]
    q = Triple(*row["queries"][0])
    known = q.subject or q.object
    n0 = Counter()
    read_examples(docs[DOCS[0]], rn, GoldMemory.from_docs(docs, rn), doc_idx=DOCS[0], counts=n0)
    for extra, kept in ((29, False), (28, True)):
        mem = GoldMemory.from_docs(docs, rn)
        mem.add(
            (known, q.relation, f"Filler {i}") if q.subject else (f"Filler {i}", q.relation, known)
            for i in range(extra)
        )
        assert len(mem(q)) == extra + 1
        n = Counter()
        rows = read_examples(docs[DOCS[0]], rn, mem, doc_idx=DOCS[0], counts=n)
        assert any(list(q) in r["queries"] for r in rows) == kept
        assert n["dropped_query_q_thr"] == n0["dropped_query_q_thr"] + (not kept)
        assert all(len(r["results"]) < 30 + 3 * 29 for r in rows)
    # at most max_queries, fewest results first
    for rs in _read_rows(docs, rn, max_queries=1).values():
        assert all(len(r["queries"]) == 1 for r in rs)
    for rs in base.values():
        for r in rs:
            pri = [k if k else 5 for k in r["n_results"]]
            assert pri == sorted(pri)


def test_first_mention_filter(corpus):
    docs, rn = corpus
    on, off = Counter(), Counter()
    mem = GoldMemory.from_docs(docs, rn)
    for d in range(40):
        read_examples(docs[d], rn, mem, doc_idx=d, counts=on)
        read_examples(docs[d], rn, mem, doc_idx=d, counts=off, first_mention_filter=False)
    assert on["dropped_first_mention"] > 0 and off["dropped_first_mention"] == 0
    assert on["read_candidates"] == off["read_candidates"]


def test_seeds_reproduce_and_documents_are_independent(corpus):
    docs, rn = corpus
    a, ca = make_dataset(docs, docs[:3], rn, n_train=12, n_dev=2, seed=0, max_pretext_chars=300)
    b, cb = make_dataset(docs, docs[:3], rn, n_train=12, n_dev=2, seed=0, max_pretext_chars=300)
    c, _ = make_dataset(docs, docs[:3], rn, n_train=12, n_dev=2, seed=1, max_pretext_chars=300)
    small, _ = make_dataset(docs, docs[:3], rn, n_train=5, n_dev=2, seed=0, max_pretext_chars=300)
    assert set(a) == {"write_train", "read_train", "write_dev", "read_dev", "docs_dev"}
    for split in a:
        assert a[split].to_list() == b[split].to_list()
    assert ca == cb
    assert a["read_train"]["shift"] != c["read_train"]["shift"] or a["write_train"]["id"] != c["write_train"]["id"]
    assert all(s == 0 for s in a["read_dev"]["shift"])  # dev keeps gold read points
    for split in ("write_train", "read_train"):  # a document's rows do not depend on the other documents built
        assert small[split].to_list() == [r for r in a[split].to_list() if r["doc_idx"] < 5]
    for row in a["write_train"]:
        assert len(row["text"][: row["text"].index("({USER_ST})")]) <= 300


def test_docs_dev_rows_point_at_gold_reads(corpus):
    docs, rn = corpus
    dd, _ = make_dataset(docs[:3], docs, rn, n_train=1, n_dev=3, seed=0)
    for doc_row in dd["docs_dev"]:
        reads = [r for r in dd["read_dev"] if r["doc_idx"] == doc_row["doc_idx"]]
        text = doc_row["text"]
        assert len(doc_row["read_chars"]) == len(reads) > 0
        for r, c, (ta, tb), q in zip(
            reads, doc_row["read_chars"], doc_row["read_target_spans"], doc_row["read_queries"]
        ):
            assert r["text"][slice(*r["target_span"])] == text[ta:tb] and c == ta  # gold: no shift on dev
            assert q == r["queries"]
        for a, b, e in doc_row["mention_spans"]:
            assert text[a:b].strip() == text[a:b] and b > a


def test_tokenized_labels_cover_the_spans(corpus, smol):
    from retllm_utils.training import IGNORE, tokenize_with_spans

    _, tok = smol
    docs, rn = corpus
    dd, _ = make_dataset(docs, docs[:1], rn, n_train=1, n_dev=1, seed=0, max_pretext_chars=600)
    w = next(r for r in dd["write_train"] if r["triples"])
    text, spans = render(tok, w)
    enc = tokenize_with_spans(tok, text, spans, 2048)
    sup = tok.decode([t for t, lab in zip(enc["input_ids"], enc["labels"]) if lab != IGNORE])
    assert sup.endswith("})" + EOS) and "MEM_WRITE-->" in sup and "USER_ST" not in sup
    r = dd["read_train"][0]
    text, spans = render(tok, r)
    enc = tokenize_with_spans(tok, text, spans, 2048)
    sup = tok.decode([t for t, lab in zip(enc["input_ids"], enc["labels"]) if lab != IGNORE])
    assert "MEM_READ(" in sup and ")-->" in sup and sup.endswith("({")
    offsets = tok(text, return_offsets_mapping=True, add_special_tokens=False)["offset_mapping"]
    reply = (spans[0][1], spans[1][0])  # the memory's results: no token inside is supervised
    inside = [lab for (a, b), lab in zip(offsets, enc["labels"]) if reply[0] <= a and b <= reply[1]]
    assert inside and all(lab == IGNORE for lab in inside)


def test_read_continuation_keeps_the_read_words_space(corpus):
    """After the call comes " word", as in the plain text, so its tokens are the document's own (no "Rih|anna")."""
    docs, rn = corpus
    for d, rows in _read_rows(docs, rn, early_shift=1.0).items():
        view = DocView.of(docs[d])
        for row in rows:
            text, (_, cont) = row["text"], row["spans"]
            words = view.words_text(row["read_word"], row["read_word"] + 1)
            assert text[cont[0] :].startswith((" " if row["read_word"] else "") + words)
            assert text[cont[0] - 2 : cont[0]] == "})" and not text[: row["spans"][0][0]].endswith(" ")


def test_read_rows_current_detects_the_old_format(corpus):
    from retllm_utils.memllm.dataset import read_rows_current

    docs, rn = corpus
    rows = [r for rs in _read_rows(docs, rn).values() for r in rs]
    assert read_rows_current(rows)
    old = [
        dict(r, text=r["text"][: r["spans"][1][0]] + r["text"][r["spans"][1][0] + 1 :]) for r in rows if r["read_word"]
    ]
    assert not read_rows_current(old)


def test_cpu_data_set_rebuilds_byte_identical(tmp_path, monkeypatch):
    """`load_or_build("cpu")` with nothing saved builds the committed JSON lines (notebook 04's defaults, seed 0)."""
    from retllm_utils.memllm import dataset
    from retllm_utils.retllm.synthetic import save_dataset

    committed = dataset.dataset_dir("cpu")
    assert dataset.load_or_build("cpu")[1].startswith("loaded data/memllm_docred")
    monkeypatch.setattr(dataset, "dataset_dir", lambda profile: tmp_path / "nothing_saved")
    dd, how = dataset.load_or_build("cpu")
    assert how.startswith("built here")
    save_dataset(dd, tmp_path / "rebuilt")
    files = sorted(p.name for p in committed.glob("*.jsonl"))
    assert files == [f"{split}.jsonl" for split in sorted(dd)]
    for name in files:
        assert (tmp_path / "rebuilt" / name).read_bytes() == (committed / name).read_bytes(), name
