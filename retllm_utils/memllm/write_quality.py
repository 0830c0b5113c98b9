"""MemLLM memory-write quality (Table 4, appendices A and F; notebook 06): run the write model per focus sentence,
score its triples, and the paper's Table 4 to print beside ours.

Decoding is `generation.write_call` (greedy, or late stopping with K cut points, the repeat and unclosed-call rules;
see its module doc); `write_calls` runs it over a document's write rows (`write_document`: their triples and raw
calls), counting how the calls ended in `stats`; a late-stopping call carries the greedy call met on its way.

Constrained decoding (ours, beyond the paper; `write_document(..., relations=...)`): `WriteGrammar` allows a call
body only if every subject and object is a span of the focus sentence or its pretext (word-aligned, whitespace
ignored, as the kit's text joins DocRED's tokens with spaces where the canonical names may not) and every relation
is one of the given names (Re-DocRED's 96: `docred.relation_names`). It cannot invent entities or relations, and
every constrained call parses, so a malformed part never costs the call its good triples. Off by default: whether
it raises write recall is measured in notebook 06, not assumed. With `distinct_pairs` a subject takes each relation
once per call, so a looping model cannot repeat a triple and writes on to "})" or the token limit
(`experiments/write_levers.py` measures it: more triples, most of them wrong).

Precision and recall per document, micro-averaged: exact (the same three strings) and embedding-matched
(appendix F with §3.1's thresholds: a generated triple matches a gold one when subject and object reach cosine
`tau_entity`, the relation `tau_relation`, and each entity's mean with the relation `tau_triple`, under the memory's
phrase encoder). A generated triple counts as correct if it matches
any gold triple of its document; a gold triple counts as found if any generated triple matches it.
"""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Mapping, Sequence

import numpy as np
from tqdm.auto import tqdm

from ..api import USER_END, USER_ST, Triple, _find_unescaped, _split_unescaped, _unescape
from ..metrics import PRF
from .generation import WRITE_ENDS, ModelStep, WriteCall, write_call

__all__ = [
    "generate_write",
    "write_document",
    "write_calls",
    "call_triples",
    "calls_to_json",
    "calls_from_json",
    "stored_write_calls",
    "WriteGrammar",
    "PRF",
    "score_exact",
    "score_embedded",
    "table4_scores",
    "PAPER_TABLE4",
    "paper_table4_row",
]

# MemLLM Table 4 (App. F): the Mistral-7B write model on DocRED's validation set, per training-data composition and
# decoding; {decoding: {training data: {column: value}}}. "Prec." and "Rec." are embedding-matched (Contriever,
# App. F; comparable with our embedding-matched P/R); "Prec. (MB)" is model-based precision (an LLM judges whether
# the focus sentence supports the triple, App. D), which this kit does not compute; the paper's "F1" is the
# harmonic mean of "Rec." and "Prec. (MB)", not of "Rec." and "Prec.". "+ All" = Filtering + 85% NoRel. Drop +
# 10xAnnot., the same data as the last late-stopping row.
_COLUMNS = ("Rec.", "Prec.", "Prec. (MB)", "F1")
PAPER_TABLE4: dict[str, dict[str, dict[str, float]]] = {
    decoding: {data: dict(zip(_COLUMNS, values)) for data, values in rows.items()}
    for decoding, rows in {
        "late stopping": {
            "Distant.": (0.576, 0.309, 0.582, 0.579),
            "+ Filtering": (0.517, 0.454, 0.827, 0.636),
            "+ 85% NoRel. Drop": (0.544, 0.424, 0.799, 0.647),
            "+ 10xAnnot.": (0.578, 0.425, 0.797, 0.670),
        },
        "without late stopping": {  # greedy decoding
            "Distant.": (0.541, 0.325, 0.587, 0.563),
            "+ All": (0.562, 0.448, 0.818, 0.666),
        },
    }.items()
}


