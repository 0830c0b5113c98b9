"""Re-DocRED, the annotated corpus MemLLM's API training data come from: notebook 04 (loading); MemLLM §3.3 and §4.

The MemLLM data modules (notebook 04 builds the data set, 05 trains on it, 06 scores on it):

- `docred` (this one): reads and checks DocRED-format files (`load_docred`, `relation_names`), gives one document
  as plain text with its mentions and canonical names (`DocView`) and its gold triples (`gold_triples`), and the
  lookups a read's results come from (`GoldMemory`, `triple_memory_lookup`).
- `examples`: the MemLLM write rows built from these (§3.2, §3.3.1, App. D).
- `reads`: the read rows (§3.3.2, App. B–C) and the dev documents notebook 07 scores (§4.1).
- `dataset`: the DatasetDict of all of them (`make_dataset`), `render` for training, where a profile's copy is
  saved, and loading it (or rebuilding it) for notebooks 05–06.

Text is a document's tokens joined by single spaces, as the official code builds it ("based in Piraeus ."
keeps DocRED's tokenization); every character span indexes into such text. An entity's canonical name, used in
every triple and query, is the `name` of its first mention in reading order (sentence, then token), not of the
first mention listed in `vertexSet` (Re-DocRED does not list mentions in order).

A lookup maps a MemLLM query, (s, r, "") or ("", r, o), to the other entities: `GoldMemory` by exact match over
gold triples, `triple_memory_lookup` through a `TripleMemory` filled by the write model, or through
`simulated_memory`, our stand-in for one (gold triples with a seeded share left out and wrong ones added, read
with MemLLM's fuzzy lookup); `CachedEmbedder` encodes each phrase once so such a build takes seconds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from ..api import Triple, is_memllm_query

__all__ = [
    "load_docred",
    "relation_names",
    "DocView",
    "gold_triples",
    "GoldMemory",
    "triple_memory_lookup",
    "simulated_memory",
    "CachedEmbedder",
    "Lookup",
]

Lookup = Callable[[Triple], list]  # one MemLLM query -> the other entities


# ----------------------------------------------------------------------------------------------- loading
def _bad(path: Any, i: int, doc: Any, msg: str) -> ValueError:
    """An error naming the file, the document's index and title, so a bad file is fixed at the right place."""
    title = doc.get("title", "?") if isinstance(doc, dict) else "?"
    return ValueError(f"{path}: document {i} ({title!r}): {msg}")


def _check_doc(path: Any, i: int, doc: Any) -> None:
    """Every field the data builders index (sents, mentions, labels, evidence) present and in range."""
    if not isinstance(doc, dict):
        raise _bad(path, i, doc, f"expected an object, got {type(doc).__name__}")
    for key in ("sents", "vertexSet"):
        if key not in doc:
            raise _bad(path, i, doc, f"missing {key!r} (DocRED format: title, sents, vertexSet, labels)")
    sents = doc["sents"]
    if not isinstance(sents, list) or not all(
        isinstance(s, list) and all(isinstance(w, str) for w in s) for s in sents
    ):
        raise _bad(path, i, doc, "'sents' must be a list of token lists")
    for e, ent in enumerate(doc["vertexSet"]):
        if not isinstance(ent, list) or not ent:
            raise _bad(path, i, doc, f"entity {e} has no mentions")
        for m in ent:
            if not isinstance(m, dict) or not {"name", "sent_id", "pos"} <= set(m):
                raise _bad(path, i, doc, f"entity {e}: a mention needs name, sent_id, pos: {m!r}")
            s, pos = m["sent_id"], m["pos"]
            if not (isinstance(s, int) and 0 <= s < len(sents)):
                raise _bad(path, i, doc, f"entity {e}: sent_id {s!r} out of range (0..{len(sents) - 1})")
            if not (isinstance(pos, list) and len(pos) == 2 and 0 <= pos[0] < pos[1] <= len(sents[s])):
                raise _bad(path, i, doc, f"entity {e}: pos {pos!r} outside sentence {s} ({len(sents[s])} tokens)")
    for k, lab in enumerate(doc.get("labels", [])):
        if not isinstance(lab, dict) or not {"h", "t", "r"} <= set(lab):
            raise _bad(path, i, doc, f"label {k} needs h, t, r: {lab!r}")
        for side in ("h", "t"):
            if not (isinstance(lab[side], int) and 0 <= lab[side] < len(doc["vertexSet"])):
                raise _bad(path, i, doc, f"label {k}: {side}={lab[side]!r} is not an entity index")
        ev = lab.get("evidence", [])
        if not isinstance(ev, list) or not all(isinstance(s, int) and 0 <= s < len(sents) for s in ev):
            raise _bad(path, i, doc, f"label {k}: evidence {ev!r} is not a list of sentence ids")


