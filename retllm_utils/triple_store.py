"""The triple store under `memory.TripleMemory`: SQLite rows, phrase ids and vectors, transactions, writes.

RET-LLM §3.1 and MemLLM §3.1 both store (subject, relation, object) triples with a vector per phrase; this is
that store, the part of the memory that survives a restart (notebooks 03, 07, 08). One SQLite database holds the
triples, every distinct entity and relation phrase, and each phrase's vector as a float32 BLOB; `phrase_index`
keeps a faiss index per kind over those vectors. Writes are all or nothing (`_transaction`); other connections'
commits are picked up (`_sync`, `PRAGMA data_version`). The papers' reads live in `memory`.

Several processes may read and write one file: each write is one `BEGIN IMMEDIATE` transaction (new phrases are
embedded before it, so the lock is held for SQL only), a writer waits up to `busy_timeout` seconds for another's,
and a phrase another process stored is re-read, never inserted twice. Terms are NFC-normalised; a term that is not
text (a lone surrogate) or has no visible character is refused. Database errors name the file.
"""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import unicodedata
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence, TypeVar

import numpy as np

from .api import Triple
from .models import unit
from .phrase_index import (
    ENTITY,
    INDEX_KINDS,
    KINDS,
    RELATION,
    SQL_CHUNK,
    PhraseIndex,
    chunks,
    get_meta,
    marks,
    set_meta,
    vectors,
)

__all__ = ["TripleStore", "NamedConnection", "clean_triple", "ROLES", "SELECT_TEXT", "BUSY_TIMEOUT"]

BUSY_TIMEOUT = 60.0  # seconds a writer waits for another connection's write transaction before "database is locked"

ROLES = (("subject", ENTITY), ("relation", RELATION), ("object", ENTITY))
_EMBED_CHUNK = 8192  # phrases encoded (and held in RAM) at a time
_LOAD_ROWS = 50_000  # phrase rows read at a time when opening
_Store = TypeVar("_Store", bound="TripleStore")  # `with TripleMemory(...) as m` keeps m a TripleMemory

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS phrases (id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, text TEXT NOT NULL,
                                    vec BLOB NOT NULL, UNIQUE (kind, text));
CREATE TABLE IF NOT EXISTS triples (id INTEGER PRIMARY KEY, s INTEGER NOT NULL, r INTEGER NOT NULL,
                                    o INTEGER NOT NULL, UNIQUE (s, r, o));
