"""The triple memory: (subject, relation, object) rows in SQLite, phrase vectors in faiss, both papers' reads.

One SQLite database holds everything that must survive: the triples, every distinct entity and relation
phrase, and each phrase's vector as a float32 BLOB (so a lost or stale faiss index is rebuilt without
re-embedding). Two faiss indexes (entities, relations) find candidate phrases; every candidate is re-scored
with the exact cosine of the stored vectors before any threshold is applied, so `lsh` and `hnsw` only
change which candidates are seen, never their scores.

- RET-LLM read (`read`, `read_explained`): a given term matches exactly, or the nearest stored phrase of
  its kind with cosine >= `fuzzy` stands in for it; all matching triples come back.
- MemLLM read (`query_memllm`, `memllm_search`, MemLLM §3.1): candidate entities (cos >= `tau_entity`) and
  relations (cos >= `tau_relation`), triples whose mean of the two >= `tau_triple`, the other entities
  returned by score; a query with `q_thr` or more results returns nothing.

Phrases are never deleted (their vectors stay cached); phrases no triple uses any more are skipped by
lookups. Terms are stripped of surrounding whitespace, as the API parsers strip them. One process writes
at a time; readers and writers on other connections are picked up (`PRAGMA data_version`).

    mem = TripleMemory("memory.sqlite", embedder=load_embedder(), index="hnsw")
    mem.write("Ann Lee", "employed by", "Pfizer")
    mem.read(Triple("", "employed by", "Pfizer Inc"))   # -> [Triple("Ann Lee", "employed by", "Pfizer")]
"""
from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

import faiss
import numpy as np

from .api import Triple

__all__ = ["TripleMemory", "ReadResult", "Substitution", "INDEX_KINDS", "COLUMNS", "Q_THR"]

INDEX_KINDS = ("flat", "lsh", "hnsw")
Q_THR = 30  # MemLLM §3.1: a query with this many results or more is too broad to help (official code: >= 30)
COLUMNS = ["subject", "relation", "object"]  # DataFrame / CSV / SQL columns
KINDS = ("entity", "relation")
ENTITY, RELATION = 0, 1
_ROLES = (("subject", ENTITY), ("relation", RELATION), ("object", ENTITY))
_EMBED_CHUNK = 8192  # phrases encoded (and held in RAM) at a time
_SQL_CHUNK = 5000  # ids per `IN (...)`: well under SQLite's 32766 variables

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS phrases (id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, text TEXT NOT NULL,
                                    vec BLOB NOT NULL, UNIQUE (kind, text));
CREATE TABLE IF NOT EXISTS triples (id INTEGER PRIMARY KEY, s INTEGER NOT NULL, r INTEGER NOT NULL,
                                    o INTEGER NOT NULL, UNIQUE (s, r, o));
