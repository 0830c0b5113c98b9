"""MemLLM's read rows from Re-DocRED, and the dev documents Table 1 scores: notebook 04; MemLLM §3.3.2, App. B–C.

The MemLLM data modules: `docred` reads Re-DocRED; `examples` builds the write rows; `reads` (this one) the read
rows and the dev documents notebook 07 scores (§4.1); `dataset` makes the DatasetDict of them. Text and spans index a
document's plain text as `docred.DocView` gives it.

Read example, one per read point (the first mention of an entity that completes a relation whose other
entity appeared earlier)::

    text before the read point + "({MEM_READ(s>>r>>;>>r>>o)-->" + results + "})" + " " + continuation + "({"

The continuation runs to the next read point of the document (ending with "({", the start of the next
call) or to the document's end. The space before the read word moves after the call (plain "recording
artist" gives "recording({MEM_READ(..)-->..}) artist"): with a byte-level BPE tokenizer the continuation
then starts with the token the plain document has there (" artist", not "artist"), so a read model is
trained and scored on the document's own tokens (the paper's SentencePiece gives "▁artist" either way) and
`perplexity` compares every ablation on identical tokens. Earlier calls are not in the text (the paper removes
answered calls from the context). A query names its known entity by the words of that entity's last mention
before the target (`query_names="surface"`, what a model reading the text can copy; "canonical": the entity's
canonical name, which a memory stores).

Loss (§3.3.2): the call up to ``)-->`` and the continuation, never the memory's results; for a document's first
read also the pretext before the call (`pretext_loss_first`: where to open the first call). With App. C's
augmentation (`early_shift` > 0, training) every read point gives two rows: a gold copy whose loss is the call
(and the first read's pretext) at the gold position, and a copy whose call moves k ~ Poisson(`early_shift`) words
earlier (never before the query entities' mentions or the previous gold read) and whose loss is only the
continuation; both continuations end where the next call starts, at its gold position. `copy` says which.

Filters, as the official code: a query whose (relation, known side) is in `AMBIGUOUS_QUERIES` (paper
Table 2, App. B) is dropped; a query with `q_thr` (30) or more results is dropped (training only: the official
eval builder applies none, `q_thr=None`); at most `max_queries` (3) per read, fewest results first (no result
counts as 5); a read point whose target already occurs as a whole word earlier in the text is dropped
(first-mention filter). Ours: a query whose entity's mention falls before the pretext budget
(`max_pretext_chars`) is dropped (`drop_cut_queries`), so no query names an entity the text no longer shows.
Dev rows as the official eval builder (`eval_points`): no Q_thr, results cut to `MAX_RESULTS` (30), queries in
source order, and a read point whose first query is the previous point's first query merged into it with all their
targets.

Results come from `lookup(query) -> list[str]`: `docred.GoldMemory` (exact match over gold triples; dev),
`docred.simulated_memory` (training default: the paper trains on the write model's imperfect memory; without one,
a fuzzy `TripleMemory` over the gold triples with a share left out and wrong ones added stands in) or
`docred.triple_memory_lookup` over a memory the write model filled. An empty reply stays empty
(`fill_empty_with_target=False`; the official code shows the target instead, so its read model never learns
that memory can come back empty).
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

from ..api import Triple, format_memllm_read_query, format_memllm_read_reply
from ..memory import Q_THR
from ..metrics import whole_word
from .docred import DocView, Lookup, gold_triples
from .examples import doc_rng

__all__ = [
    "AMBIGUOUS_QUERIES",
    "MAX_QUERIES",
    "QUERY_NAMES",
    "MAX_RESULTS",
    "READ_CONTINUE",
    "read_examples",
    "build_read_rows",
    "eval_doc_row",
]

MAX_QUERIES = 3  # official MAX_QUERIES
READ_CONTINUE = "({"  # what a continuation ends with when another read follows (official MR_ST_TOKEN)
QUERY_NAMES = ("surface", "canonical")  # how a query names its known entity
MAX_RESULTS = 30  # results a reply holds (official eval builder and perplexity_eval: truncated to 30)

# MemLLM Table 2 (official data/mr_data_config.py SKIP_QUERIES): (relation, the side the query gives).
# ">>country of citizenship>>France" (object given) asks for everyone French: far too many answers.
# fmt: off
AMBIGUOUS_QUERIES = frozenset(
    [(r, "object") for r in (
        "country of citizenship", "country", "country of origin", "religion", "place of birth", "place of death",
        "work location", "location of formation", "location", "basin country", "residence", "publication date",
        "production company", "original language of work", "applies to jurisdiction", "platform",
        "located in the administrative territorial entity", "headquarters location", "inception", "employer",
        "date of birth", "date of death", "educated at")]
    + [(r, "subject") for r in ("continent", "contains administrative territorial entity")])
# fmt: on


# ----------------------------------------------------------------------------------------------- reads
def _read_points(
    doc: Mapping[str, Any],
    view: DocView,
    rel_names: Mapping[str, str],
    ambiguous: frozenset,
    first_mention_filter: bool,
    n: Counter,
) -> list[dict]:
    """Read candidates in reading order: a first mention completing relations with entities seen before it."""
    labels = [(doc["labels"][k], t) for k, t in gold_triples(doc, rel_names, view)]
    seen: set[int] = set()
    covered: set[int] = set()
    points: dict[int, dict] = {}  # word start of the target -> read point (nested first mentions merge)
    for a, b, e, _s in view.mentions:
        if e in seen:
            continue
        seen.add(e)
        cands = []
        for j, (lab, t) in enumerate(labels):
            if j in covered or e not in (lab["h"], lab["t"]):
                continue
            other = lab["t"] if lab["h"] == e else lab["h"]
            if other not in seen:
                continue
            covered.add(j)
            # the target is the subject (head) or the object (tail): the query gives the other side
            q = Triple("", t.relation, t.object) if lab["h"] == e else Triple(t.subject, t.relation, "")
            cands.append((q, other))
        if not cands:
            continue
        n["read_candidates"] += 1
        n["candidate_queries"] += len(cands)
        before = view.words_text(0, a)
        if first_mention_filter and (whole_word(view.names[e], before) or whole_word(view.words_text(a, b), before)):
            n["dropped_first_mention"] += 1
            continue
        queries = []
        for q, other in cands:
            if (q.relation, "subject" if q.subject else "object") in ambiguous:
                n["dropped_query_ambiguous"] += 1
            elif q not in [x[0] for x in queries]:
                queries.append((q, other))
        p = points.setdefault(a, {"target_word": [a, b], "targets": [], "target_words": [], "cands": []})
        p["targets"].append(view.names[e])
        p["target_words"].append([a, b])
        p["cands"] += queries
    return [points[a] for a in sorted(points)]


def _query_mention(view: DocView, e: int, target_word: int) -> tuple[int, int]:
    """The query entity's last mention starting before the target: the text a reader would copy the name from."""
    return max((a, b) for a, b, m, _ in view.mentions if m == e and a <= target_word)


