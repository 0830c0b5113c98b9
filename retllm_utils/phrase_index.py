"""Phrase indexes: one faiss index per phrase kind (entity, relation) over the vectors stored in SQLite.

They serve the nearest-phrase lookup both papers put in front of the triple table: RET-LLM's LSH index (§3.1
memory; the fuzzy reads behind notebook 03's Figures 3–5) and MemLLM's HNSW index (§3.1 read; the memory reads
of notebooks 04 and 07, Table 1), with an exact `flat` index as reference. Notebook 08 (memory at scale) measures
the three kinds: lookup latency, recall@1 against exact search, reopen time
(benchmarks/figures/08_memory_scaling.png, 08_memory_sweep.png).

The SQLite `phrases` table stays the truth. A faiss id is a phrase id; every candidate the index returns is
re-scored with the exact cosine of its stored vector, so `lsh` and `hnsw` change which candidates are seen, never
their scores. A saved index is used only while its fingerprint in the `meta` table (spec, count, last id, sha1 of
the file) matches the table and the file; otherwise it is rebuilt from the stored vectors, without re-embedding.
A save writes a temporary file of its own process, then, holding the database's write lock, replaces the index file
and its fingerprint together; temporary files of processes that died are removed.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
import secrets
import sqlite3
import time
from pathlib import Path
from typing import Iterator, Sequence

import faiss
import numpy as np

__all__ = ["PhraseIndex", "INDEX_KINDS", "KINDS", "ENTITY", "RELATION"]

INDEX_KINDS = ("flat", "lsh", "hnsw")
KINDS = ("entity", "relation")  # the `kind` column of the phrases table, by position
ENTITY, RELATION = 0, 1
SQL_CHUNK = 5000  # ids per `IN (...)`: well under SQLite's 32766 variables
_REBUILD_ROWS = 50_000  # stored vectors read at a time when rebuilding

# a phrase still used by some triple (deleted facts leave their phrases behind, unused)
_USED = (
    "(EXISTS (SELECT 1 FROM triples WHERE s = p.id) OR EXISTS (SELECT 1 FROM triples WHERE o = p.id))",
    "EXISTS (SELECT 1 FROM triples WHERE r = p.id)",
)


def chunks(seq: Sequence, n: int) -> Iterator[Sequence]:
    """Slices of at most n items, to keep SQL statements and encoder batches bounded."""
    for i in range(0, len(seq), n):
        yield seq[i : i + n]


def marks(n: int) -> str:
    """n `?` placeholders for an `IN (...)` list."""
    return ",".join("?" * n)


def vectors(blobs: Sequence[bytes], dim: int) -> np.ndarray:
    """Stored float32 BLOBs as one (n, dim) array, so nothing is re-embedded."""
    return np.frombuffer(b"".join(blobs), np.float32).reshape(len(blobs), dim)


def get_meta(conn: sqlite3.Connection, key: str) -> str | None:
    """A value of the meta table, which holds the embedder's name and each index's fingerprint."""
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else row[0]


def set_meta(conn: sqlite3.Connection, items: dict[str, str]) -> None:
    """Store meta values beside the data they describe (same database, same durability)."""
    conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", items.items())


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
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


def sha1(path: Path) -> str:
    """The file's hash, so a saved index that was replaced or damaged is never trusted."""
    h = hashlib.sha1()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def _alive(pid: int) -> bool:
    """Whether a process with this id runs (on Windows, where signal 0 would kill it, always assumed)."""
    if os.name == "nt":
        return True
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temps(file: Path, legacy_age_s: float = 600.0) -> None:
    """Delete temporary index files whose writer died (`<file>.<pid>-<tag>.tmp`), and an old shared `<file>.tmp`."""
    for tmp in file.parent.glob(f"{glob.escape(file.name)}.*.tmp"):
        pid = tmp.name[len(file.name) + 1 :].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            tmp.unlink(missing_ok=True)
    legacy = file.with_name(file.name + ".tmp")  # the one name every process shared before
    with contextlib.suppress(FileNotFoundError):
        if time.time() - legacy.stat().st_mtime > legacy_age_s:
            legacy.unlink()


