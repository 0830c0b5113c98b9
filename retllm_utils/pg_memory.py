"""The triple memory on PostgreSQL + pgvector: `PgTripleMemory`, the same API and reads as `memory.TripleMemory`.

For memories past one machine (MemLLM's held 49.7M triples behind a server): the triples and every distinct phrase
live in tables of one PostgreSQL schema, each phrase's unit vector in a `vector(dim)` column with one HNSW index per
phrase kind (`vector_ip_ops`: inner product on unit vectors = cosine), exact lookups through B-tree indexes. The
papers' reads (RET-LLM exact-then-fuzzy, MemLLM τ / Q_thr) and the write, update and delete logic are
`TripleMemory`'s and `TripleStore`'s own functions, run here over this store's plumbing (`_conn`, `_ids`, `_index`,
`_transaction`, `_insert`), so the two backends cannot drift apart; `tests/test_memory.py` runs on both.

Nothing is cached in the process: every call asks the server, so other processes' commits are seen at once and
opening a memory of any size takes milliseconds. Writers on one memory take turns (a transaction-level advisory
lock, as SQLite's BEGIN IMMEDIATE; a writer waits up to `busy_timeout` seconds); new phrases are embedded before it,
so the lock is held for SQL only; readers never wait. Terms are cleaned as `triple_store.clean_triple` cleans them
(stripped, NFC); a term holding a NUL character, which PostgreSQL text cannot store, raises ValueError naming it.

    server = local_server("runs/pg")             # a private PostgreSQL 16 + pgvector (pgserver); or your server's URI
    mem = PgTripleMemory(server.get_uri(), embedder=load_embedder(), index="hnsw", schema="mw_dev")
    mem.write("Ann Lee", "employed by", "Pfizer")
    mem = open_memory(backend, "runs/mw_dev.sqlite", index="hnsw")   # backend = "sqlite" | "postgres"
"""

from __future__ import annotations

import contextlib
import os
import re
import warnings
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from . import memory_io
from .api import Triple
from .memory import FUZZY_CANDIDATES, Q_THR, TripleMemory, set_thresholds
from .phrase_index import _USED, ENTITY, KINDS, RELATION, chunks, get_meta
from .triple_store import BUSY_TIMEOUT, SELECT_TEXT, TripleStore

__all__ = ["PgTripleMemory", "PG_INDEX_KINDS", "local_server", "open_memory"]

PG_INDEX_KINDS = ("flat", "hnsw")  # pgvector has no LSH index
FORMAT = "retllm-triple-memory-1"  # the meta row that marks a schema as a memory
BULK_PHRASES = 1000  # a batch with this many new phrases of a kind (and a quarter of the table) rebuilds its index
HNSW_MAX_EF = 1000  # pgvector's ceiling for hnsw.ef_search: beyond it the search scans every vector
_EMBED_CHUNK = 8192  # phrases encoded (and held in RAM) at a time
_PAGE = 10_000  # triples per page when iterating
_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")

_TABLES = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS phrases (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, kind SMALLINT NOT NULL,
                                    text TEXT NOT NULL, vec vector({dim}) NOT NULL, UNIQUE (kind, text));
CREATE TABLE IF NOT EXISTS triples (id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, s BIGINT NOT NULL,
                                    r BIGINT NOT NULL, o BIGINT NOT NULL, UNIQUE (s, r, o));