def paper_table4_row(late_stopping: bool) -> dict[str, float]:
    """The paper's row for its full training data (MemLLM Table 4, App. F), to print beside our decoding."""
    return (
        PAPER_TABLE4["late stopping"]["+ 10xAnnot."]
        if late_stopping
        else PAPER_TABLE4["without late stopping"]["+ All"]
    )


_PART = "\ufffd"  # what a tokenizer decodes an unfinished multi-byte character to
_BAD_SPACE = re.compile(r"[^\S ]| {3}")  # a call holds spaces (two in a row at most: " " then " March"), no line breaks


class WriteGrammar:
    """Allowed write-call bodies for one head: entities are spans of `source`, relations are `relations` (ours)."""

    def __init__(self, source: str, relations: Iterable[str], *, distinct_pairs: bool = False):
        self.relations = sorted({r.strip() for r in relations})
        self.distinct_pairs = distinct_pairs  # a subject takes each relation once per call: no loop can repeat it
        self._names = set(self.relations)
        kept = [i for i, c in enumerate(source) if not c.isspace()]  # whitespace is ignored when matching spans
        self._flat = "".join(source[i] for i in kept)
        self._wide = "".join(c if c.isascii() else _PART for c in self._flat)

        def edge(i: int) -> bool:  # a word starts or ends at character i of `source`
            return i in (0, len(source)) or not (source[i - 1].isalnum() and source[i].isalnum())

        self._starts = {j for j, i in enumerate(kept) if edge(i)}
        self._ends = {j + 1 for j, i in enumerate(kept) if edge(i + 1)}
        self._seen: dict[tuple[str, bool], bool] = {}

    @classmethod
    def for_head(cls, head: str, relations: Iterable[str], *, distinct_pairs: bool = False) -> "WriteGrammar":
        """The grammar for a write head (`generation.write_head`): spans of its pretext and focus sentence."""
        return cls(head.replace(USER_ST, " ").replace(USER_END, " "), relations, distinct_pairs=distinct_pairs)

    def entity(self, term: str, complete: bool) -> bool:
        """`term` is (a word-aligned start of, unless `complete`) a span of the source, whitespace ignored."""
        key, flat = "".join(term.split()), self._flat
        if not key:
            return not complete
        if _PART in key:  # a byte token's unfinished character: any non-ASCII character of the source may follow
            if complete:
                return False
            key, flat = "".join(c if c.isascii() else _PART for c in key), self._wide
        if (key, complete) not in self._seen:
            i, ok = flat.find(key), False
            while i >= 0 and not ok:
                ok = i in self._starts and (not complete or i + len(key) in self._ends)
                i = flat.find(key, i + 1)
            self._seen[key, complete] = ok
        return self._seen[key, complete]

    def relation(self, term: str, complete: bool, taken: Collection[str] = ()) -> bool:
        """`term` is (the start of, unless `complete`) an allowed relation name, not one of `taken`."""
        if complete:
            return term in self._names and term not in taken
        return any(r.startswith(term) and r not in taken for r in self.relations)

    def __call__(self, body: str, closed: bool = False) -> bool:
        """Is `body` (the text after "({MEM_WRITE-->") allowed: a whole call body if `closed`, else a prefix of one."""
        if not closed:  # an unfinished character, escape or ">>" at the end is checked with the next token
            if (len(body) - len(body.rstrip("\\"))) % 2:
                body = body[:-1]
            elif body.endswith(">") and not body.endswith(">>"):
                body = body[:-1]
        if closed and not body.strip():
            return True  # a call without triples
        if _find_unescaped(body, "{}()", 0) >= 0 or _BAD_SPACE.search(body):
            return False
        parts, pairs = _split_unescaped(body, ";"), set()
        for k, part in enumerate(parts):
            whole = closed or k < len(parts) - 1
            terms = _split_unescaped(part, ">>")
            if len(terms) > 3 or whole and len(terms) < 3:
                return False
            for f, term in enumerate(terms):
                complete = whole or f < len(terms) - 1
                text = _unescape(term) if complete else _unescape(term).lstrip()
                if f == 1:
                    subject = "".join(_unescape(terms[0]).split())
                    taken = {r for s, r in pairs if s == subject} if self.distinct_pairs else ()
                    if not self.relation(text, complete, taken):
                        return False
                    if complete:
                        pairs.add((subject, text))
                elif not self.entity(text, complete):
                    return False
        return True


