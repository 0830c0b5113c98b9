"""The benchmark workload generator (benchmarks/phrases.py, benchmarks/workload.py): seeded, distinct, fair."""

import sys

from retllm_utils.paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
from phrases import make_triples  # noqa: E402
from workload import exact_queries, phrases_of, workload  # noqa: E402


def test_same_seed_same_triples_other_seed_other_triples():
    assert make_triples(2000, seed=3) == make_triples(2000, seed=3)
    assert make_triples(2000, seed=3) != make_triples(2000, seed=4)


def test_triples_are_distinct_and_entities_recur():
    t = make_triples(5000, seed=0)
    assert len(set(t)) == 5000 and all(s != o for s, _, o in t)
    ents, rels = phrases_of(t)
    assert len(ents) < 2 * len(t) and len(rels) > 5  # entities shared between triples


def test_fuzzy_queries_are_near_misses_not_stored_and_workload_is_deterministic():
    t, exact, fuzzy, needed = workload(3000, seed=1, n_queries=200)
    assert (t, exact, fuzzy, needed) == workload(3000, seed=1, n_queries=200)
    stored = set(phrases_of(t)[0])
    for q, src in fuzzy:
        term = q[0] or q[2]
        assert term not in stored and src in stored and term != src
        assert set(q) - {term, ""} <= set(phrases_of(t)[1])
    for q in exact:
        assert all(x == "" or x in stored or x in phrases_of(t)[1] for x in q)


def test_smaller_query_sets_are_prefixes():
    t = make_triples(1000, seed=0)
    assert exact_queries(t, 50, 0) == exact_queries(t, 100, 0)[:50]