def read_examples(
    doc: Mapping[str, Any],
    rel_names: Mapping[str, str],
    lookup: Lookup,
    *,
    doc_idx: int = 0,
    split: str = "",
    seed: int = 0,
    max_pretext_chars: int | None = None,
    q_thr: int | None = Q_THR,
    max_queries: int = MAX_QUERIES,
    max_results: int | None = None,
    ambiguous: Iterable[tuple[str, str]] = AMBIGUOUS_QUERIES,
    first_mention_filter: bool = True,
    early_shift: float = 0.0,
    query_names: str = "surface",
    eval_points: bool = False,
    drop_cut_queries: bool = True,
    pretext_loss_first: bool = True,
    fill_empty_with_target: bool = False,
    results_source: str = "gold",
    shuffle_results: bool = True,
    counts: Counter | None = None,
) -> list[dict]:
    """The read rows of one document (see the module doc); `counts` collects what each filter dropped.

    `q_thr=None` keeps every query (the official eval builder; the evaluation's memory applies Q_thr when it reads);
    `max_results` truncates the stored results (official eval: 30). `query_names`: "surface" names the query entity
    as its last mention before the target reads, "canonical" by its canonical name. A query whose mention lies
    outside the kept pretext is dropped (`drop_cut_queries`), so no query names an entity the text no longer shows.
    `eval_points` builds dev points as the official eval builder: queries in source order (not fewest results
    first), and a point whose first query is the previous point's first query folds into it, adding its targets.
    `early_shift` > 0 duplicates each read point as App. C: a gold copy trains the call, a copy k ~ Poisson(early_shift)
    words earlier trains the continuation. `pretext_loss_first` trains the pretext of a document's first read (§3.3.2).
    `fill_empty_with_target` (official code; off here): an empty reply becomes the target, so every reply helps.
    `shuffle_results`: exact matches have no order; shuffle them (seeded) so the target's place carries no signal.
    """
    if query_names not in QUERY_NAMES:
        raise ValueError(f"query_names must be one of {QUERY_NAMES}, got {query_names!r}")
    n = counts if counts is not None else Counter()
    view = DocView.of(doc)
    rng = doc_rng(seed, doc_idx, 2)
    points: list[dict] = []
    for p in _read_points(doc, view, rel_names, frozenset(ambiguous), first_mention_filter, n):
        a = p["target_word"][0]
        window = view.pretext(a, max_pretext_chars)[1]  # first word of the gold copy's pretext
        scored, names = [], set()
        for q, other in p["cands"]:
            ma, mb = _query_mention(view, other, a)
            if drop_cut_queries and ma < window:
                n["dropped_query_entity_cut"] += 1  # its last mention before the target is truncated away
                continue
            if query_names == "surface":
                name = view.words_text(ma, mb)
                q = Triple(name, q.relation, "") if q.subject else Triple("", q.relation, name)
                n["queries_surface_differs"] += name != view.names[other]
            if q in names:
                continue
            names.add(q)
            res = list(dict.fromkeys(lookup(q)))
            if q_thr is not None and len(res) >= q_thr:
                n["dropped_query_q_thr"] += 1
                continue
            scored.append((len(res) if res else 5, len(scored), q, mb, res))
        if not eval_points:  # fewest results first, the official training priority; eval keeps source order
            scored.sort(key=lambda x: x[:2])
        n["dropped_query_max_queries"] += max(0, len(scored) - max_queries)
        scored = scored[:max_queries]
        if not scored:
            n["dropped_no_query_left"] += 1
            continue
        queries = [x[2] for x in scored]
        if eval_points and points and points[-1]["queries"][0] == queries[0]:
            points[-1]["targets"] += p["targets"]
            points[-1]["target_words"] += p["target_words"]
            n["merged_same_first_query"] += 1
            continue
        p["queries"], p["n_results"] = queries, [len(x[4]) for x in scored]
        results = list(dict.fromkeys(r for x in scored for r in x[4]))
        if not results and fill_empty_with_target:
            results = [p["targets"][0]]
            n["results_filled_with_target"] += 1
        if shuffle_results and results_source == "gold":
            results = [results[i] for i in rng.permutation(len(results))]
        if max_results is not None and len(results) > max_results:
            results = results[:max_results]
            n["results_truncated"] += 1
        p["results"] = results
        p["floor"] = max(x[3] for x in scored)  # a shifted call still follows the query entities' mentions
        points.append(p)

    gold = [p["target_word"][0] for p in points]
    rows: list[dict] = []
    for i, p in enumerate(points):
        nxt = gold[i + 1] if i + 1 < len(points) else len(view.words)  # the next call starts at its gold position
        copies = [("gold", gold[i])]
        if early_shift > 0:
            k = int(rng.poisson(early_shift))
            floor = max(p["floor"], gold[i - 1] + 1 if i else 0)
            copies.append(("shifted", min(gold[i], max(gold[i] - k, floor))))  # a nested target may start inside one
        for copy, read in copies:
            row = _read_row(view, doc, p, i, copy, read, nxt, max_pretext_chars, early_shift > 0, pretext_loss_first)
            row.update(id=f"{split}-{doc_idx}-r{i}" + ("s" if copy == "shifted" else ""), doc_idx=doc_idx)
            row["results_source"] = results_source
            rows.append(row)
            n["read_examples"] += 1
            n["shifted_copies"] += copy == "shifted"
            n["shifted_reads"] += row["shift"] > 0
            n["pretext_loss"] += row["pretext_loss"]
            n["replies_empty"] += not p["results"]
            n["replies_without_target"] += not any(t in p["results"] for t in p["targets"])
        n["read_points"] += 1
        n[f"reads_with_{len(p['queries'])}_queries"] += 1
        n["queries"] += len(p["queries"])
    return rows