class PhraseIndex:
    """The faiss index of one phrase kind: candidates for the nearest stored phrases, scored exactly from SQLite.

    `kind`: ENTITY or RELATION. `file`: where the index is saved (None: in memory only). `index_kind`, one of
    INDEX_KINDS: "flat" (exact inner product), "lsh" (IndexLSH, `lsh_nbits` bits, as RET-LLM) or "hnsw"
    (IndexHNSWFlat, `hnsw_m` links, inner product, as MemLLM); the caller checks it.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        kind: int,
        dim: int,
        index_kind: str,
        file: Path | None,
        *,
        lsh_nbits: int,
        hnsw_m: int,
    ):
        self.conn, self.kind, self.name, self.dim = conn, kind, KINDS[kind], dim
        self.index_kind, self.file, self.lsh_nbits, self.hnsw_m = index_kind, file, lsh_nbits, hnsw_m
        self.dirty = False  # holds vectors the saved file lacks
        self.max_id = 0  # the largest phrase id indexed: with ntotal, what a save's fingerprint claims
        self.index: faiss.Index | None = None  # IndexIDMap: faiss ids = phrase ids
        self.inner: faiss.Index | None = None  # the wrapped index (HNSW's efSearch is set on it)

    @property
    def ntotal(self) -> int:
        """How many phrase vectors the index holds (used or not)."""
        return self.index.ntotal

    def spec(self) -> str:
        """What was built, so an index saved with other settings is not loaded."""
        extra = {"flat": "", "lsh": f":nbits={self.lsh_nbits}", "hnsw": f":M={self.hnsw_m}"}[self.index_kind]
        return f"{self.index_kind}{extra}:d={self.dim}"

    def _table_state(self) -> tuple[int, int]:
        """(count, last id) of this kind's phrases: phrases are append-only, so these two date the table."""
        return self.conn.execute(
            "SELECT COUNT(*), COALESCE(MAX(id), 0) FROM phrases WHERE kind = ?", (self.kind,)
        ).fetchone()

    def _new(self) -> None:
        """An empty index wrapped in an IDMap, so faiss ids are the phrase table's ids."""
        if self.index_kind == "flat":
            inner = faiss.IndexFlatIP(self.dim)
        elif self.index_kind == "lsh":
            # the rotation's QR is barrier-bound: 2 threads on 2 busy cores took 70 s, not 0.4 s
            with one_thread():
                # fixed-seed random rotation: no training
                inner = faiss.IndexLSH(self.dim, self.lsh_nbits, True, False)
        else:
            inner = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        self.inner, self.index = inner, faiss.IndexIDMap(inner)

    def _load_saved(self) -> str | None:
        """Load the saved file if it matches the table and its fingerprint; else say why not."""
        saved = json.loads(get_meta(self.conn, f"index.{self.name}") or "null")
        n, max_id = self._table_state()
        if not self.file.exists():
            return "missing"
        if saved is None or saved.get("spec") != self.spec():
            return "other index kind"
        if (saved.get("n"), saved.get("max_id")) != (n, max_id):
            return "stale"
        if saved.get("sha1") != sha1(self.file):
            return "file changed"
        try:
            index = faiss.read_index(str(self.file))
        except RuntimeError:
            return "unreadable"
        if index.ntotal != n or index.d != self.dim:
            return "stale"
        self.index, self.inner = index, faiss.downcast_index(faiss.downcast_index(index).index)
        self.max_id = max_id
        return None

    def load_or_build(self, force: bool = False) -> str:
        """Load the saved index if it matches (count, last id, file hash, spec), else rebuild it from the table.

        Returns the status shown in `TripleMemory.index_status`: "loaded", "built" (in memory) or "rebuilt (why)".
        `force` (after re-embedding) rebuilds whatever the file says.
        """
        if self.file is not None:
            remove_stale_temps(self.file)
        why = "in-memory" if self.file is None else "reembedded" if force else self._load_saved()
        if why is None:
            self.dirty = False
            return "loaded"
        self._new()
        self.max_id = 0
        cur = self.conn.execute("SELECT id, vec FROM phrases WHERE kind = ? ORDER BY id", (self.kind,))
        while rows := cur.fetchmany(_REBUILD_ROWS):
            self.add(np.fromiter((r[0] for r in rows), np.int64, len(rows)), vectors([r[1] for r in rows], self.dim))
        self.dirty = self.file is not None
        return f"rebuilt ({why})" if self.file is not None else "built"

    def add(self, ids: np.ndarray, vecs: np.ndarray) -> None:
        """Index committed phrases (ids as in the table); the file is rewritten at the next `save`."""
        if len(ids):
            self.index.add_with_ids(np.ascontiguousarray(vecs, np.float32), ids)
            self.max_id = max(self.max_id, int(np.max(ids)))
            self.dirty = True

    def save(self) -> bool:
        """Write the index if it changed, under the write lock with its fingerprint; False if the table moved on.

        The file goes to a temporary name of this process first; then, holding the database's write lock, it replaces
        the index file and the fingerprint row is written, only if the table still holds exactly what the index does
        (else nothing is replaced and it stays dirty: sync and save again).
        """
        if self.file is None or not self.dirty:
            return True
        tmp = self.file.with_name(f"{self.file.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            faiss.write_index(self.index, str(tmp))
            digest = sha1(tmp)
            own = not self.conn.in_transaction
            if own:
                self.conn.execute("BEGIN IMMEDIATE")  # one saver at a time: the file and its row agree
            try:
                n, max_id = self._table_state()
                saved = (n, max_id) == (self.index.ntotal, self.max_id)
                if saved:
                    os.replace(tmp, self.file)
                    fingerprint = {"spec": self.spec(), "n": n, "max_id": max_id, "sha1": digest}
                    set_meta(self.conn, {f"index.{self.name}": json.dumps(fingerprint)})
                if own:
                    self.conn.execute("COMMIT")
            except BaseException:
                if own and self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                raise
        finally:
            tmp.unlink(missing_ok=True)
        self.dirty = not saved
        return saved

    def used(self, pid: int) -> bool:
        """Whether some triple still uses the phrase: unused phrases keep their vectors but match nothing."""
        return bool(self.conn.execute(f"SELECT {_USED[self.kind]} FROM phrases p WHERE p.id = ?", (pid,)).fetchone()[0])

    def scored(self, ids: Sequence[int], vec: np.ndarray) -> list[tuple[int, str, float, bool]]:
        """(id, text, exact cosine, still used) per phrase id, best first: the index only proposes candidates."""
        out = []
        for chunk in chunks(ids, SQL_CHUNK):
            rows = self.conn.execute(
                f"SELECT p.id, p.text, p.vec, {_USED[self.kind]} FROM phrases p WHERE p.id IN ({marks(len(chunk))})",
                list(chunk),
            ).fetchall()
            if rows:
                cos = vectors([r[2] for r in rows], self.dim) @ vec
                out += [(r[0], r[1], float(c), bool(r[3])) for r, c in zip(rows, cos)]
        return sorted(out, key=lambda x: (-x[2], x[0]))

    def search(
        self, vec: np.ndarray, min_cos: float, nearest_only: bool, ef_search: int = 64, limit: int | None = None
    ) -> list[tuple[int, str, float]]:
        """Used phrases with exact cosine >= min_cos, best first: only the best if `nearest_only`, the best `limit`
        if given, else all.

        Asks the index for k candidates and widens k while the answer may lie beyond them: for the nearest (or
        `limit`), while fewer are still used; for all above min_cos, while every candidate passed. `ef_search`:
        HNSW's efSearch (at least k).
        """
        n = self.index.ntotal
        want = 1 if nearest_only else limit
        k = min(max(16, 2 * want) if want else 64, n)
        while k > 0:
            if self.index_kind == "hnsw":
                self.inner.hnsw.efSearch = max(ef_search, k)
            with one_thread():
                labels = self.index.search(vec[None, :], k)[1][0]
            scored = self.scored([int(i) for i in labels if i >= 0], vec)
            passing = [(i, t, c) for i, t, c, used in scored if used and c >= min_cos]
            if want and len(passing) >= want:
                return passing[:want]
            if k >= n or (not want and any(c < min_cos for _, _, c, _ in scored)):
                return passing
            k = min(4 * k, n)
        return []
