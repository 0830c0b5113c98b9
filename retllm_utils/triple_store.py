"""The one store interface under `memory.TripleMemory` and its Postgres twin: term checks, writes, inspection, IO.

RET-LLM §3.1 and MemLLM §3.1 both store (subject, relation, object) triples with a vector per phrase. `TripleStore`
is what every backend shares, written once: how a term is cleaned and capped (`clean_triple`, `MAX_TERM_CHARS`),
the writes (`write`, `write_many`, `delete`, `update`, `replace_object`), inspection (`len`, `in`, iteration,
`repr`) and DataFrame / CSV / SQL import and export (`memory_io`). A backend supplies the plumbing these run on
(the connection, the phrase maps, the transaction, phrase and triple inserts; "Backend plumbing" below):
`backends.sqlite.SqliteStore` (SQLite + faiss, what the papers' notebooks use) and `backends.postgres.PgStore`
(PostgreSQL + pgvector, an extra). The papers' reads over either are `memory.MemoryReads`.

Terms are stripped and NFC-normalised (one fact whatever the normal form); a term that is not text (a lone
surrogate), has no visible character, or is longer than `max_term_chars` (`MAX_TERM_CHARS`) is refused with a
ValueError naming it, before anything is written. A write is all or nothing.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any, ContextManager, Iterable, Iterator, Sequence, TypeVar

import numpy as np

from . import memory_io
from .api import Triple
from .models import unit
from .phrase_index import ENTITY, INDEX_KINDS, RELATION, chunks

__all__ = [
    "TripleStore",
    "clean_triple",
    "ROLES",
    "SELECT_TEXT",
    "BUSY_TIMEOUT",
    "MAX_TERM_CHARS",
    "EMBED_CHUNK",
]

# seconds a writer waits for another connection's write transaction before "database is locked"
BUSY_TIMEOUT = 60.0
# Longest storable term: twice Re-DocRED's longest entity mention (118 characters), and at 4 UTF-8 bytes a
# character 1 KiB, well inside PostgreSQL's B-tree entry limit (~2.7 KB) on the unique phrase index.
MAX_TERM_CHARS = 256
EMBED_CHUNK = 8192  # phrases encoded (and held in RAM) at a time
ROLES = (("subject", ENTITY), ("relation", RELATION), ("object", ENTITY))
SELECT_TEXT = (
    "SELECT ps.text, pr.text, po.text FROM triples t JOIN phrases ps ON ps.id = t.s "
    "JOIN phrases pr ON pr.id = t.r JOIN phrases po ON po.id = t.o"
)
_Store = TypeVar("_Store", bound="TripleStore")  # `with TripleMemory(...) as m` keeps m a TripleMemory
_ASCII_VISIBLE = re.compile(r"[!-~]")


def _visible(c: str) -> bool:
    """Not a space, control or format character (zero-width space, joiners, soft hyphen, BOM)."""
    return unicodedata.category(c)[0] != "Z" and unicodedata.category(c) not in ("Cc", "Cf")


def _clean_term(value: Any, role: str, where: str, allow_empty: bool = False) -> str:
    """A stripped NFC term (one fact whatever the normal form), or a ValueError naming the bad term and where."""
    if value is None and allow_empty:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{role} {value!r} {where} is not a string ({type(value).__name__})")
    value = value.strip()
    if not value:
        if allow_empty:
            return value
        raise ValueError(f"{role} {value!r} {where} is empty or whitespace")
    if value.isascii():  # the common case: no surrogate, already NFC; visible unless only control characters
        if _ASCII_VISIBLE.search(value) is None:
            raise ValueError(f"{role} {value!r} {where} has no visible character")
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{role} {value!r} {where} holds a lone surrogate: not valid Unicode text") from None
    if not any(map(_visible, value)):
        raise ValueError(f"{role} {value!r} {where} has no visible character")
    return unicodedata.normalize("NFC", value)


def _clip(term: str, n: int = 40) -> str:
    """A term's repr cut to its first n characters, for messages about terms too long to print."""
    return repr(term) if len(term) <= n else f"{term[:n]!r}…"


def clean_triple(t: Any, where: str = "", allow_empty: bool = False, max_chars: int | None = None) -> Triple:
    """(s, r, o) as a stripped Triple; anything else, or a term longer than `max_chars` (None: no cap), raises
    ValueError naming the triple."""
    if isinstance(t, (str, bytes)) or not isinstance(t, Sequence) or len(t) != 3:
        raise ValueError(f"triple {where}{t!r} is not a (subject, relation, object) sequence")
    at = f"in triple {where}{tuple(t)!r}"
    clean = Triple(*(_clean_term(v, role, at, allow_empty) for v, (role, _) in zip(t, ROLES)))
    for term, (role, _) in zip(clean, ROLES):
        if max_chars is not None and len(term) > max_chars:
            shown = ", ".join(map(_clip, clean))
            raise ValueError(
                f"{role} {_clip(term)} in triple {where}({shown}) is {len(term):,} characters long; a stored "
                f"term may have at most {max_chars} (the memory's max_term_chars, default MAX_TERM_CHARS)"
            )
    return clean


