"""The SQLite backend: `SqliteStore`, the `TripleStore` under `memory.TripleMemory` (the papers' memory).

One SQLite database holds the triples, every distinct entity and relation phrase, and each phrase's vector as a
float32 BLOB; `phrase_index` keeps a faiss index per kind over those vectors, saved beside the file. This is the
part of the memory that survives a restart (notebooks 03, 07, 08). Writes are all or nothing (`_transaction`);
other connections' commits are picked up (`_sync`, `PRAGMA data_version`).

Several processes may read and write one file: each write is one `BEGIN IMMEDIATE` transaction (new phrases are
embedded before it, so the lock is held for SQL only), a writer waits up to `busy_timeout` seconds for another's,
and a phrase another process stored is re-read, never inserted twice. Database errors name the file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from ..api import Triple
from ..phrase_index import ENTITY, KINDS, RELATION, SQL_CHUNK, PhraseIndex, chunks, get_meta, marks, set_meta, vectors
from ..triple_store import BUSY_TIMEOUT, EMBED_CHUNK, SELECT_TEXT, TripleStore

__all__ = ["SqliteStore", "NamedConnection"]

_LOAD_ROWS = 50_000  # phrase rows read at a time when opening

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS phrases (id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, text TEXT NOT NULL,
                                    vec BLOB NOT NULL, UNIQUE (kind, text));
CREATE TABLE IF NOT EXISTS triples (id INTEGER PRIMARY KEY, s INTEGER NOT NULL, r INTEGER NOT NULL,
                                    o INTEGER NOT NULL, UNIQUE (s, r, o));
CREATE INDEX IF NOT EXISTS triples_ro ON triples (r, o);
CREATE INDEX IF NOT EXISTS triples_os ON triples (o, s);
"""


def _empty_file(path: Path) -> bool:
    """A 0-byte file with no write-ahead log beside it: no SQLite database, though SQLite would open it as one."""
    wal = Path(f"{path}-wal")
    return path.is_file() and path.stat().st_size == 0 and not (wal.exists() and wal.stat().st_size > 0)


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


class SqliteStore(TripleStore):
    """Triples and phrases in SQLite (a file, or in memory), phrase vectors in two faiss `PhraseIndex`es.

    Opening, the embedder check, transactions, picking up other connections' writes; the writes, inspection and
    IO are `TripleStore`'s, the papers' reads `memory.MemoryReads`'. An existing 0-byte file is refused (it is no
    memory: a wrong path or a truncated copy) unless `create=True`; a missing file is created. `busy_timeout`:
    seconds a write waits for another connection's write transaction.
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
        super().__init__(embedder, index, hnsw_m)
        self.lsh_nbits = lsh_nbits or 2 * self.dim  # more bits: better candidates, bigger index
        self.path = None if path is None else Path(path)
        self.where = ":memory:" if path is None else str(path)
        # per kind: "loaded" or "rebuilt (why)", for notebooks and tests
        self.index_status: dict[str, str] = {}
        if self.path is not None and not create and _empty_file(self.path):
            raise ValueError(
                f"{self.path} is an empty file (0 bytes), not a memory; pass create=True to make a new memory there"
            )
        # isolation_level=None: transactions are explicit (BEGIN IMMEDIATE ... COMMIT) so a batch is all or nothing
        self._conn: sqlite3.Connection | None = sqlite3.connect(
            self.where, isolation_level=None, timeout=busy_timeout, factory=NamedConnection
        )
        self._conn.where = self.where
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
        reembedded = self._check_embedder(reembed)
        # before the snapshot: later commits sync
        self._data_version = c.execute("PRAGMA data_version").fetchone()[0]
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
        # one read snapshot: the phrase map, its last id and the indexes agree while others write
        c.execute("BEGIN")
        try:
            cur = c.execute("SELECT id, kind, text FROM phrases")
            while rows := cur.fetchmany(_LOAD_ROWS):
                for pid, kind, text in rows:
                    self._ids[kind][text] = pid
            # the largest loaded
            self._max_id = max((max(ids.values(), default=0) for ids in self._ids), default=0)
            for index in self._index:
                self.index_status[index.name] = index.load_or_build(force=reembedded)
        finally:
            c.execute("COMMIT")

    def _check_embedder(self, reembed: bool) -> bool:
        """A DB built with another encoder has vectors of another space: refuse, or re-encode (True) when asked."""
        conn, name, dim = self._conn, str(self.embedder.name), str(self.dim)
        old_name, old_dim = get_meta(conn, "embedder_name"), get_meta(conn, "embedder_dim")
        n = conn.execute("SELECT COUNT(*) FROM phrases").fetchone()[0]
        if (old_name, old_dim) == (name, dim):
            return False
        if not n:  # a new, empty memory
            set_meta(conn, {"embedder_name": name, "embedder_dim": dim})
            return False
        if not reembed:
            raise self._other_embedder(old_name, old_dim, n)
        rows = conn.execute("SELECT id, text FROM phrases ORDER BY id").fetchall()
        conn.execute("BEGIN IMMEDIATE")
        try:
            for chunk in chunks(rows, EMBED_CHUNK):
                vecs = self._encode([t for _, t in chunk])
                conn.executemany(
                    "UPDATE phrases SET vec = ? WHERE id = ?", [(v.tobytes(), pid) for (pid, _), v in zip(chunk, vecs)]
                )
            set_meta(conn, {"embedder_name": name, "embedder_dim": dim})
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return True

    def index_path(self, kind: str) -> Path | None:
        """Where the faiss index of "entity" or "relation" phrases is saved (None for an in-memory memory)."""
        return None if self.path is None else Path(f"{self.path}.{kind}.faiss")

    def save(self) -> None:
        """Write the changed faiss indexes beside the DB (`PhraseIndex.save`: via a temporary file of this process,
        then the fingerprint into the meta table), so the next open loads them instead of rebuilding."""
        if self.path is None:
            return
        # another process may commit phrases between our sync and the save: sync and try again
        for _ in range(3):
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

    # ------------------------------------------------------------------------------------------ plumbing
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
        for chunk in chunks(new, EMBED_CHUNK):
            try:
                self._insert_phrases(kind, list(chunk), vecs)
            # one was stored by another connection and missed by us: re-read, go on
            except sqlite3.IntegrityError:
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

    def _insert_rows(self, rows: list[tuple[int, int, int]]) -> int:
        """Inside a transaction: insert (s, r, o) id rows, ignoring stored ones; returns how many were new."""
        before = self._conn.total_changes
        self._conn.executemany("INSERT OR IGNORE INTO triples (s, r, o) VALUES (?, ?, ?)", rows)
        return self._conn.total_changes - before

    def __iter__(self) -> Iterator[Triple]:
        """The triples in write order, streamed from SQLite (take `list(mem)` first if you write meanwhile)."""
        cur = self._live().execute(f"{SELECT_TEXT} ORDER BY t.id")
        while rows := cur.fetchmany(10_000):
            yield from (Triple(*r) for r in rows)
