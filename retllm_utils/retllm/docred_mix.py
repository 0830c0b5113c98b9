"""Statements over relations the synthetic set lacks, for the wide build: Re-DocRED sentences and their gold triples.

RET-LLM's memory is general (§1, §3): a write stores whatever triples a statement holds. The five people–company
relations teach the API; these sentences teach that other relations are written too, in Re-DocRED's relation names
(data/redocred/rel_info.json). Only the TEST split (test_revised.json) is read, never dev: the MemLLM notebooks
evaluate on dev. What is kept (`statements`), per sentence of a document:

- its gold triples are those whose two entities are both mentioned in the sentence (`memllm.docred.gold_triples`,
  canonical names); 1 to `MAX_TRIPLES` of them, each entity's canonical name verbatim (whole words) in the sentence
  as detokenized (`detokenize`), so every term of the call is a copy of the user's words; at most `MAX_CHARS`;
- no triple of a date- or number-valued relation (`DATE_RELATIONS`): the synthetic statements' time phrases ("since
  2019") are not stored, and training both rules would contradict; no relation the synthetic set already says in
  its own words (`SYNTHETIC_TWINS`: employer, founded by), which would teach two names for one relation;
- a sentence whose relations are all in `HELD_OUT_RELATIONS` goes to the new_relations split (never trained on);
  one with none of them to the training pool, split by document (train 70%, validation 10%, test 20%); a mix is
  dropped, and so is a training sentence that matches a held-out construction's marker (`wide_phrasings.MARKERS`).

Nothing is read from dev; one kept sentence of a test document also stands, word for word, in a dev document
("After World War II the region was placed under Polish administration ..."): it is kept, with its test labels.
Re-DocRED labels are document-level: a pair mentioned in a sentence may hold a relation that sentence does not say
on its own (the sentence is the write's only context, as MemLLM's per-sentence writes are). The triples of a row are
in sentence order: by where the subject, then the object, first stands in the sentence; one `[MEM_WRITE{..}]` each.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..api import Triple, format_retllm_write
from ..paths import DATA

__all__ = [
    "DOCRED_FILE",
    "REL_INFO",
    "HELD_OUT_RELATIONS",
    "DATE_RELATIONS",
    "SYNTHETIC_TWINS",
    "MAX_TRIPLES",
    "MAX_CHARS",
    "Statement",
    "detokenize",
    "statements",
    "load_statements",
    "split_statements",
    "docred_row",
]

DOCRED_FILE = DATA / "redocred" / "test_revised.json"  # the test split only: the MemLLM notebooks score on dev
REL_INFO = DATA / "redocred" / "rel_info.json"
# Never in a training row: a model is scored on writing them (names it never saw: score the entities exactly and
# the relation by the memory's fuzzy match, since an unseen relation's exact name cannot be guessed).
HELD_OUT_RELATIONS = (
    "country of citizenship",
    "spouse",
    "child",
    "father",
    "mother",
    "sibling",
    "place of birth",
    "place of death",
    "educated at",
    "member of political party",
    "performer",
)
DATE_RELATIONS = (
    "publication date",
    "inception",
    "date of birth",
    "date of death",
    "point in time",
    "start time",
    "end time",
    "dissolved, abolished or demolished",
    "unemployment rate",
)
SYNTHETIC_TWINS = ("employer", "founded by")  # the synthetic "employed by" and "founder of"
MAX_TRIPLES = 3
MAX_CHARS = 300
_SHARES = (("train", 0.7), ("validation", 0.1), ("test", 0.2))


@dataclass(frozen=True)
class Statement:
    """One kept sentence: where it is from, its text as the user's message, its gold triples in sentence order."""

    title: str
    doc: int  # index in the file
    sentence: int
    text: str
    triples: tuple[Triple, ...]


