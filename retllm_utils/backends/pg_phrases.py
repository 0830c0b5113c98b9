"""What `backends.postgres` puts where the SQLite backend has its own pieces: a connection that takes SQLite's `?`
placeholders (so `TripleStore`'s and `MemoryReads`' SQL runs unchanged), the phrase maps asked of the server, and
the nearest-phrase search in SQL with pgvector, as `phrase_index.PhraseIndex` does it with faiss.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import psycopg

from ..phrase_index import _USED, KINDS
from ..triple_store import TripleStore

__all__ = ["QmarkConnection", "PhraseIds", "PgPhraseIndex", "HNSW_MAX_EF", "set_meta"]

HNSW_MAX_EF = 1000  # pgvector's ceiling for hnsw.ef_search: beyond it the search scans every vector


def _named(e: psycopg.Error, where: str) -> psycopg.Error:
    """The same error, its message prefixed with the memory (server and schema), once."""
    if where in str(e):
        return e
    try:
        return type(e)(f"{where}: {e}")
    except TypeError:
        return e


class QmarkConnection(psycopg.Connection):
    """A psycopg connection that takes SQLite's `?` placeholders, so the shared SQL runs on it unchanged, and whose
    errors name the memory. The shared SQL holds no literal `?` or `%`."""

    where = ""

    def execute(self, query: Any, params: Any = None, **kw: Any) -> psycopg.Cursor:
        if params is not None and isinstance(query, str):
            query = query.replace("?", "%s")
        try:
            return super().execute(query, params, **kw)
        except psycopg.Error as e:
            raise _named(e, self.where) from e


def set_meta(conn: QmarkConnection, items: dict[str, str]) -> None:
    """Store meta values (the embedder, the format) in the memory's own schema."""
    for key, value in items.items():
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )


class PhraseIds:
    """text -> phrase id of one kind, asked of the server: what the SQLite store's `_ids[kind]` holds in RAM."""

    def __init__(self, memory: TripleStore, kind: int):
        self.memory, self.kind = memory, kind

    def get(self, text: str, default: Any = None) -> Any:
        if "\x00" in text:  # PostgreSQL text cannot hold it, so no phrase is it
            return default
        row = (
            self.memory._live()
            .execute(f"SELECT id FROM phrases WHERE kind = {self.kind} AND text = ?", (text,))
            .fetchone()
        )
        return default if row is None else row[0]

    def __getitem__(self, text: str) -> int:
        pid = self.get(text)
        if pid is None:
            raise KeyError(text)
        return pid

    def __contains__(self, text: Any) -> bool:
        return isinstance(text, str) and self.get(text) is not None

    def __len__(self) -> int:
        return self.memory._live().execute(f"SELECT COUNT(*) FROM phrases WHERE kind = {self.kind}").fetchone()[0]


class PgPhraseIndex:
    """One phrase kind's nearest-phrase search in SQL, as `phrase_index.PhraseIndex` does it with faiss.

    "hnsw": pgvector's HNSW index proposes candidates, k widened while the answer may lie beyond them (past
    `HNSW_MAX_EF` every vector is scanned); "flat": every vector is scanned. Scores are the exact inner products of
    the stored vectors, so the index changes which candidates are seen, never their scores.
    """

    def __init__(self, memory: TripleStore, kind: int, index_kind: str):
        self.memory, self.kind, self.name, self.index_kind = memory, kind, KINDS[kind], index_kind
        self._ef: int | None = None  # the session's hnsw.ef_search, set only when it changes

    @property
    def ntotal(self) -> int:
        """How many phrase vectors of this kind are stored (used or not)."""
        return len(PhraseIds(self.memory, self.kind))

    def used(self, pid: int) -> bool:
        """Whether some triple still uses the phrase: unused phrases keep their vectors but match nothing."""
        sql = f"SELECT {_USED[self.kind]} FROM phrases p WHERE p.id = ?"
        return bool(self.memory._live().execute(sql, (pid,)).fetchone()[0])

    def _exact(self, vec: np.ndarray, min_cos: float, limit: int | None) -> list[tuple[int, str, float]]:
        """Every used phrase with cosine >= min_cos (the best `limit`), best first, by a scan (no index serves it)."""
        sql = (
            f"SELECT id, text, cos FROM (SELECT p.id, p.text, (p.vec <#> ?) * -1 AS cos FROM phrases p "
            f"WHERE p.kind = {self.kind} AND {_USED[self.kind]}) c WHERE cos >= ? ORDER BY cos DESC, id"
            + (f" LIMIT {int(limit)}" if limit else "")
        )
        return [(i, t, float(c)) for i, t, c in self.memory._live().execute(sql, (vec, min_cos)).fetchall()]

    def search(
        self, vec: np.ndarray, min_cos: float, nearest_only: bool, ef_search: int = 64, limit: int | None = None
    ) -> list[tuple[int, str, float]]:
        """Used phrases with exact cosine >= min_cos, best first (only the best if `nearest_only`, the best `limit`
        if given)."""
        want = 1 if nearest_only else limit
        if self.index_kind == "flat":
            return self._exact(vec, min_cos, want)
        conn = self.memory._live()
        k = max(16, 2 * want) if want else 64
        while max(ef_search, k) <= HNSW_MAX_EF:
            ef = max(ef_search, k)
            if ef != self._ef:
                conn.execute(f"SET hnsw.ef_search = {int(ef)}")
                self._ef = ef
            rows = conn.execute(
                f"SELECT p.id, p.text, p.cos, {_USED[self.kind]} FROM (SELECT id, text, (vec <#> ?) * -1 AS cos "
                f"FROM phrases WHERE kind = {self.kind} ORDER BY vec <#> ? LIMIT {k}) p",
                (vec, vec),
            ).fetchall()
            scored = sorted(rows, key=lambda r: (-r[2], r[0]))
            passing = [(i, t, float(c)) for i, t, c, used in scored if used and c >= min_cos]
            if want and len(passing) >= want:
                return passing[:want]
            if len(rows) < k or (not want and any(c < min_cos for _, _, c, _ in rows)):
                return passing
            k *= 4
        return self._exact(vec, min_cos, want)

    def ensure(self, hnsw_m: int) -> None:
        """Inside the opening transaction: the HNSW index of this kind, built unless it exists (index="hnsw")."""
        if self.index_kind == "hnsw":
            self.memory._conn.execute(
                f"CREATE INDEX IF NOT EXISTS phrases_{self.name}_hnsw ON phrases USING hnsw (vec vector_ip_ops) "
                f"WITH (m = {int(hnsw_m)}, ef_construction = {max(64, 2 * int(hnsw_m))}) WHERE kind = {self.kind}"
            )