def load_docred(path: str | Path) -> list[dict]:
    """Every document of a DocRED-format JSON file (Re-DocRED's *_revised.json, DocRED's train_annotated.json, ...),
    checked so a malformed file fails here, naming the document, not deep inside the data builder.

    Documents without `labels` (DocRED's unlabelled test split) get an empty list.
    """
    path = Path(path)
    try:
        docs = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: not JSON ({e})") from None
    if not isinstance(docs, list):
        raise ValueError(f"{path}: expected a JSON list of documents, got {type(docs).__name__}")
    for i, doc in enumerate(docs):
        _check_doc(path, i, doc)
        doc.setdefault("labels", [])
        doc.setdefault("title", "")
    return docs


def relation_names(path: str | Path) -> dict[str, str]:
    """DocRED's rel_info.json: Wikidata relation id -> name ("P17" -> "country"), the names triples use."""
    path = Path(path)
    names = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(names, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in names.items()
    ):
        raise ValueError(f"{path}: expected an object of relation id -> non-empty name")
    return {k: v.strip() for k, v in names.items()}


# ----------------------------------------------------------------------------------------------- one document
@dataclass
class DocView:
    """A document as plain text with word and character positions, mentions in reading order, canonical names."""

    words: list[str]
    sent_start: list[int]  # global word index where each sentence starts (plus the total at the end)
    char_start: list[int]  # character offset of each word in `text` (plus len(text) + 1 at the end)
    text: str
    mentions: list[tuple[int, int, int, int]]  # (word start, word end, entity, sentence), reading order
    first: list[tuple[int, int, int, int]]  # each entity's first mention
    names: list[str]  # canonical names: the first mention's `name`
    sent_entities: list[set] = field(default_factory=list)  # entities mentioned in each sentence

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> "DocView":
        """The view of one DocRED document, built once and shared by its write rows, read rows and eval row."""
        words = [w for s in doc["sents"] for w in s]
        sent_start = [0]
        for s in doc["sents"]:
            sent_start.append(sent_start[-1] + len(s))
        char_start, c = [], 0
        for w in words:
            char_start.append(c)
            c += len(w) + 1
        char_start.append(c)
        mentions, first, names = [], [], []
        sent_entities = [set() for _ in doc["sents"]]
        for e, ent in enumerate(doc["vertexSet"]):
            ms = sorted(
                (
                    sent_start[m["sent_id"]] + m["pos"][0],
                    sent_start[m["sent_id"]] + m["pos"][1],
                    e,
                    m["sent_id"],
                    " ".join(str(m["name"]).split()),
                )
                for m in ent
            )
            mentions += [m[:4] for m in ms]
            first.append(ms[0][:4])
            names.append(ms[0][4] or " ".join(words[ms[0][0] : ms[0][1]]))
            for m in ms:
                sent_entities[m[3]].add(e)
        mentions.sort()
        return cls(words, sent_start, char_start, " ".join(words), mentions, first, names, sent_entities)

    def span(self, a: int, b: int) -> tuple[int, int]:
        """Character span in `text` of words [a, b)."""
        return self.char_start[a], self.char_start[b] - 1

    def words_text(self, a: int, b: int | None = None) -> str:
        """Words [a, b) as they stand in `text`."""
        return " ".join(self.words[a:b])

    def sentence(self, s: int) -> str:
        """Sentence s as it stands in `text`."""
        return self.words_text(self.sent_start[s], self.sent_start[s + 1])

    def pretext(self, end_word: int, max_chars: int | None) -> tuple[str, int]:
        """Text of words [start, end_word) with `start` the first word keeping it within `max_chars`; and start."""
        start = 0
        if max_chars is not None:
            while start < end_word and self.char_start[end_word] - 1 - self.char_start[start] > max_chars:
                start += 1
        return self.words_text(start, end_word), start


def gold_triples(
    doc: Mapping[str, Any], rel_names: Mapping[str, str], view: DocView | None = None
) -> list[tuple[int, Triple]]:
    """(label index, Triple with canonical names) for every usable label; h == t and repeats are skipped."""
    view = view or DocView.of(doc)
    out, seen = [], set()
    for k, lab in enumerate(doc["labels"]):
        if lab["r"] not in rel_names:
            raise ValueError(
                f"document {doc.get('title', '')!r} label {k}: relation {lab['r']!r} is not in rel_info.json"
            )
        t = Triple(view.names[lab["h"]], rel_names[lab["r"]], view.names[lab["t"]])
        if lab["h"] == lab["t"] or t.subject == t.object or t in seen:
            continue
        seen.add(t)
        out.append((k, t))
    return out


