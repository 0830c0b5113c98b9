"""Re-DocRED as the MemLLM data modules read it: file checks, canonical names, lookups, the cached embedder."""

import json

import pytest

from retllm_utils.api import Triple
from retllm_utils.memllm.docred import DocView, gold_triples, load_docred, triple_memory_lookup
from retllm_utils.memllm.reads import read_examples

DOCS = (0, 1, 2)  # three real documents of Re-DocRED's test split


def test_loader_relation_names_and_canonical_names(corpus, tmp_path):
    docs, rn = corpus
    assert len(docs) == 500 and rn["P17"] == "country" and len(rn) == 96
    view = DocView.of(docs[0])
    # entity 0 lists "Loud" (sentence 1) first, but is first mentioned as "Loud Tour" in sentence 0
    assert docs[0]["vertexSet"][0][0]["name"] == "Loud" and view.names[0] == "Loud Tour"
    assert view.text == " ".join(w for s in docs[0]["sents"] for w in s)
    bad = json.loads(json.dumps(docs[:2]))
    bad[1]["labels"][0]["h"] = 999
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match=r"document 1 .*label 0: h=999"):
        load_docred(tmp_path / "bad.json")
    del bad[1]["sents"]
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ValueError, match="missing 'sents'"):
        load_docred(tmp_path / "bad.json")
    (tmp_path / "nolabels.json").write_text(json.dumps([{k: v for k, v in docs[0].items() if k != "labels"}]))
    assert load_docred(tmp_path / "nolabels.json")[0]["labels"] == []


def test_results_from_a_triple_memory(corpus):
    from retllm_utils.memory import TripleMemory
    from retllm_utils.models import NgramEmbedder

    docs, rn = corpus
    doc = docs[DOCS[0]]
    mem = TripleMemory(embedder=NgramEmbedder(), index="flat")
    mem.write_many([t for _, t in gold_triples(doc, rn)])
    lookup = triple_memory_lookup(mem)
    assert lookup(Triple("Loud Tour", "performer", "")) == ["Rihanna"]
    rows = read_examples(doc, rn, lookup, results_source="memory")
    assert rows and all(r["results_source"] == "memory" for r in rows)
    # the official code's filling: an empty reply becomes the target (off by default: replies stay realistic)
    filled = read_examples(doc, rn, lookup, results_source="memory", fill_empty_with_target=True)
    assert all(r["results"] for r in filled)
    assert [r["results"] or r["targets"][:1] for r in rows] == [r["results"] for r in filled]


def test_cached_embedder_encodes_each_phrase_once():
    """The cache returns the wrapped embedder's vectors and asks it only for phrases it has not seen."""
    import numpy as np

    from retllm_utils.memllm.docred import CachedEmbedder
    from retllm_utils.models import NgramEmbedder

    calls = []

    class Counting(NgramEmbedder):
        def encode(self, texts):
            calls.append(list(texts))
            return super().encode(texts)

    emb = CachedEmbedder(Counting())
    emb.prime(["Loud Tour", "Rihanna"])
    v = emb.encode(["Rihanna", "Loud Tour", "Rihanna", "Barbados"])
    assert calls == [["Loud Tour", "Rihanna"], ["Barbados"]]
    assert np.allclose(v, NgramEmbedder().encode(["Rihanna", "Loud Tour", "Rihanna", "Barbados"]))