def detokenize(text: str) -> str:
    """DocRED's space-joined tokens as running text: no space before , . ; : ! ? ) or 's, none after ( [ $, none
    inside a pair of quotes."""
    text = re.sub(r" ([,.;:!?%)\]])", r"\1", text)
    text = re.sub(r"([(\[$]) ", r"\1", text)
    text = re.sub(r" (n't|'s|'re|'ve|'m|'ll|'d)\b", r"\1", text)
    text = re.sub(r"(\ws) ' ", r"\1' ", text)  # "the Sneaker Pimps ' Kelli Ali"
    text = re.sub(r"`` ?| ?''", '"', text)
    return re.sub(r'" ([^"]*?) "', r'"\1"', text)  # quotes hug what they quote


def _at(term: str, text: str) -> int:
    """Where `term` first stands in `text` as whole words, or -1."""
    m = re.search(r"(?<!\w)" + re.escape(term) + r"(?!\w)", text)
    return m.start() if m else -1


def statements(docs: Sequence[Mapping[str, Any]], rel_names: Mapping[str, str]) -> list[Statement]:
    """Every sentence of `docs` kept by the rules of the module docstring (held-out relations included)."""
    from ..memllm.docred import DocView, gold_triples

    left_out = set(DATE_RELATIONS) | set(SYNTHETIC_TWINS)
    out = []
    for d, doc in enumerate(docs):
        view = DocView.of(doc)
        gold = gold_triples(doc, rel_names, view)
        for s in range(len(doc["sents"])):
            ents = view.sent_entities[s]
            triples = [t for k, t in gold if doc["labels"][k]["h"] in ents and doc["labels"][k]["t"] in ents]
            if not 1 <= len(triples) <= MAX_TRIPLES or any(t.relation in left_out for t in triples):
                continue
            text = detokenize(view.sentence(s))
            where = {x: _at(x, text) for t in triples for x in (t.subject, t.object)}
            if len(text) > MAX_CHARS or min(where.values()) < 0:
                continue
            triples.sort(key=lambda t: (where[t.subject], where[t.object]))
            out.append(Statement(doc.get("title", ""), d, s, text, tuple(triples)))
    return out


def load_statements(path: str | Path = DOCRED_FILE, rel_info: str | Path = REL_INFO) -> list[Statement]:
    """`statements` of a DocRED-format file (default: Re-DocRED's test split)."""
    from ..memllm.docred import load_docred, relation_names

    return statements(load_docred(path), relation_names(rel_info))


def split_statements(stmts: Sequence[Statement], seed: int) -> dict[str, list[Statement]]:
    """train / validation / test (documents shuffled by `seed`, then cut 70/10/20) of the sentences over trained-on
    relations that match no held-out marker, and new_relations: those whose relations are all held out."""
    from .wide_phrasings import held_out_marker

    held = set(HELD_OUT_RELATIONS)
    docs = sorted({st.doc for st in stmts})
    random.Random(f"retllm-wide/{seed}/docred").shuffle(docs)
    cut, start = {}, 0
    for i, (split, share) in enumerate(_SHARES):
        end = len(docs) if i == len(_SHARES) - 1 else start + round(share * len(docs))
        cut.update({d: split for d in docs[start:end]})
        start = end
    out: dict[str, list[Statement]] = {"train": [], "validation": [], "test": [], "new_relations": []}
    for st in stmts:
        rels = {t.relation for t in st.triples}
        if rels <= held:
            out["new_relations"].append(st)
        elif not rels & held and held_out_marker(st.text) is None:
            out[cut[st.doc]].append(st)
    return out


def docred_row(st: Statement, split: str, i: int) -> dict[str, Any]:
    """A write row of the wide build (synthetic.features' columns; phrasing 'redocred', relation the first
    triple's Re-DocRED name, an empty memory)."""
    triples = [list(t) for t in st.triples]
    return {
        "id": f"{split}-{i:05d}",
        "kind": "write",
        "query_type": "write",
        "relation": triples[0][1],
        "phrasing": "redocred",
        "user": st.text,
        "api": format_retllm_write(triples),
        "reply": "",
        "answer": "",
        "query": [],
        "triples": triples,
        "memory": [],
        "scene": i,
    }