def _read_row(
    view: DocView,
    doc: Mapping[str, Any],
    p: Mapping[str, Any],
    i: int,
    copy: str,
    read: int,
    nxt: int,
    max_pretext_chars: int | None,
    duplicated: bool,
    pretext_loss_first: bool,
) -> dict:
    """One read row (id and doc_idx set by the caller); spans as §3.3.2 and App. C say (module doc)."""
    pre, pre_start = view.pretext(read, max_pretext_chars)
    call = format_memllm_read_query(p["queries"])
    reply = format_memllm_read_reply(p["results"])
    eot = nxt == len(view.words)
    lead = " " if read > 0 else ""  # the space before the read word stays with it, after the call (module doc)
    cont = lead + view.words_text(read, nxt) + ("" if eot else READ_CONTINUE)
    text = pre + call + reply + cont
    c0 = len(pre) + len(call) + len(reply)  # where the continuation starts in `text`
    shift = c0 + len(lead) - view.char_start[read]  # doc char offset -> row char offset, in the continuation
    call_span = [len(pre), len(pre) + len(call)]
    first = pretext_loss_first and i == 0 and copy == "gold"
    if first:
        call_span[0] = 0  # the first read of a document also trains the pretext: where to open the first call
    if not duplicated:
        spans = [call_span, [c0, len(text)]]
    else:
        spans = [call_span] if copy == "gold" else [[c0, len(text)]]
    tw = [list(w) for w in p["target_words"]]
    return {
        "id": "",
        "doc_idx": 0,
        "title": doc.get("title", ""),
        "text": text,
        "spans": spans,
        "add_eos": False,
        "copy": copy,
        "pretext_loss": first,
        "queries": [list(q) for q in p["queries"]],
        "n_results": p["n_results"],
        "results": p["results"],
        "targets": p["targets"],
        "target_span": [view.char_start[tw[0][0]] + shift, view.char_start[tw[0][1]] - 1 + shift],
        "target_spans": [[view.char_start[a] + shift, view.char_start[b] - 1 + shift] for a, b in tw],
        "entity_spans": [
            [view.char_start[ma] + shift, view.char_start[mb] - 1 + shift, e]
            for ma, mb, e, _ in view.mentions
            if read <= ma and mb <= nxt
        ],
        "read_word": read,
        "target_word": tw[0],
        "target_words": tw,
        "shift": tw[0][0] - read,
        "read_char": view.char_start[read],
        "pretext_start_word": pre_start,
        "eot": eot,
    }