# ----------------------------------------------------------------------------------------------- memories
class GoldMemory:
    """Exact-match MemLLM lookup over gold triples (a training corpus): query -> the other entities, in write order."""

    def __init__(self, triples: Iterable[Sequence[str]] = ()) -> None:
        self._by_sr: dict[tuple[str, str], list[str]] = {}
        self._by_ro: dict[tuple[str, str], list[str]] = {}
        self.triples: set[Triple] = set()
        self.add(triples)

    @classmethod
    def from_docs(cls, docs: Iterable[Mapping[str, Any]], rel_names: Mapping[str, str]) -> "GoldMemory":
        """The gold triples of every document, as a memory filled from the whole corpus would hold them."""
        return cls(t for doc in docs for _, t in gold_triples(doc, rel_names))

    def add(self, triples: Iterable[Sequence[str]]) -> None:
        """Store new triples (repeats ignored), indexed by both query shapes."""
        for t in triples:
            t = Triple(*t)
            if t in self.triples:
                continue
            self.triples.add(t)
            self._by_sr.setdefault((t.subject, t.relation), []).append(t.object)
            self._by_ro.setdefault((t.relation, t.object), []).append(t.subject)

    def __len__(self) -> int:
        return len(self.triples)

    def __call__(self, query: Sequence[str]) -> list[str]:
        """The other entities of the triples matching the query exactly, in write order."""
        s, r, o = query
        if not is_memllm_query(query):
            raise ValueError(f"MemLLM query {tuple(query)!r} must give the relation and exactly one of subject/object")
        return list(self._by_sr.get((s, r), []) if s else self._by_ro.get((r, o), []))


def triple_memory_lookup(memory: Any) -> Lookup:
    """Lookup over a `TripleMemory` (MemLLM scores and thresholds, before Q_thr): the other entities, best first."""
    return lambda query: [other for other, _score, _t in memory.memllm_search(query)]


class CachedEmbedder:
    """An embedder that encodes each phrase once: a read-data build asks for the same names thousands of times."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.name, self.dim = embedder.name, embedder.dim
        self.thresholds = getattr(embedder, "thresholds", None)
        self._cache: dict[str, np.ndarray] = {}

    def prime(self, texts: Iterable[str]) -> None:
        """Encode every new phrase in one batch (far faster than one call per query)."""
        new = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if new:
            for t, v in zip(new, np.asarray(self.embedder.encode(new), dtype=np.float32)):
                self._cache[t] = v

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """The vectors of `texts`, encoding only those not seen before."""
        self.prime(texts)
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


def simulated_memory(
    docs: Sequence[Mapping[str, Any]],
    rel_names: Mapping[str, str],
    *,
    drop: float = 0.3,
    wrong: float = 0.1,
    seed: int = 0,
    embedder: Any = None,
) -> tuple[Any, dict[str, int]]:
    """A stand-in for the write model's imperfect memory (§3.3.2) when none is given: a `TripleMemory` (MemLLM's fuzzy
    lookup) over the documents' gold triples with a seeded share `drop` left out (missed relations) and, beside each
    kept one, on average `wrong` more triples whose object is another entity of the same document (wrong relations):
    int(wrong) of them, and one more with chance wrong - int(wrong). Recall is about 1 - drop, precision about
    1 / (1 + wrong) (the write model's late-stopping memory, recall 0.197 / precision 0.340: drop 0.8, wrong 1.9).

    Shares are ours (the paper gives none for its training memory); `embedder` None loads the bundled MiniLM.
    Returns the memory and counts (gold, kept, dropped, wrong).
    """
    from ..memory import TripleMemory
    from ..models import load_embedder

    if not (0 <= drop < 1 and 0 <= wrong):
        raise ValueError(f"drop must be in [0, 1) and wrong >= 0 (wrong triples per kept one); got {drop}, {wrong}")
    rng = np.random.default_rng([seed, 3])
    triples, n = [], {"gold": 0, "kept": 0, "dropped": 0, "wrong": 0}
    for doc in docs:
        view = DocView.of(doc)
        for _, t in gold_triples(doc, rel_names, view):
            n["gold"] += 1
            if rng.random() < drop:
                n["dropped"] += 1
                continue
            n["kept"] += 1
            triples.append(t)
            # one draw per kept triple whatever `wrong` is, so wrong <= 1 keeps the memory it always built
            extra = int(wrong) + (rng.random() < wrong - int(wrong))
            others = [x for x in view.names if x not in (t.subject, t.object)] if len(view.names) > 2 else []
            picks = [int(rng.integers(len(others)))] if extra == 1 and others else []
            if extra > 1 and others:  # distinct objects, or the memory would store fewer than drawn
                picks = rng.choice(len(others), size=min(extra, len(others)), replace=False).tolist()
            for i in picks:
                triples.append(Triple(t.subject, t.relation, others[i]))
                n["wrong"] += 1
    emb = embedder if isinstance(embedder, CachedEmbedder) else CachedEmbedder(embedder or load_embedder())
    emb.prime([x for t in triples for x in t])
    memory = TripleMemory(embedder=emb, index="flat")
    memory.write_many(triples)
    return memory, n