CREATE INDEX IF NOT EXISTS triples_ro ON triples (r, o);
CREATE INDEX IF NOT EXISTS triples_os ON triples (o, s);
"""
# a phrase still used by some triple (deleted facts leave their phrases behind, unused)
_USED = ("(EXISTS (SELECT 1 FROM triples WHERE s = p.id) OR EXISTS (SELECT 1 FROM triples WHERE o = p.id))",
         "EXISTS (SELECT 1 FROM triples WHERE r = p.id)")
_SELECT_TEXT = ("SELECT ps.text, pr.text, po.text FROM triples t JOIN phrases ps ON ps.id = t.s "
                "JOIN phrases pr ON pr.id = t.r JOIN phrases po ON po.id = t.o")


class Substitution(NamedTuple):
    """How one query term was resolved by fuzzy lookup: `stored` (cosine `cosine`) stood in if `accepted`."""

    role: str  # subject | relation | object
    term: str
    stored: str | None  # the nearest stored, still used phrase of the term's kind (None: none stored)
    cosine: float
    accepted: bool  # cosine >= the fuzzy threshold


@dataclass
class ReadResult:
    """A RET-LLM read with its trace: the matches and, per term not stored verbatim, what stood in for it."""

    matches: list[Triple]
    substitutions: list[Substitution] = field(default_factory=list)


def _clean_term(value: Any, role: str, where: str, allow_empty: bool = False) -> str:
    """A stripped term, or a ValueError that names the bad term and where it came from."""
    if value is None and allow_empty:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{role} {value!r} {where} is not a string ({type(value).__name__})")
    value = value.strip()
    if not value and not allow_empty:
        raise ValueError(f"{role} {value!r} {where} is empty or whitespace")
    return value


def _clean_triple(t: Any, where: str = "", allow_empty: bool = False) -> Triple:
    """(s, r, o) as a stripped Triple; anything else raises ValueError naming the triple."""
    if isinstance(t, (str, bytes)) or not isinstance(t, Sequence) or len(t) != 3:
        raise ValueError(f"triple {where}{t!r} is not a (subject, relation, object) sequence")
    at = f"in triple {where}{tuple(t)!r}"
    return Triple(*(_clean_term(v, role, at, allow_empty) for v, (role, _) in zip(t, _ROLES)))


def _chunks(seq: Sequence, n: int) -> Iterator[Sequence]:
    for i in range(0, len(seq), n):
        yield seq[i:i + n]


def _marks(n: int) -> str:
    return ",".join("?" * n)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """Run a one-query faiss search on a single OpenMP thread: faiss parallelises over queries (and over a few
    blocks), so for one query a second thread only adds a barrier, which costs milliseconds whenever the other
    core is busy (measured on 2 cores under load: flat 8 ms vs 0.3 ms, lsh 40 ms vs 0.2 ms at 10k triples)."""
    n = faiss.omp_get_max_threads()
    if n <= 1:
        yield
        return
    faiss.omp_set_num_threads(1)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(n)


def _sha1(path: Path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


class TripleMemory:
    """RET-LLM / MemLLM memory: a SQLite triple table (file or in-memory) plus faiss indexes of its phrases.

    `path`: a database file (index files live beside it as `path + ".entity.faiss"` / `".relation.faiss"`),
    or None for an in-memory memory. `embedder`: anything with `.name`, `.dim`, `.thresholds`, `.encode`
    (see `models.Embedder`); None loads the bundled MiniLM. `index`: "flat" (exact inner product), "lsh"
    (faiss IndexLSH, `lsh_nbits` bits, as RET-LLM) or "hnsw" (IndexHNSWFlat, inner product, as MemLLM).
    Thresholds default to `embedder.thresholds`; they are plain attributes, change them at will.
    Reopening a file built with another embedder (name or dim) raises ValueError, unless `reembed=True`,
    which re-encodes every stored phrase with the new embedder and rebuilds the indexes.
    """

    def __init__(self, path: str | os.PathLike | None = None, embedder: Any = None, index: str = "flat", *,
                 tau_entity: float | None = None, tau_relation: float | None = None,
                 tau_triple: float | None = None, fuzzy: float | None = None, q_thr: int = Q_THR,
                 reembed: bool = False, lsh_nbits: int | None = None, hnsw_m: int = 32,
                 hnsw_ef_search: int = 64):
        if index not in INDEX_KINDS:
            raise ValueError(f"index must be one of {INDEX_KINDS}, got {index!r}")
        if embedder is None:
            from .models import load_embedder
            embedder = load_embedder()
        from .models import PAPER_THRESHOLDS

        self.embedder, self.index_kind = embedder, index
        self.dim = int(embedder.dim)
        th = {**PAPER_THRESHOLDS, **(getattr(embedder, "thresholds", None) or {})}
        self.tau_entity = th["tau_entity"] if tau_entity is None else tau_entity
        self.tau_relation = th["tau_relation"] if tau_relation is None else tau_relation
        self.tau_triple = th["tau_triple"] if tau_triple is None else tau_triple
        self.fuzzy = th["fuzzy"] if fuzzy is None else fuzzy
        self.q_thr = q_thr
        self.lsh_nbits = lsh_nbits or 2 * self.dim  # more bits: better candidates, bigger index
        self.hnsw_m, self.hnsw_ef_search = hnsw_m, hnsw_ef_search
        self.path = None if path is None else Path(path)
        self.index_status: dict[str, str] = {}  # per kind: "loaded" or "rebuilt (why)", for notebooks and tests

        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE ... COMMIT) so a batch is all or nothing
        self._conn: sqlite3.Connection | None = sqlite3.connect(":memory:" if path is None else str(path),
                                                                isolation_level=None)
        try:
            self._open(reembed)
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    # ------------------------------------------------------------------------------------------ opening, indexes
    def _open(self, reembed: bool) -> None:
        c = self._conn
        if self.path is not None:
            c.execute("PRAGMA journal_mode = WAL")  # fast small commits; readers never block the writer
            c.execute("PRAGMA synchronous = NORMAL")  # durable across app crashes (WAL), not power loss
        c.execute("PRAGMA cache_size = -262144")  # 256 MiB: index B-trees of ~1M triples stay in RAM
        c.executescript(_SCHEMA)
        reembedded = self._check_embedder(reembed)
        self._data_version = c.execute("PRAGMA data_version").fetchone()[0]
        self._ids: list[dict[str, int]] = [{}, {}]  # text -> phrase id, per kind (used or not)
        for pid, kind, text in c.execute("SELECT id, kind, text FROM phrases"):
            self._ids[kind][text] = pid
        self._max_id = c.execute("SELECT COALESCE(MAX(id), 0) FROM phrases").fetchone()[0]
        self._index: list[Any] = [None, None]
        self._inner: list[Any] = [None, None]
        self._dirty = [False, False]
        self._added: list | None = None  # inside a transaction: phrases inserted, for faiss after COMMIT
        for kind in (ENTITY, RELATION):
            self._load_or_build(kind, force=reembedded)

    def _meta(self, key: str) -> str | None:
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def _set_meta(self, items: dict[str, str]) -> None:
        self._conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", items.items())

    def _check_embedder(self, reembed: bool) -> bool:
        """A DB built with another encoder has vectors of another space: refuse, or re-embed when asked."""
        name, dim = str(self.embedder.name), str(self.dim)
        old_name, old_dim = self._meta("embedder_name"), self._meta("embedder_dim")
        n = self._conn.execute("SELECT COUNT(*) FROM phrases").fetchone()[0]
        if n and (old_name, old_dim) != (name, dim):
            if not reembed:
                raise ValueError(f"{self.path} was built with embedder {old_name!r} (dim {old_dim}), not {name!r} "
                                 f"(dim {dim}); open it with that embedder, or pass reembed=True to re-encode "
                                 f"its {n} phrases with this one")
            self._reembed()
            return True
        if (old_name, old_dim) != (name, dim):  # a new, empty memory
            self._set_meta({"embedder_name": name, "embedder_dim": dim})
        return False

    def _reembed(self) -> None:
        c = self._conn
        rows = c.execute("SELECT id, text FROM phrases ORDER BY id").fetchall()
        c.execute("BEGIN IMMEDIATE")
        try:
            for chunk in _chunks(rows, _EMBED_CHUNK):
                vecs = self._encode([t for _, t in chunk])
                c.executemany("UPDATE phrases SET vec = ? WHERE id = ?",
                              [(v.tobytes(), pid) for (pid, _), v in zip(chunk, vecs)])
            self._set_meta({"embedder_name": str(self.embedder.name), "embedder_dim": str(self.dim)})
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def _spec(self) -> str:
        extra = {"flat": "", "lsh": f":nbits={self.lsh_nbits}", "hnsw": f":M={self.hnsw_m}"}[self.index_kind]
        return f"{self.index_kind}{extra}:d={self.dim}"

    def _new_index(self, kind: int) -> None:
        if self.index_kind == "flat":
            inner = faiss.IndexFlatIP(self.dim)
        elif self.index_kind == "lsh":
            with _one_thread():  # the rotation's QR is barrier-bound: 2 threads on 2 busy cores took 70 s, not 0.4 s
                inner = faiss.IndexLSH(self.dim, self.lsh_nbits, True, False)  # fixed-seed random rotation: no training
        else:
            inner = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        self._inner[kind], self._index[kind] = inner, faiss.IndexIDMap(inner)  # faiss ids = phrase ids

    def index_path(self, kind: str) -> Path | None:
        """Where the faiss index of "entity" or "relation" phrases is saved (None for an in-memory memory)."""
        return None if self.path is None else Path(f"{self.path}.{kind}.faiss")

    def _load_or_build(self, kind: int, force: bool = False) -> None:
        """Load the saved index if it matches the table (count, last id, file hash, spec), else rebuild it."""
        name, file = KINDS[kind], self.index_path(KINDS[kind])
        n, max_id = self._conn.execute("SELECT COUNT(*), COALESCE(MAX(id), 0) FROM phrases WHERE kind = ?",
                                       (kind,)).fetchone()
        why = "in-memory" if file is None else "reembedded" if force else None
        if why is None:
            saved = json.loads(self._meta(f"index.{name}") or "null")
            if not file.exists():
                why = "missing"
            elif saved is None or saved.get("spec") != self._spec():
                why = "other index kind"
            elif (saved.get("n"), saved.get("max_id")) != (n, max_id):
                why = "stale"
            elif saved.get("sha1") != _sha1(file):
                why = "file changed"
            else:
                try:
                    index = faiss.read_index(str(file))
                    if index.ntotal != n or index.d != self.dim:
                        why = "stale"
                except RuntimeError:
                    why = "unreadable"
        if why is None:
            self._index[kind] = index
            self._inner[kind] = faiss.downcast_index(faiss.downcast_index(index).index)
            self.index_status[name] = "loaded"
            return
        self._new_index(kind)
        cur = self._conn.execute("SELECT id, vec FROM phrases WHERE kind = ? ORDER BY id", (kind,))
        while rows := cur.fetchmany(50_000):
            self._add(kind, np.fromiter((r[0] for r in rows), np.int64, len(rows)),
                      np.frombuffer(b"".join(r[1] for r in rows), np.float32).reshape(len(rows), self.dim))
        self._dirty[kind] = file is not None
        self.index_status[name] = f"rebuilt ({why})" if file is not None else "built"

    def _add(self, kind: int, ids: np.ndarray, vecs: np.ndarray) -> None:
        if len(ids):
            self._index[kind].add_with_ids(np.ascontiguousarray(vecs, np.float32), ids)
            self._dirty[kind] = True

    def save(self) -> None:
        """Write the changed faiss indexes beside the DB, with their fingerprint in its meta table."""
        if self.path is None:
            return
        self._sync()
        for kind, name in enumerate(KINDS):
            if not self._dirty[kind]:
                continue
            file = self.index_path(name)
            tmp = file.with_name(file.name + ".tmp")
            faiss.write_index(self._index[kind], str(tmp))
            os.replace(tmp, file)
            n, max_id = self._conn.execute("SELECT COUNT(*), COALESCE(MAX(id), 0) FROM phrases WHERE kind = ?",
                                           (kind,)).fetchone()
            self._set_meta({f"index.{name}": json.dumps(
                {"spec": self._spec(), "n": n, "max_id": max_id, "sha1": _sha1(file)})})
            self._dirty[kind] = False

    def close(self) -> None:
        """Save the indexes (file-backed memory) and close the database; closing twice is harmless."""
        if self._conn is None:
            return
        try:
            self.save()
        finally:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> "TripleMemory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ plumbing
    def _live(self) -> sqlite3.Connection:
        if self._conn is None:
            raise ValueError("this TripleMemory is closed")
        return self._conn

    def _sync(self) -> None:
        """Pick up phrases another connection committed (phrases are append-only: load ids above ours)."""
        c = self._live()
        version = c.execute("PRAGMA data_version").fetchone()[0]
        if version == self._data_version:
            return
        self._data_version = version
        rows = c.execute("SELECT id, kind, text, vec FROM phrases WHERE id > ? ORDER BY id", (self._max_id,)).fetchall()
        for kind in (ENTITY, RELATION):
            mine = [r for r in rows if r[1] == kind]
            for pid, _, text, _ in mine:
                self._ids[kind][text] = pid
            self._add(kind, np.array([r[0] for r in mine], np.int64),
                      np.frombuffer(b"".join(r[3] for r in mine), np.float32).reshape(len(mine), self.dim))
        if rows:
            self._max_id = rows[-1][0]

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[list]:
        """All or nothing: SQL rolls back on any error, and new phrases reach faiss only after COMMIT."""
        c = self._live()
        c.execute("BEGIN IMMEDIATE")
        added: list[tuple[int, list[str], np.ndarray, np.ndarray]] = []  # (kind, texts, ids, vecs)
        max_id = self._max_id
        try:
            self._sync()
            max_id = self._max_id
            self._added = added
            yield added
            c.execute("COMMIT")
        except BaseException:
            if c.in_transaction:
                c.execute("ROLLBACK")
            for kind, texts, _, _ in added:
                for t in texts:
                    self._ids[kind].pop(t, None)
            self._max_id = max_id
            raise
        finally:
            self._added = None
        for kind, _, ids, vecs in added:
            self._add(kind, ids, vecs)

    def _encode(self, texts: list[str]) -> np.ndarray:
        vecs = np.asarray(self.embedder.encode(texts), dtype=np.float32)
        if vecs.shape != (len(texts), self.dim):
            raise ValueError(f"embedder {self.embedder.name!r} returned shape {vecs.shape} for {len(texts)} "
                             f"texts; expected ({len(texts)}, {self.dim})")
        return vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)  # cosine = inner product

    def _phrase_ids(self, kind: int, texts: Iterable[str]) -> dict[str, int]:
        """Inside a transaction: ids for `texts`, embedding and inserting (in batches) only the new ones."""
        known = self._ids[kind]
        new = [t for t in dict.fromkeys(texts) if t not in known]
        for chunk in _chunks(new, _EMBED_CHUNK):
            vecs = self._encode(list(chunk))
            ids = np.arange(self._max_id + 1, self._max_id + 1 + len(chunk), dtype=np.int64)
            self._conn.executemany("INSERT INTO phrases (id, kind, text, vec) VALUES (?, ?, ?, ?)",
                                   zip(ids.tolist(), [kind] * len(chunk), chunk, (v.tobytes() for v in vecs)))
            known.update(zip(chunk, ids.tolist()))
            self._max_id += len(chunk)
            self._added.append((kind, list(chunk), ids, vecs))
        return known

    def _insert(self, triples: list[Triple]) -> int:
        """Inside a transaction: store the (clean) triples; returns how many were new."""
        ent = self._phrase_ids(ENTITY, [x for t in triples for x in (t[0], t[2])])
        rel = self._phrase_ids(RELATION, [t[1] for t in triples])
        before = self._conn.total_changes
        self._conn.executemany("INSERT OR IGNORE INTO triples (s, r, o) VALUES (?, ?, ?)",
                               [(ent[s], rel[r], ent[o]) for s, r, o in triples])
        return self._conn.total_changes - before

    def _triple_ids(self, t: Triple) -> tuple[int, int, int] | None:
        ids = (self._ids[ENTITY].get(t[0]), self._ids[RELATION].get(t[1]), self._ids[ENTITY].get(t[2]))
        return None if None in ids else ids

    # ------------------------------------------------------------------------------------------ writes
    def write(self, subject: str, relation: str, object: str) -> bool:
        """Store one fact; True if it was new (writing a stored fact again changes nothing)."""
        return self.write_many([(subject, relation, object)]) == 1

    def write_many(self, triples: Iterable[Sequence[str]]) -> int:
        """Store many facts in one transaction, embedding only phrases not stored yet; returns how many were new.

        Any bad triple (not three strings, an empty term) raises ValueError naming it, and nothing is written.
        """
        clean = [_clean_triple(t, f"{i} ") for i, t in enumerate(triples)]
        if not clean:
            return 0
        with self._transaction():
            return self._insert(clean)

    def delete(self, subject: str, relation: str, object: str) -> bool:
        """Forget one fact; True if it was stored."""
        t = _clean_triple((subject, relation, object))
        with self._transaction():
            ids = self._triple_ids(t)
            return ids is not None and self._conn.execute(
                "DELETE FROM triples WHERE s = ? AND r = ? AND o = ?", ids).rowcount > 0

    def update(self, old: Sequence[str], new: Sequence[str]) -> bool:
        """Replace fact `old` by `new` atomically; KeyError (nothing changed) if `old` is not stored.

        Returns True if `new` was not stored before.
        """
        old_t, new_t = _clean_triple(old, "old "), _clean_triple(new, "new ")
        with self._transaction():
            ids = self._triple_ids(old_t)
            if ids is None or not self._conn.execute(
                    "DELETE FROM triples WHERE s = ? AND r = ? AND o = ?", ids).rowcount:
                raise KeyError(f"update: {tuple(old_t)!r} is not stored")
            return self._insert([new_t]) == 1 and new_t != old_t

    def replace_object(self, subject: str, relation: str, new_object: str) -> list[Triple]:
        """Make (subject, relation, new_object) the only fact for (subject, relation), as when a president
        changes; returns the facts it removed. One transaction."""
        t = _clean_triple((subject, relation, new_object))
        with self._transaction():
            s, r = self._ids[ENTITY].get(t[0]), self._ids[RELATION].get(t[1])
            removed: list[Triple] = []
            if s is not None and r is not None:
                o = self._ids[ENTITY].get(t[2], -1)
                removed = [Triple(*row) for row in self._conn.execute(
                    f"{_SELECT_TEXT} WHERE t.s = ? AND t.r = ? AND t.o != ? ORDER BY t.id", (s, r, o))]
                self._conn.execute("DELETE FROM triples WHERE s = ? AND r = ? AND o != ?", (s, r, o))
            self._insert([t])
            return removed

    # ------------------------------------------------------------------------------------------ phrase search
    def _scored(self, kind: int, ids: list[int], vec: np.ndarray) -> list[tuple[int, str, float, bool]]:
        """(id, text, exact cosine, still used) for phrase ids, from the stored vectors."""
        out = []
        for chunk in _chunks(ids, _SQL_CHUNK):
            rows = self._conn.execute(f"SELECT p.id, p.text, p.vec, {_USED[kind]} FROM phrases p "
                                      f"WHERE p.id IN ({_marks(len(chunk))})", list(chunk)).fetchall()
            if rows:
                cos = np.frombuffer(b"".join(r[2] for r in rows), np.float32).reshape(len(rows), self.dim) @ vec
                out += [(r[0], r[1], float(c), bool(r[3])) for r, c in zip(rows, cos)]
        return sorted(out, key=lambda x: (-x[2], x[0]))

    def _used(self, kind: int, pid: int) -> bool:
        return bool(self._conn.execute(f"SELECT {_USED[kind]} FROM phrases p WHERE p.id = ?", (pid,)).fetchone()[0])

    def _search(self, kind: int, vec: np.ndarray, min_cos: float, nearest_only: bool) -> list[tuple[int, str, float]]:
        """Used phrases with exact cosine >= min_cos, best first (only the best if `nearest_only`).

        Asks the index for k candidates and widens k while the answer may lie beyond them: for the nearest,
        while none of the k is still used; for all above min_cos, while every candidate passed.
        """
        index = self._index[kind]
        n = index.ntotal
        k = min(16 if nearest_only else 64, n)
        while k > 0:
            if self.index_kind == "hnsw":
                self._inner[kind].hnsw.efSearch = max(self.hnsw_ef_search, k)
            with _one_thread():
                labels = index.search(vec[None, :], k)[1][0]
            found = [int(i) for i in labels if i >= 0]
            scored = self._scored(kind, found, vec)
            passing = [(i, t, c) for i, t, c, used in scored if used and c >= min_cos]
            if nearest_only and passing:
                return passing[:1]
            if k >= n or (not nearest_only and any(c < min_cos for _, _, c, _ in scored)):
                return passing
            k = min(4 * k, n)
        return []

    # ------------------------------------------------------------------------------------------ RET-LLM read
    def read(self, query: Sequence[str]) -> list[Triple]:
        """RET-LLM read: all stored triples matching the query's known terms ('' = unknown), in write order."""
        return self.read_explained(query).matches

    def read_explained(self, query: Sequence[str]) -> ReadResult:
        """`read` plus, for each term not stored verbatim, the nearest stored phrase and whether it stood in."""
        q = _clean_triple(query, "query ", allow_empty=True)
        if not any(q):
            raise ValueError(f"read query {tuple(query)!r} has no known term; give at least one")
        self._live()
        self._sync()
        ids: list[int | None] = [None, None, None]
        fuzzy: list[int] = []
        for pos, (term, (_, kind)) in enumerate(zip(q, _ROLES)):
            pid = self._ids[kind].get(term) if term else None
            if pid is not None and self._used(kind, pid):
                ids[pos] = pid  # stored verbatim and still used: exact match
            elif term:
                fuzzy.append(pos)
        subs = []
        if fuzzy:
            vecs = self._encode([q[p] for p in fuzzy])
            for pos, vec in zip(fuzzy, vecs):
                role, kind = _ROLES[pos]
                best = self._search(kind, vec, -1.0, nearest_only=True)
                if not best:
                    subs.append(Substitution(role, q[pos], None, float("nan"), False))
                    continue
                pid, text, cos = best[0]
                subs.append(Substitution(role, q[pos], text, cos, cos >= self.fuzzy))
                ids[pos] = pid if cos >= self.fuzzy else None
        if any(not s.accepted for s in subs):
            return ReadResult([], subs)
        where = " AND ".join(f"t.{col} = ?" for col, pid in zip("sro", ids) if pid is not None)
        rows = self._conn.execute(f"{_SELECT_TEXT} WHERE {where} ORDER BY t.id", [i for i in ids if i is not None])
        return ReadResult([Triple(*r) for r in rows], subs)

    # ------------------------------------------------------------------------------------------ MemLLM read
    def memllm_search(self, query: Sequence[str]) -> list[tuple[str, float, Triple]]:
        """One MemLLM query, (s, t, '') or ('', t, o), before Q_thr: (other entity, score, best triple), best first.

        The score of a triple is the mean of its entity's and its relation's cosine with the query's;
        entities (cos >= tau_entity), relations (cos >= tau_relation) and triples (score >= tau_triple) are
        kept. Each other entity appears once, with its best triple; ties go to the earlier write.
        """
        q = _clean_triple(query, "query ", allow_empty=True)
        if not q.relation or bool(q.subject) == bool(q.object):
            raise ValueError(f"MemLLM query {tuple(query)!r} must give the relation and exactly one of "
                             "subject/object")
        self._live()
        self._sync()
        subject_query = bool(q.subject)
        e_vec, r_vec = self._encode([q.subject or q.object])[0], self._encode([q.relation])[0]
        ents = {i: c for i, _, c in self._search(ENTITY, e_vec, self.tau_entity, nearest_only=False)}
        rels = {i: c for i, _, c in self._search(RELATION, r_vec, self.tau_relation, nearest_only=False)}
        for text, kind, found in ((q.subject or q.object, ENTITY, ents), (q.relation, RELATION, rels)):
            pid = self._ids[kind].get(text)  # a verbatim phrase is a candidate even if an approximate index missed it
            if pid is not None and pid not in found and self._used(kind, pid):
                found[pid] = 1.0
        if not ents or not rels:
            return []
        # a triple needs (ce + cr) / 2 >= tau_triple, so an entity below 2 * tau_triple - max(cr) can never make it
        floor = 2 * self.tau_triple - max(rels.values())
        ent_ids = [i for i, c in ents.items() if c >= floor - 1e-6]
        col = "s" if subject_query else "o"
        best: dict[str, tuple[float, int, Triple]] = {}
        for chunk in _chunks(ent_ids, _SQL_CHUNK):
            rows = self._conn.execute(
                f"SELECT t.id, t.s, t.r, t.o, ps.text, pr.text, po.text FROM triples t "
                f"JOIN phrases ps ON ps.id = t.s JOIN phrases pr ON pr.id = t.r JOIN phrases po ON po.id = t.o "
                f"WHERE t.{col} IN ({_marks(len(chunk))}) AND t.r IN ({_marks(len(rels))})",
                list(chunk) + list(rels))
            for tid, s, r, o, st, rt, ot in rows:
                score = (ents[s if subject_query else o] + rels[r]) / 2
                if score < self.tau_triple:
                    continue
                other = ot if subject_query else st
                key = (-score, tid)
                if other not in best or key < (-best[other][0], best[other][1]):
                    best[other] = (score, tid, Triple(st, rt, ot))
        ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[1][1]))
        return [(other, score, t) for other, (score, _, t) in ranked]

    def query_memllm(self, queries: Sequence[Sequence[str]], *, exact_first: bool = False) -> list[str]:
        """MemLLM read (§3.1): the entities answering the queries, best score first, deduplicated.

        A query whose results number `q_thr` or more returns none: too broad to help. The official code drops
        at >= Q_THR; the paper and issue say "more than", we follow the code. `exact_first` keeps, per query,
        only exact matches when there are any (the official code's `prioritize_exact_match`).
        """
        best: dict[str, float] = {}
        for query in queries:
            hits = self.memllm_search(query)
            if exact_first and hits and hits[0][1] >= 1 - 1e-5:
                hits = [h for h in hits if h[1] >= 1 - 1e-5]
            if len(hits) >= self.q_thr:
                continue
            for other, score, _ in hits:
                best[other] = max(score, best.get(other, -2.0))
        return sorted(best, key=lambda e: -best[e])  # stable: ties keep query, then score order

    # ------------------------------------------------------------------------------------------ export / import
    def to_dataframe(self) -> Any:
        """The triples as a pandas DataFrame (columns subject, relation, object), in write order."""
        import pandas as pd

        rows = self._live().execute(f"{_SELECT_TEXT} ORDER BY t.id").fetchall()
        return pd.DataFrame(rows, columns=COLUMNS, dtype=object)

    def from_dataframe(self, df: Any) -> int:
        """Write every row of a DataFrame with columns subject, relation, object (others ignored); returns new.

        All or nothing: a row with a missing or non-string term raises ValueError naming it.
        """
        missing = [c for c in COLUMNS if c not in df.columns]
        if missing:
            raise ValueError(f"DataFrame lacks column(s) {missing}; it needs {COLUMNS}")
        return self.write_many(df[COLUMNS].itertuples(index=False, name=None))

    def to_csv(self, path: str | os.PathLike) -> None:
        """Write the triples to a CSV file with a subject,relation,object header."""
        self.to_dataframe().to_csv(path, index=False, quoting=csv.QUOTE_ALL)  # minimal quoting loses a bare "\r"

    def from_csv(self, path: str | os.PathLike, **read_csv_kw: Any) -> int:
        """Write the triples of a CSV file (header subject,relation,object); every cell read as text."""
        import pandas as pd

        # dtype=str, no NA parsing: "NA", "None" or "007" stay the strings they are
        return self.from_dataframe(pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False,
                                               **read_csv_kw))

    def to_sql(self, conn: Any, table: str, if_exists: str = "fail") -> None:
        """Write the triples into an SQL table (a sqlite3 connection or SQLAlchemy engine, via pandas)."""
        self.to_dataframe().to_sql(table, conn, index=False, if_exists=if_exists)

    def from_sql(self, conn: Any, table_or_query: str) -> int:
        """Write triples from an SQL table name, or from a query returning subject, relation, object columns
        (cast non-text columns in the query, e.g. `CAST(year AS TEXT) AS object`)."""
        import pandas as pd

        if re.fullmatch(r"[A-Za-z_][\w$]*(\.[A-Za-z_][\w$]*)?", table_or_query):
            name = ".".join('"' + part + '"' for part in table_or_query.split("."))
            table_or_query = f"SELECT {', '.join(COLUMNS)} FROM {name}"
        return self.from_dataframe(pd.read_sql_query(table_or_query, conn))

    # ------------------------------------------------------------------------------------------ inspection
    def __len__(self) -> int:
        """How many triples are stored."""
        return self._live().execute("SELECT COUNT(*) FROM triples").fetchone()[0]

    def __iter__(self) -> Iterator[Triple]:
        """The triples in write order, streamed from SQLite (take `list(mem)` first if you write meanwhile)."""
        cur = self._live().execute(f"{_SELECT_TEXT} ORDER BY t.id")
        while rows := cur.fetchmany(10_000):
            yield from (Triple(*r) for r in rows)

    def __contains__(self, item: Any) -> bool:
        """Exact membership of a (subject, relation, object) triple; anything else is simply not in."""
        try:
            t = _clean_triple(item)
        except ValueError:
            return False
        self._sync()
        ids = self._triple_ids(t)
        return ids is not None and self._conn.execute(
            "SELECT 1 FROM triples WHERE s = ? AND r = ? AND o = ?", ids).fetchone() is not None

    def __repr__(self) -> str:
        where = ":memory:" if self.path is None else str(self.path)
        if self._conn is None:
            return f"TripleMemory({where!r}, closed)"
        return (f"TripleMemory({len(self)} triples, {len(self._ids[ENTITY])} entities, "
                f"{len(self._ids[RELATION])} relations, index={self.index_kind!r}, "
                f"embedder={self.embedder.name!r}, path={where!r})")