CREATE INDEX IF NOT EXISTS triples_ro ON triples (r, o);
CREATE INDEX IF NOT EXISTS triples_os ON triples (o, s);
"""
SELECT_TEXT = (
    "SELECT ps.text, pr.text, po.text FROM triples t JOIN phrases ps ON ps.id = t.s "
    "JOIN phrases pr ON pr.id = t.r JOIN phrases po ON po.id = t.o"
)


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


def _empty_file(path: Path) -> bool:
    """A 0-byte file with no write-ahead log beside it: no SQLite database, though SQLite would open it as one."""
    wal = Path(f"{path}-wal")
    return path.is_file() and path.stat().st_size == 0 and not (wal.exists() and wal.stat().st_size > 0)


def clean_triple(t: Any, where: str = "", allow_empty: bool = False) -> Triple:
    """(s, r, o) as a stripped Triple; anything else raises ValueError naming the triple."""
    if isinstance(t, (str, bytes)) or not isinstance(t, Sequence) or len(t) != 3:
        raise ValueError(f"triple {where}{t!r} is not a (subject, relation, object) sequence")
    at = f"in triple {where}{tuple(t)!r}"
    return Triple(*(_clean_term(v, role, at, allow_empty) for v, (role, _) in zip(t, ROLES)))


def check_embedder(conn: sqlite3.Connection, embedder: Any, encode: Any, reembed: bool, where: str) -> bool:
    """A DB built with another encoder has vectors of another space: refuse, or re-encode (True) when asked."""
    name, dim = str(embedder.name), str(int(embedder.dim))
    old_name, old_dim = get_meta(conn, "embedder_name"), get_meta(conn, "embedder_dim")
    n = conn.execute("SELECT COUNT(*) FROM phrases").fetchone()[0]
    if (old_name, old_dim) == (name, dim):
        return False
    if not n:  # a new, empty memory
        set_meta(conn, {"embedder_name": name, "embedder_dim": dim})
        return False
    if not reembed:
        raise ValueError(
            f"{where} was built with embedder {old_name!r} (dim {old_dim}), not {name!r} (dim {dim}); open it with "
            f"that embedder, or pass reembed=True to re-encode its {n} phrases with this one"
        )
    rows = conn.execute("SELECT id, text FROM phrases ORDER BY id").fetchall()
    conn.execute("BEGIN IMMEDIATE")
    try:
        for chunk in chunks(rows, _EMBED_CHUNK):
            vecs = encode([t for _, t in chunk])
            conn.executemany(
                "UPDATE phrases SET vec = ? WHERE id = ?", [(v.tobytes(), pid) for (pid, _), v in zip(chunk, vecs)]
            )
        set_meta(conn, {"embedder_name": name, "embedder_dim": dim})
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return True


def _named(e: sqlite3.Error, where: str) -> sqlite3.Error:
    """The same error, its message prefixed with the database file (once)."""
    return e if not where or where in str(e) else type(e)(f"{where}: {e}")


class NamedCursor(sqlite3.Cursor):
    """A cursor whose fetches name the file on a database error (a damaged page is often met only while reading)."""

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.DatabaseError as e:
            raise _named(e, self.connection.where) from e

    def fetchmany(self, size: int = 1) -> list:
        try:
            return super().fetchmany(size)
        except sqlite3.DatabaseError as e:
            raise _named(e, self.connection.where) from e

    def fetchall(self) -> list:
        try:
            return super().fetchall()
        except sqlite3.DatabaseError as e:
            raise _named(e, self.connection.where) from e


class NamedConnection(sqlite3.Connection):
    """An SQLite connection whose database errors name the file, so a damaged memory says which one it is.

    Statements and fetches are covered; iterate a cursor through `fetchmany`/`fetchall`, not `for row in cursor`.
    """

    where = ""

    def _named(self, e: sqlite3.Error) -> sqlite3.Error:
        return _named(e, self.where)

    def execute(self, sql: str, params: Any = (), /) -> sqlite3.Cursor:
        try:
            return self.cursor(NamedCursor).execute(sql, params)
        except sqlite3.DatabaseError as e:
            raise self._named(e) from e

    def executemany(self, sql: str, params: Any, /) -> sqlite3.Cursor:
        try:
            return self.cursor(NamedCursor).executemany(sql, params)
        except sqlite3.DatabaseError as e:
            raise self._named(e) from e

    def executescript(self, script: str, /) -> sqlite3.Cursor:
        try:
            return super().executescript(script)
        except sqlite3.DatabaseError as e:
            raise self._named(e) from e


class TripleStore:
    """The store under `TripleMemory`: triples and phrases in SQLite, phrase vectors in two `PhraseIndex`es.

    Opening, the embedder check, transactions, picking up other connections' writes, writes and inspection;
    the papers' reads are `TripleMemory`'s. An existing 0-byte file is refused (it is no memory: a wrong path or a
    truncated copy) unless `create=True`; a missing file is created. `busy_timeout`: seconds a write waits for
    another connection's write transaction.
    """

    def __init__(
        self,
        path: str | os.PathLike | None = None,
        embedder: Any = None,
        index: str = "flat",
        *,
        reembed: bool = False,
        lsh_nbits: int | None = None,
        hnsw_m: int = 32,
        create: bool = False,
        busy_timeout: float = BUSY_TIMEOUT,
    ):
        if index not in INDEX_KINDS:
            raise ValueError(f"index must be one of {INDEX_KINDS}, got {index!r}")
        if embedder is None:
            from .models import load_embedder

            embedder = load_embedder()
        self.embedder, self.index_kind = embedder, index
        self.dim = int(embedder.dim)
        self.lsh_nbits = lsh_nbits or 2 * self.dim  # more bits: better candidates, bigger index
        self.hnsw_m = hnsw_m
        self.path = None if path is None else Path(path)
        self.index_status: dict[str, str] = {}  # per kind: "loaded" or "rebuilt (why)", for notebooks and tests
        if self.path is not None and not create and _empty_file(self.path):
            raise ValueError(
                f"{self.path} is an empty file (0 bytes), not a memory; pass create=True to make a new memory there"
            )
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE ... COMMIT) so a batch is all or nothing
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            ":memory:" if path is None else str(path),
            isolation_level=None,
            timeout=busy_timeout,
            factory=NamedConnection,
        )
        self._conn.where = ":memory:" if path is None else str(path)
        try:
            self._open(reembed)
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    # ------------------------------------------------------------------------------------------ opening, saving
    def _open(self, reembed: bool) -> None:
        c = self._conn
        if self.path is not None:
            c.execute("PRAGMA journal_mode = WAL")  # fast small commits; readers never block the writer
            c.execute("PRAGMA synchronous = NORMAL")  # durable across app crashes (WAL), not power loss
        c.execute("PRAGMA cache_size = -262144")  # 256 MiB: index B-trees of ~1M triples stay in RAM
        c.executescript(_SCHEMA)
        reembedded = check_embedder(self._conn, self.embedder, self._encode, reembed, where=str(self.path))
        self._data_version = c.execute("PRAGMA data_version").fetchone()[0]  # before the snapshot: later commits sync
        self._ids: list[dict[str, int]] = [{}, {}]  # text -> phrase id, per kind (used or not)
        self._added: list | None = None  # inside a transaction: phrases inserted, for faiss after COMMIT
        self._index = [
            PhraseIndex(
                c,
                kind,
                self.dim,
                self.index_kind,
                self.index_path(KINDS[kind]),
                lsh_nbits=self.lsh_nbits,
                hnsw_m=self.hnsw_m,
            )
            for kind in (ENTITY, RELATION)
        ]
        c.execute("BEGIN")  # one read snapshot: the phrase map, its last id and the indexes agree while others write
        try:
            cur = c.execute("SELECT id, kind, text FROM phrases")
            while rows := cur.fetchmany(_LOAD_ROWS):
                for pid, kind, text in rows:
                    self._ids[kind][text] = pid
            self._max_id = max((max(ids.values(), default=0) for ids in self._ids), default=0)  # the largest loaded
            for index in self._index:
                self.index_status[index.name] = index.load_or_build(force=reembedded)
        finally:
            c.execute("COMMIT")

    def index_path(self, kind: str) -> Path | None:
        """Where the faiss index of "entity" or "relation" phrases is saved (None for an in-memory memory)."""
        return None if self.path is None else Path(f"{self.path}.{kind}.faiss")

    def save(self) -> None:
        """Write the changed faiss indexes beside the DB (`PhraseIndex.save`: via a temporary file of this process,
        then the fingerprint into the meta table), so the next open loads them instead of rebuilding."""
        if self.path is None:
            return
        for _ in range(3):  # another process may commit phrases between our sync and the save: sync and try again
            self._sync()
            if all([index.save() for index in self._index]):
                return

    def close(self) -> None:
        """Save the indexes (file-backed memory) and close the database; closing twice is harmless.

        If another writer holds the lock past `busy_timeout`, the indexes are not saved (the next open rebuilds them
        from the stored vectors) and closing still succeeds.
        """
        if self._conn is None:
            return
        try:
            self.save()
        except sqlite3.OperationalError as e:
            if "locked" not in str(e):
                raise
        finally:
            self._conn.close()
            self._conn = None

    def __enter__(self: _Store) -> _Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------ plumbing
    def _live(self) -> sqlite3.Connection:
        if self._conn is None:
            raise ValueError(f"this {type(self).__name__} is closed")
        return self._conn

    def _sync(self, force: bool = False) -> None:
        """Pick up phrases another connection committed (phrases are append-only: load ids above ours)."""
        c = self._live()
        version = c.execute("PRAGMA data_version").fetchone()[0]
        if version == self._data_version and not force:
            return
        self._data_version = version
        rows = c.execute("SELECT id, kind, text, vec FROM phrases WHERE id > ? ORDER BY id", (self._max_id,)).fetchall()
        for kind in (ENTITY, RELATION):
            mine = [r for r in rows if r[1] == kind]
            for pid, _, text, _ in mine:
                self._ids[kind][text] = pid
            self._index[kind].add(np.array([r[0] for r in mine], np.int64), vectors([r[3] for r in mine], self.dim))
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
            if c.execute("SELECT COALESCE(MAX(id), 0) FROM phrases").fetchone()[0] > self._max_id:
                self._sync(force=True)  # a commit we were not told of: re-read, never reuse its ids
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
            self._index[kind].add(ids, vecs)

    def _encode(self, texts: list[str]) -> np.ndarray:
        vecs = np.asarray(self.embedder.encode(texts), dtype=np.float32)
        if vecs.shape != (len(texts), self.dim):
            raise ValueError(
                f"embedder {self.embedder.name!r} returned shape {vecs.shape} for {len(texts)} "
                f"texts; expected ({len(texts)}, {self.dim})"
            )
        return unit(vecs)  # cosine = inner product

    def _embed_new(self, triples: list[Triple]) -> list[dict[str, np.ndarray]]:
        """Before the write lock: vectors of the phrases not stored yet, per kind, so the lock is held for SQL only."""
        self._sync()
        texts = ([x for t in triples for x in (t[0], t[2])], [t[1] for t in triples])
        out: list[dict[str, np.ndarray]] = [{}, {}]
        for kind in (ENTITY, RELATION):
            new = [t for t in dict.fromkeys(texts[kind]) if t not in self._ids[kind]]
            for chunk in chunks(new, _EMBED_CHUNK):
                out[kind].update(zip(chunk, self._encode(list(chunk))))
        return out

    def _reread(self, kind: int, texts: list[str]) -> None:
        """Inside a transaction, after a unique-constraint conflict: phrases among `texts` that another connection
        stored but we missed, taken as theirs (ids and vectors)."""
        for chunk in chunks(texts, SQL_CHUNK):
            rows = self._conn.execute(
                f"SELECT id, text, vec FROM phrases WHERE kind = ? AND text IN ({marks(len(chunk))})", [kind, *chunk]
            ).fetchall()
            for pid, text, _ in rows:
                self._ids[kind][text] = pid
            if rows:  # committed by them: indexed now, whatever becomes of our transaction
                self._index[kind].add(np.array([r[0] for r in rows], np.int64), vectors([r[2] for r in rows], self.dim))

    def _phrase_ids(self, kind: int, texts: Iterable[str], vecs: dict[str, np.ndarray]) -> dict[str, int]:
        """Inside a transaction: ids for `texts`, inserting only the new ones (vectors from `_embed_new`)."""
        known = self._ids[kind]
        new = [t for t in dict.fromkeys(texts) if t not in known]
        for chunk in chunks(new, _EMBED_CHUNK):
            try:
                self._insert_phrases(kind, list(chunk), vecs)
            except sqlite3.IntegrityError:  # one was stored by another connection and missed by us: re-read, go on
                self._reread(kind, list(chunk))
                self._insert_phrases(kind, [t for t in chunk if t not in known], vecs)
        return known

    def _insert_phrases(self, kind: int, texts: list[str], vecs: dict[str, np.ndarray]) -> None:
        """Inside a transaction: insert new phrases with the next ids; on a conflict nothing of them is inserted."""
        if not texts:
            return
        missing = [t for t in texts if t not in vecs]
        if missing:  # not embedded beforehand (should not happen): embed now rather than fail
            vecs = {**vecs, **dict(zip(missing, self._encode(missing)))}
        chunk_vecs = np.stack([vecs[t] for t in texts]).astype(np.float32, copy=False)
        ids = np.arange(self._max_id + 1, self._max_id + 1 + len(texts), dtype=np.int64)
        c = self._conn
        c.execute("SAVEPOINT new_phrases")
        try:
            c.executemany(
                "INSERT INTO phrases (id, kind, text, vec) VALUES (?, ?, ?, ?)",
                zip(ids.tolist(), [kind] * len(texts), texts, (v.tobytes() for v in chunk_vecs)),
            )
        except sqlite3.IntegrityError:
            c.execute("ROLLBACK TO new_phrases")
            c.execute("RELEASE new_phrases")
            raise
        c.execute("RELEASE new_phrases")
        self._ids[kind].update(zip(texts, ids.tolist()))
        self._max_id += len(texts)
        self._added.append((kind, texts, ids, chunk_vecs))

    def _insert(self, triples: list[Triple], vecs: list[dict[str, np.ndarray]]) -> int:
        """Inside a transaction: store the (clean) triples; returns how many were new."""
        ent = self._phrase_ids(ENTITY, [x for t in triples for x in (t[0], t[2])], vecs[ENTITY])
        rel = self._phrase_ids(RELATION, [t[1] for t in triples], vecs[RELATION])
        before = self._conn.total_changes
        self._conn.executemany(
            "INSERT OR IGNORE INTO triples (s, r, o) VALUES (?, ?, ?)",
            [(ent[s], rel[r], ent[o]) for s, r, o in triples],
        )
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

        Raises, and writes nothing: ValueError naming any bad triple (not three strings, an empty or invisible term,
        a lone surrogate); sqlite3.OperationalError naming the file if another writer held the lock past
        `busy_timeout`, sqlite3.DatabaseError naming it if the file is damaged; the embedder's own exception.
        """
        clean = [clean_triple(t, f"{i} ") for i, t in enumerate(triples)]
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
        old_t, new_t = clean_triple(old, "old "), clean_triple(new, "new ")
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
        t = clean_triple((subject, relation, new_object))
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

    def __iter__(self) -> Iterator[Triple]:
        """The triples in write order, streamed from SQLite (take `list(mem)` first if you write meanwhile)."""
        cur = self._live().execute(f"{SELECT_TEXT} ORDER BY t.id")
        while rows := cur.fetchmany(10_000):
            yield from (Triple(*r) for r in rows)

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
        where = ":memory:" if self.path is None else str(self.path)
        if self._conn is None:
            return f"{type(self).__name__}({where!r}, closed)"
        return (
            f"{type(self).__name__}({len(self)} triples, {len(self._ids[ENTITY])} entities, "
            f"{len(self._ids[RELATION])} relations, index={self.index_kind!r}, "
            f"embedder={self.embedder.name!r}, path={where!r})"
        )