def generate_write(model: Any, tokenizer: Any, head: str, **kw: Any) -> str:
    """The write call a model produces after `head` (pretext + tagged sentence), "({MEM_WRITE-->...})" (notebook 05).

    Keywords as `generation.write_call`: late_stopping, max_new_tokens, stop_on_repeat, constraint, stats.
    """
    return write_call(ModelStep(model), tokenizer, head, **kw).text


def write_calls(
    model: Any,
    tokenizer: Any,
    write_rows: Sequence[Mapping[str, Any]],
    *,
    relations: Collection[str] | None = None,
    distinct_pairs: bool = False,
    **kw: Any,
) -> list[WriteCall]:
    """One write call per write row (`write_examples`), constrained to spans of each head and to `relations` when
    given (`WriteGrammar`, with `distinct_pairs`; None: unconstrained); under late stopping each carries its greedy
    call (`.greedy`)."""
    calls = []
    for row in write_rows:
        head = row["text"][: row["spans"][0][0]]
        grammar = None if relations is None else WriteGrammar.for_head(head, relations, distinct_pairs=distinct_pairs)
        calls.append(write_call(ModelStep(model), tokenizer, head, constraint=grammar, **kw))
    return calls


def call_triples(calls: Iterable[WriteCall]) -> list[Triple]:
    """The distinct triples of a document's calls, in writing order (what reaches the memory)."""
    return list(dict.fromkeys(t for c in calls for t in c.triples))


def calls_to_json(calls: Iterable[WriteCall]) -> list[dict[str, Any]]:
    """Decoded calls as JSON rows, so a long decoding pass is stored once and scored again without the model."""

    def row(c: WriteCall) -> dict[str, Any]:
        return {"text": c.text, "end": c.end, "cuts": c.cuts, "greedy": row(c.greedy) if c.greedy else None}

    return [row(c) for c in calls]


def calls_from_json(rows: Iterable[Mapping[str, Any]]) -> list[WriteCall]:
    """The calls `calls_to_json` stored, greedy calls included."""

    def call(r: Mapping[str, Any]) -> WriteCall:
        return WriteCall(r["text"], r["end"], r["cuts"], call(r["greedy"]) if r.get("greedy") else None)

    return [call(r) for r in rows]


def stored_write_calls(
    path: Path,
    key: Mapping[str, Any],
    write_rows: Mapping[int, Sequence[Mapping[str, Any]]],
    decode: Callable[[Sequence[Mapping[str, Any]]], list[WriteCall]],
    name: str = "",
) -> tuple[dict[int, list[WriteCall]], float]:
    """One decoding's calls per document, reused from `path` where it holds them under the same `key` (the
    adapter's hash and the decoding settings), else decoded and added: a long pass runs once, then only scoring.
    Returns the calls and the seconds spent decoding now (0 when all were stored)."""
    store = json.loads(path.read_text()) if path.is_file() else {}
    if store.get("key") != dict(key):
        store = {"key": dict(key), "calls": {}, "seconds": {}}
    have = store["calls"].setdefault(name, {})
    out, spent = {}, 0.0
    for d, rows in tqdm(write_rows.items(), desc=f"write calls{name}", mininterval=30):
        stored = have.get(str(d), [])
        if len(stored) < len(rows):
            t0 = time.perf_counter()
            have[str(d)] = stored = calls_to_json(decode(rows))
            spent += time.perf_counter() - t0
            store["seconds"][name] = store["seconds"].get(name, 0.0) + time.perf_counter() - t0
            path.write_text(json.dumps(store, ensure_ascii=False))
        out[d] = calls_from_json(stored[: len(rows)])
    return out, spent