CREATE INDEX IF NOT EXISTS triples_ro ON triples (r, o);
CREATE INDEX IF NOT EXISTS triples_os ON triples (o, s);
"""


def local_server(path: str | os.PathLike, cleanup_mode: str | None = "stop") -> Any:
    """A private PostgreSQL 16 server with pgvector on a data directory (pgserver), started unless running.

    `.get_uri()` is the URI to pass to `PgTripleMemory`. `cleanup_mode`: "stop" stops the server when the last
    process using it exits, None leaves it running, "delete" also deletes the directory (throwaway servers).
    """
    with warnings.catch_warnings():  # platformdirs warns where XDG_RUNTIME_DIR is unset (containers): harmless
        warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
        import pgserver

        path = Path(path).resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        return pgserver.get_server(path, cleanup_mode=cleanup_mode)


def open_memory(
    backend: str, path: str | os.PathLike | None = None, *, dsn: str | None = None, schema: str = "retllm", **kw: Any
) -> Any:
    """A memory of either backend from one switch, so a notebook changes `backend` and nothing else.

    "sqlite": `TripleMemory(path, **kw)` (None: in memory). "postgres": `PgTripleMemory` in `schema` on the server
    at `dsn`, or, without one, on a private server (`local_server`) whose data directory is `<path>.pgdata`.
    """
    if backend == "sqlite":
        return TripleMemory(path, **kw)
    if backend != "postgres":
        raise ValueError(f"backend must be 'sqlite' or 'postgres', got {backend!r}")
    if dsn is None:
        if path is None:
            raise ValueError("a postgres memory needs dsn= (your server) or a path (a private server beside it)")
        dsn = local_server(f"{path}.pgdata").get_uri()
    return PgTripleMemory(dsn, schema=schema, **kw)


def _named(e: psycopg.Error, where: str) -> psycopg.Error:
    """The same error, its message prefixed with the memory (server and schema), once."""
    if where in str(e):
        return e
    try:
        return type(e)(f"{where}: {e}")
    except TypeError:
        return e


class QmarkConnection(psycopg.Connection):
    """A psycopg connection that takes SQLite's `?` placeholders, so `TripleMemory`'s SQL runs on it unchanged,
    and whose errors name the memory. The shared SQL holds no literal `?` or `%`."""

    where = ""

    def execute(self, query: Any, params: Any = None, **kw: Any) -> psycopg.Cursor:
        if params is not None and isinstance(query, str):
            query = query.replace("?", "%s")
        try:
            return super().execute(query, params, **kw)
        except psycopg.Error as e:
            raise _named(e, self.where) from e


def _set_meta(conn: QmarkConnection, items: dict[str, str]) -> None:
    """Store meta values (the embedder, the format) in the memory's own schema."""
    for key, value in items.items():
        conn.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            (key, value),
        )


class PhraseIds:
    """text -> phrase id of one kind, asked of the server: what `TripleStore._ids[kind]` holds in RAM."""

    def __init__(self, memory: PgTripleMemory, kind: int):
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

    def __init__(self, memory: PgTripleMemory, kind: int, index_kind: str):
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