def build_read_rows(
    docs: Sequence[Mapping[str, Any]],
    rel_names: Mapping[str, str],
    doc_ids: Iterable[int],
    lookup: Lookup,
    *,
    split: str,
    seed: int = 0,
    **kw: Any,
) -> tuple[list[dict], Counter]:
    """Read rows of the chosen documents (keywords as `read_examples`), and the counts of every filter."""
    rows, n = [], Counter()
    for d in doc_ids:
        n["documents"] += 1
        rows += read_examples(docs[d], rel_names, lookup, doc_idx=d, split=split, seed=seed, counts=n, **kw)
    return rows, n


def eval_doc_row(
    doc: Mapping[str, Any], rel_names: Mapping[str, str], read_rows: Sequence[Mapping[str, Any]], doc_idx: int
) -> dict:
    """One document for perplexity evaluation: text, mentions, gold triples, gold read points, queries and targets.

    Spans index the document's plain text (tokens joined by spaces); `read_chars` are where the gold reads go;
    `read_target_spans` holds each read's first target, `read_target_spans_all` every target of a merged read.
    """
    view = DocView.of(doc)
    rr = [r for r in read_rows if r["doc_idx"] == doc_idx and r["copy"] == "gold"]
    return {
        "doc_idx": doc_idx,
        "title": doc.get("title", ""),
        "text": view.text,
        "sent_chars": [view.char_start[s] for s in view.sent_start[:-1]],
        "entity_names": view.names,
        "mention_spans": [[*view.span(a, b), e] for a, b, e, _ in view.mentions],
        "triples": [list(t) for _, t in gold_triples(doc, rel_names, view)],
        "read_chars": [r["read_char"] for r in rr],
        "read_target_spans": [list(view.span(*r["target_word"])) for r in rr],
        "read_target_spans_all": [[list(view.span(*w)) for w in r["target_words"]] for r in rr],
        "read_targets": [r["targets"] for r in rr],
        "read_queries": [r["queries"] for r in rr],
    }