def write_document(
    model: Any,
    tokenizer: Any,
    write_rows: Sequence[Mapping[str, Any]],
    *,
    relations: Collection[str] | None = None,
    **kw: Any,
) -> tuple[list[Triple], list[str]]:
    """Triples the write model extracts from one document's write rows, and the raw calls (`write_calls`)."""
    calls = write_calls(model, tokenizer, write_rows, relations=relations, **kw)
    return call_triples(calls), [c.text for c in calls]


def _clean(triples: Iterable[Sequence[str]]) -> list[Triple]:
    return list(dict.fromkeys(Triple(*(str(x).strip() for x in t)) for t in triples))


def score_exact(pred: Iterable[Sequence[str]], gold: Iterable[Sequence[str]]) -> PRF:
    """One document: a triple is right when all three strings equal a gold triple's."""
    p, g = _clean(pred), _clean(gold)
    gs, ps = set(g), set(p)
    return PRF(sum(t in gs for t in p), len(p), sum(t in ps for t in g), len(g))


def score_embedded(
    pred: Iterable[Sequence[str]],
    gold: Iterable[Sequence[str]],
    embedder: Any,
    *,
    tau_entity: float,
    tau_relation: float,
    tau_triple: float,
) -> PRF:
    """One document, appendix F with §3.1's thresholds: matched when cos(subject), cos(object) >= tau_entity,
    cos(relation) >= tau_relation, and each entity's mean with the relation, (cos(e) + cos(t)) / 2, >= tau_triple
    (the memory's read rule, from either side)."""
    p, g = _clean(pred), _clean(gold)
    if not p or not g:
        return PRF(0, len(p), 0, len(g))
    phrases = sorted({x for t in p + g for x in t})
    vec = dict(zip(phrases, embedder.encode(phrases)))

    def cos(a: list[str], b: list[str]) -> np.ndarray:
        return np.stack([vec[x] for x in a]) @ np.stack([vec[x] for x in b]).T

    cs = cos([t.subject for t in p], [t.subject for t in g])
    co = cos([t.object for t in p], [t.object for t in g])
    cr = cos([t.relation for t in p], [t.relation for t in g])
    eps = 1e-6
    ok = (cs >= tau_entity - eps) & (co >= tau_entity - eps) & (cr >= tau_relation - eps)
    ok &= ((cs + cr) / 2 >= tau_triple - eps) & ((co + cr) / 2 >= tau_triple - eps)
    return PRF(int(ok.any(1).sum()), len(p), int(ok.any(0).sum()), len(g))


def table4_scores(
    per_doc: Mapping[Any, Sequence[WriteCall]], gold: Mapping[Any, Sequence[Sequence[str]]], embedder: Any
) -> dict[str, Any]:
    """One decoding's Table 4 columns over documents: exact and embedding-matched P / R (the encoder's own §3.1
    thresholds), triples written, gold triples, and how the calls ended (`WRITE_ENDS`)."""
    tau = {k: embedder.thresholds[k] for k in ("tau_entity", "tau_relation", "tau_triple")}
    ex, em = PRF(), PRF()
    for d, calls in per_doc.items():
        triples = call_triples(calls)
        ex, em = ex.add(score_exact(triples, gold[d])), em.add(score_embedded(triples, gold[d], embedder, **tau))
    ends = Counter(c.end for calls in per_doc.values() for c in calls)
    return {
        "exact P": ex.precision,
        "exact R": ex.recall,
        "emb. P": em.precision,
        "emb. R": em.recall,
        "emb. F1": em.f1,
        "triples": ex.n_pred,
        "gold": ex.n_gold,
        "calls " + " / ".join(WRITE_ENDS): " / ".join(str(ends[e]) for e in WRITE_ENDS),
    }