class PgTripleMemory:
    """RET-LLM / MemLLM memory in a PostgreSQL schema with pgvector: `TripleMemory`'s API and semantics.

    `dsn`: a connection URI (`postgresql://user:pw@host/db`, or `local_server(path).get_uri()`). `schema`: the
    PostgreSQL schema holding this memory's tables (created if missing; one database holds many memories). `index`:
    "flat" (exact scan) or "hnsw" (pgvector HNSW, `hnsw_m` links, inner product, as MemLLM; `hnsw_ef_search` at read
    time); pgvector has no LSH. Thresholds (`fuzzy_char` and `fuzzy_candidates` too), `q_thr`, `reembed` and
    `busy_timeout` as in `TripleMemory`; `create` is accepted for the same signature (a missing schema is always
    created). A schema that holds other tables is refused, naming it. Closing is `close()` or a `with` block; there
    is nothing to save.
    """

    # The papers' reads and the write logic are TripleMemory's / TripleStore's own code, over this class's plumbing.
    read = TripleMemory.read
    read_explained = TripleMemory.read_explained
    memllm_search = TripleMemory.memllm_search
    query_memllm = TripleMemory.query_memllm
    _search = TripleMemory._search
    _stand_in = TripleMemory._stand_in
    write = TripleStore.write
    write_many = TripleStore.write_many
    delete = TripleStore.delete
    update = TripleStore.update
    replace_object = TripleStore.replace_object
    __len__ = TripleStore.__len__
    __contains__ = TripleStore.__contains__
    __enter__ = TripleStore.__enter__
    __exit__ = TripleStore.__exit__
    _live = TripleStore._live
    _encode = TripleStore._encode
    _triple_ids = TripleStore._triple_ids
    to_dataframe = memory_io.to_dataframe
    from_dataframe = memory_io.from_dataframe
    to_csv = memory_io.to_csv
    from_csv = memory_io.from_csv
    to_sql = memory_io.to_sql
    from_sql = memory_io.from_sql

    def __init__(
        self,
        dsn: str,
        embedder: Any = None,
        index: str = "flat",
        *,
        schema: str = "retllm",
        tau_entity: float | None = None,
        tau_relation: float | None = None,
        tau_triple: float | None = None,
        fuzzy: float | Mapping[str, float] | None = None,
        fuzzy_char: float | Mapping[str, float] | None = None,
        fuzzy_candidates: int = FUZZY_CANDIDATES,
        q_thr: int = Q_THR,
        reembed: bool = False,
        hnsw_m: int = 32,
        hnsw_ef_search: int = 64,
        create: bool = False,
        busy_timeout: float = BUSY_TIMEOUT,
    ):
        if index not in PG_INDEX_KINDS:
            hint = " (pgvector has no LSH index: use 'hnsw')" if index == "lsh" else ""
            raise ValueError(f"index must be one of {PG_INDEX_KINDS}, got {index!r}{hint}")
        if not _IDENT.fullmatch(schema):
            raise ValueError(f"schema {schema!r} must be a lower-case SQL name (letters, digits, _; at most 63)")
        if embedder is None:
            from .models import load_embedder

            embedder = load_embedder()
        self.embedder, self.index_kind, self.schema, self.hnsw_m = embedder, index, schema, hnsw_m
        self.dim = int(embedder.dim)
        info = psycopg.conninfo.conninfo_to_dict(dsn)
        self.where = f"postgres {info.get('host') or 'localhost'}/{info.get('dbname') or ''} schema {schema}"
        self._lock_name = f"retllm-memory:{schema}"
        set_thresholds(
            self,
            tau_entity=tau_entity,
            tau_relation=tau_relation,
            tau_triple=tau_triple,
            fuzzy=fuzzy,
            fuzzy_char=fuzzy_char,
        )
        self.fuzzy_candidates = fuzzy_candidates
        self.q_thr = q_thr
        self.hnsw_ef_search = hnsw_ef_search
        self._ids = [PhraseIds(self, ENTITY), PhraseIds(self, RELATION)]
        self._index = [PgPhraseIndex(self, ENTITY, index), PgPhraseIndex(self, RELATION, index)]
        self._conn: QmarkConnection | None = QmarkConnection.connect(dsn, autocommit=True)
        self._conn.where = self.where
        try:
            self._open(reembed, busy_timeout)
        except BaseException:
            self._conn.close()
            self._conn = None
            raise

    # ------------------------------------------------------------------------------------------ opening
    def _open(self, reembed: bool, busy_timeout: float) -> None:
        c = self._conn
        c.execute(f"SET lock_timeout = {max(1, int(busy_timeout * 1000))}")  # ms a writer waits for another's
        with c.transaction():  # pgvector once per database: concurrent CREATE EXTENSIONs would collide
            c.execute("SELECT pg_advisory_xact_lock(hashtext('retllm-memory:extension'))")
            c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        ext = c.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'vector'"
        ).fetchone()[0]
        c.execute(f'SET search_path TO "{self.schema}", "{ext}"')  # the shared SQL names tables unqualified
        register_vector(c)
        with c.transaction():  # one opener at a time (creating tables twice at once would collide); writers go on
            c.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (f"{self._lock_name}:open",))
            tables = {
                r[0]
                for r in c.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = ?", (self.schema,)
                ).fetchall()
            }
            if tables and ("meta" not in tables or get_meta(c, "format") != FORMAT):
                raise ValueError(
                    f"{self.where} holds other tables ({', '.join(sorted(tables))}), not a memory; pass another schema="
                )
            if not tables:
                c.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                for stmt in _TABLES.format(dim=self.dim).split(";"):
                    if stmt.strip():
                        c.execute(stmt)
                _set_meta(c, {"format": FORMAT})
            self._check_embedder(reembed)
            for index in self._index:
                index.ensure(self.hnsw_m)
        status = "pgvector hnsw" if self.index_kind == "hnsw" else "exact scan"
        self.index_status = {KINDS[k]: status for k in (ENTITY, RELATION)}

    def _check_embedder(self, reembed: bool) -> None:
        """A memory built with another encoder has vectors of another space: refuse, or re-encode when asked."""
        c = self._conn
        name, dim = str(self.embedder.name), str(self.dim)
        old_name, old_dim = get_meta(c, "embedder_name"), get_meta(c, "embedder_dim")
        if (old_name, old_dim) == (name, dim):
            return
        n = c.execute("SELECT COUNT(*) FROM phrases").fetchone()[0]
        if n and not reembed:
            raise ValueError(
                f"{self.where} was built with embedder {old_name!r} (dim {old_dim}), not {name!r} (dim {dim}); open "
                f"it with that embedder, or pass reembed=True to re-encode its {n} phrases with this one"
            )
        c.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (self._lock_name,))  # no writer meanwhile
        if old_dim is not None and old_dim != dim:  # vector(old_dim) column: retype it (its indexes go with it)
            c.execute("DROP INDEX IF EXISTS phrases_entity_hnsw, phrases_relation_hnsw")
            c.execute("ALTER TABLE phrases DROP COLUMN vec")
            c.execute(f"ALTER TABLE phrases ADD COLUMN vec vector({self.dim})")
        rows = c.execute("SELECT id, text FROM phrases ORDER BY id").fetchall()
        for chunk in chunks(rows, _EMBED_CHUNK):
            vecs = self._encode([t for _, t in chunk])
            with c.cursor() as cur:
                cur.executemany("UPDATE phrases SET vec = %s WHERE id = %s", [(v, i) for (i, _), v in zip(chunk, vecs)])
        c.execute("ALTER TABLE phrases ALTER COLUMN vec SET NOT NULL")
        _set_meta(c, {"embedder_name": name, "embedder_dim": dim})

    def save(self) -> None:
        """Nothing to save: every write is committed on the server (kept for `TripleMemory`'s API)."""
        self._live()

    def close(self) -> None:
        """Close the connection; closing twice is harmless."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # ------------------------------------------------------------------------------------------ plumbing
    def _sync(self, force: bool = False) -> None:
        """Nothing to pick up: every call reads the server, which holds the others' commits."""
        self._live()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[list]:
        """All or nothing, one writer of this memory at a time (the lock waits up to `busy_timeout`)."""
        c = self._live()
        with c.transaction():
            c.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (self._lock_name,))
            yield []

    def _embed_new(self, triples: list[Triple]) -> list[dict[str, np.ndarray]]:
        """Before the write lock: vectors of the phrases not stored yet, per kind, so the lock is held for SQL only."""
        for t in triples:
            for term, role in zip(t, ("subject", "relation", "object")):
                if "\x00" in term:
                    raise ValueError(f"{role} {term!r} in triple {tuple(t)!r} holds a NUL character: not storable")
        c = self._live()
        texts = ([x for t in triples for x in (t[0], t[2])], [t[1] for t in triples])
        out: list[dict[str, np.ndarray]] = [{}, {}]
        for kind in (ENTITY, RELATION):
            uniq = list(dict.fromkeys(texts[kind]))
            stored = {
                r[0] for r in c.execute(f"SELECT text FROM phrases WHERE kind = {kind} AND text = ANY(?)", (uniq,))
            }
            new = [t for t in uniq if t not in stored]
            for chunk in chunks(new, _EMBED_CHUNK):
                out[kind].update(zip(chunk, self._encode(list(chunk))))
        return out

    def _phrase_ids(self, kind: int, texts: Iterable[str], vecs: dict[str, np.ndarray]) -> dict[str, int]:
        """Inside a transaction (holding the write lock): ids for `texts`, inserting only the new ones."""
        c = self._conn
        uniq = list(dict.fromkeys(texts))
        sql = f"SELECT text, id FROM phrases WHERE kind = {kind} AND text = ANY(?)"
        ids = dict(c.execute(sql, (uniq,)).fetchall())
        new = [t for t in uniq if t not in ids]
        if new:
            missing = [t for t in new if t not in vecs]
            if missing:  # not embedded beforehand (stored then? phrases are never deleted): embed now, not fail
                vecs = {**vecs, **dict(zip(missing, self._encode(missing)))}
            rebuild = self._bulk_index(kind, len(new))
            with c.cursor() as cur, cur.copy("COPY phrases (kind, text, vec) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(["smallint", "text", "vector"])
                for t in new:
                    copy.write_row((kind, t, vecs[t]))
            if rebuild:
                c.execute(rebuild)
            ids.update(c.execute(sql, (new,)).fetchall())
        return ids

    def _bulk_index(self, kind: int, n_new: int) -> str | None:
        """Inside a transaction: for a batch that adds at least BULK_PHRASES phrases and a quarter of the table, drop
        the kind's HNSW index and return its definition, to build it again after the COPY.

        pgvector builds an HNSW index ~15x faster than it inserts into one (measured here: 4,000 384-d vectors, m 32,
        4.6 s built after vs 71 s inserted one by one); readers of this memory wait for the rebuild's commit.
        """
        if n_new < BULK_PHRASES:
            return None
        c = self._conn
        name = f"phrases_{KINDS[kind]}_hnsw"
        definition = c.execute("SELECT pg_get_indexdef(to_regclass(?))", (name,)).fetchone()[0]
        if definition is None or 4 * n_new < c.execute("SELECT COALESCE(MAX(id), 0) FROM phrases").fetchone()[0]:
            return None
        c.execute(f"DROP INDEX {name}")
        return definition

    def _insert(self, triples: list[Triple], vecs: list[dict[str, np.ndarray]]) -> int:
        """Inside a transaction: store the (clean) triples in their order; returns how many were new."""
        ent = self._phrase_ids(ENTITY, [x for t in triples for x in (t[0], t[2])], vecs[ENTITY])
        rel = self._phrase_ids(RELATION, [t[1] for t in triples], vecs[RELATION])
        cols = ([ent[s] for s, _, _ in triples], [rel[r] for _, r, _ in triples], [ent[o] for _, _, o in triples])
        return self._conn.execute(
            "INSERT INTO triples (s, r, o) SELECT s, r, o FROM unnest(?::bigint[], ?::bigint[], ?::bigint[]) "
            "WITH ORDINALITY AS x(s, r, o, n) ORDER BY n ON CONFLICT DO NOTHING",
            cols,
        ).rowcount

    # ------------------------------------------------------------------------------------------ inspection
    def __iter__(self) -> Iterator[Triple]:
        """The triples in write order, a page at a time (take `list(mem)` first if you write meanwhile)."""
        last = 0
        sql = SELECT_TEXT.replace("SELECT ", "SELECT t.id, ", 1) + f" WHERE t.id > ? ORDER BY t.id LIMIT {_PAGE}"
        while rows := self._live().execute(sql, (last,)).fetchall():
            yield from (Triple(*r[1:]) for r in rows)
            last = rows[-1][0]

    def __repr__(self) -> str:
        if self._conn is None:
            return f"{type(self).__name__}({self.where!r}, closed)"
        return (
            f"{type(self).__name__}({len(self)} triples, {len(self._ids[ENTITY])} entities, "
            f"{len(self._ids[RELATION])} relations, index={self.index_kind!r}, "
            f"embedder={self.embedder.name!r}, where={self.where!r})"
        )
