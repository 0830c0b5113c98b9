"""Memories of controlled recall and precision: the shares asked for, wrong triples shaped like write errors."""

import pytest

from retllm_utils.memllm.docred import gold_triples, load_docred, relation_names
from retllm_utils.memllm.memory_quality import memory_at
from retllm_utils.paths import DATA

DEV = load_docred(DATA / "redocred" / "dev_revised.json")[:10]
REL = relation_names(DATA / "redocred" / "rel_info.json")
GOLD = {t for d in DEV for _, t in gold_triples(d, REL)}


@pytest.mark.parametrize("recall, precision", [(1.0, 1.0), (0.5, 1.0), (0.5, 0.4), (0.2, 0.7)])
def test_recall_and_precision_are_what_was_asked(recall, precision):
    triples, n = memory_at(DEV, REL, recall=recall, precision=precision, seed=1)
    right = sum(t in GOLD for t in triples)
    assert right == n["kept"] and abs(right / n["gold"] - recall) < 0.03
    assert abs(right / len(triples) - precision) < 0.03
    assert n["wrong relation"] + n["wrong entity"] == len(triples) - right
    if precision < 1:
        assert n["wrong relation"] > 0 and n["wrong entity"] > 0


def test_same_seed_same_memory_and_bad_values_named():
    assert memory_at(DEV, REL, recall=0.3, precision=0.5) == memory_at(DEV, REL, recall=0.3, precision=0.5)
    with pytest.raises(ValueError, match="precision"):
        memory_at(DEV, REL, recall=0.3, precision=0)