class TripleStore:
    """What both backends share: opening checks, term checks, writes, inspection, import / export.

    A backend sets `_conn` (a connection taking `?` placeholders; None once closed), `_ids` (per kind, text ->
    phrase id: `get`, `in`, `len`), `_index` (per kind: `used(pid)`, `search(...)`), `where` (names the memory in
    messages) and implements the plumbing below. `max_term_chars`: the longest term a write stores.
    """

    index_kinds: tuple[str, ...] = INDEX_KINDS  # what `index=` a backend takes
    _index_hints: dict[str, str] = {}  # index kind -> why this backend lacks it, added to the error
    _where_key = "path"  # how `repr` labels `where`
    max_term_chars = MAX_TERM_CHARS
    where = ""
    _conn: Any = None
    _ids: Sequence[Any]
    _index: Sequence[Any]

    def __init__(self, embedder: Any, index: str, hnsw_m: int):
        if index not in self.index_kinds:
            hint = self._index_hints.get(index, "")
            raise ValueError(f"index must be one of {self.index_kinds}, got {index!r}{hint}")
        if embedder is None:
            from .models import load_embedder

            embedder = load_embedder()
        self.embedder, self.index_kind, self.hnsw_m = embedder, index, hnsw_m
        self.dim = int(embedder.dim)

    # ------------------------------------------------------------------------------------------ backend plumbing
    def save(self) -> None:
        """Make the memory's state durable beyond its committed rows (faiss files); closing does it too."""
        raise NotImplementedError

    def close(self) -> None:
        """Save if needed and close the connection; closing twice is harmless."""
        raise NotImplementedError

    def _sync(self, force: bool = False) -> None:
        """Pick up what other connections committed, before a read or a write."""
        raise NotImplementedError

    def _transaction(self) -> ContextManager[Any]:
        """A context manager: one write transaction, all or nothing, one writer at a time."""
        raise NotImplementedError

    def _phrase_ids(self, kind: int, texts: Iterable[str], vecs: dict[str, np.ndarray]) -> Any:
        """Inside a transaction: text -> id for `texts`, inserting only the new ones (vectors from `_embed_new`)."""
        raise NotImplementedError

    def _insert_rows(self, rows: list[tuple[int, int, int]]) -> int:
        """Inside a transaction: insert (s, r, o) phrase-id rows in order, ignoring stored ones; how many were new."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[Triple]:
        """The triples in write order, streamed (take `list(mem)` first if you write meanwhile)."""
        raise NotImplementedError

    def _unstored(self, kind: int, texts: list[str]) -> list[str]:
        """Those of `texts` (distinct) not stored as phrases of `kind` yet; after `_sync`, from the phrase map."""
        return [t for t in texts if t not in self._ids[kind]]

    def _new_triple(self, t: Any, where: str = "") -> Triple:
        """A triple about to be stored: cleaned, and refused if a term is longer than `max_term_chars`."""
        return clean_triple(t, where, max_chars=self.max_term_chars)

    # ------------------------------------------------------------------------------------------ shared plumbing
    def _live(self) -> Any:
        if self._conn is None:
            raise ValueError(f"this {type(self).__name__} is closed")
        return self._conn

    def _encode(self, texts: list[str]) -> np.ndarray:
        vecs = np.asarray(self.embedder.encode(texts), dtype=np.float32)
        if vecs.shape != (len(texts), self.dim):
            raise ValueError(
                f"embedder {self.embedder.name!r} returned shape {vecs.shape} for {len(texts)} "
                f"texts; expected ({len(texts)}, {self.dim})"
            )
        return unit(vecs)  # cosine = inner product

    def _other_embedder(self, old_name: str | None, old_dim: str | None, n: int) -> ValueError:
        """The error for opening a memory whose n stored vectors another embedder made (another space)."""
        return ValueError(
            f"{self.where} was built with embedder {old_name!r} (dim {old_dim}), not {str(self.embedder.name)!r} "
            f"(dim {self.dim}); open it with that embedder, or pass reembed=True to re-encode its {n} phrases with "
            "this one"
        )

    def _embed_new(self, triples: list[Triple]) -> list[dict[str, np.ndarray]]:
        """Before the write lock: vectors of the phrases not stored yet, per kind, so the lock is held for SQL only."""
        self._sync()
        texts = ([x for t in triples for x in (t[0], t[2])], [t[1] for t in triples])
        out: list[dict[str, np.ndarray]] = [{}, {}]
        for kind in (ENTITY, RELATION):
            new = self._unstored(kind, list(dict.fromkeys(texts[kind])))
            for chunk in chunks(new, EMBED_CHUNK):
                out[kind].update(zip(chunk, self._encode(list(chunk))))
        return out

    def _insert(self, triples: list[Triple], vecs: list[dict[str, np.ndarray]]) -> int:
        """Inside a transaction: store the (clean) triples in their order; returns how many were new."""
        ent = self._phrase_ids(ENTITY, [x for t in triples for x in (t[0], t[2])], vecs[ENTITY])
        rel = self._phrase_ids(RELATION, [t[1] for t in triples], vecs[RELATION])
        return self._insert_rows([(ent[s], rel[r], ent[o]) for s, r, o in triples])

    def _triple_ids(self, t: Triple) -> tuple[int, int, int] | None:
        ids = (self._ids[ENTITY].get(t[0]), self._ids[RELATION].get(t[1]), self._ids[ENTITY].get(t[2]))
        return None if None in ids else ids

    # ------------------------------------------------------------------------------------------ writes
    def write(self, subject: str, relation: str, object: str) -> bool:
        """Store one fact; True if it was new (writing a stored fact again changes nothing)."""
        return self.write_many([(subject, relation, object)]) == 1

    def write_many(self, triples: Iterable[Sequence[str]]) -> int:
        """Store many facts in one transaction, embedding only phrases not stored yet; returns how many were new.

        Raises, and writes nothing: ValueError naming any bad triple (not three strings, an empty or invisible term,
        a lone surrogate, a term over `max_term_chars`); the backend's error naming the memory if another writer
        held the lock past `busy_timeout` or the database is damaged; the embedder's own exception.
        """
        clean = [self._new_triple(t, f"{i} ") for i, t in enumerate(triples)]
        if not clean:
            return 0
        vecs = self._embed_new(clean)
        with self._transaction():
            return self._insert(clean, vecs)

    def delete(self, subject: str, relation: str, object: str) -> bool:
        """Forget one fact; True if it was stored."""
        t = clean_triple((subject, relation, object))
        with self._transaction():
            ids = self._triple_ids(t)
            return (
                ids is not None
                and self._conn.execute("DELETE FROM triples WHERE s = ? AND r = ? AND o = ?", ids).rowcount > 0
            )

    def update(self, old: Sequence[str], new: Sequence[str]) -> bool:
        """Replace fact `old` by `new` atomically; KeyError (nothing changed) if `old` is not stored.

        Returns True if `new` was not stored before.
        """
        old_t, new_t = clean_triple(old, "old "), self._new_triple(new, "new ")
        vecs = self._embed_new([new_t])
        with self._transaction():
            ids = self._triple_ids(old_t)
            if (
                ids is None
                or not self._conn.execute("DELETE FROM triples WHERE s = ? AND r = ? AND o = ?", ids).rowcount
            ):
                raise KeyError(f"update: {tuple(old_t)!r} is not stored")
            return self._insert([new_t], vecs) == 1 and new_t != old_t

    def replace_object(self, subject: str, relation: str, new_object: str) -> list[Triple]:
        """Make (subject, relation, new_object) the only fact for (subject, relation), as when a president
        changes; returns the facts it removed. One transaction."""
        t = self._new_triple((subject, relation, new_object))
        vecs = self._embed_new([t])
        with self._transaction():
            s, r = self._ids[ENTITY].get(t[0]), self._ids[RELATION].get(t[1])
            removed: list[Triple] = []
            if s is not None and r is not None:
                o = self._ids[ENTITY].get(t[2], -1)
                removed = [
                    Triple(*row)
                    for row in self._conn.execute(
                        f"{SELECT_TEXT} WHERE t.s = ? AND t.r = ? AND t.o != ? ORDER BY t.id", (s, r, o)
                    ).fetchall()
                ]
                self._conn.execute("DELETE FROM triples WHERE s = ? AND r = ? AND o != ?", (s, r, o))
            self._insert([t], vecs)
            return removed

    # ------------------------------------------------------------------------------------------ inspection
    def __len__(self) -> int:
        """How many triples are stored."""
        return self._live().execute("SELECT COUNT(*) FROM triples").fetchone()[0]

    def __contains__(self, item: Any) -> bool:
        """Exact membership of a (subject, relation, object) triple; anything else is simply not in."""
        try:
            t = clean_triple(item)
        except ValueError:
            return False
        self._sync()
        ids = self._triple_ids(t)
        return (
            ids is not None
            and self._conn.execute("SELECT 1 FROM triples WHERE s = ? AND r = ? AND o = ?", ids).fetchone() is not None
        )

    def __repr__(self) -> str:
        if self._conn is None:
            return f"{type(self).__name__}({self.where!r}, closed)"
        return (
            f"{type(self).__name__}({len(self)} triples, {len(self._ids[ENTITY])} entities, "
            f"{len(self._ids[RELATION])} relations, index={self.index_kind!r}, "
            f"embedder={self.embedder.name!r}, {self._where_key}={self.where!r})"
        )

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ import / export
    to_dataframe = memory_io.to_dataframe
    from_dataframe = memory_io.from_dataframe
    to_csv = memory_io.to_csv
    from_csv = memory_io.from_csv
    to_sql = memory_io.to_sql
    from_sql = memory_io.from_sql
