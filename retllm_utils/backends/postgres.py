"""The triple memory on PostgreSQL + pgvector: `PgTripleMemory`, the same API and reads as `memory.TripleMemory`.

Beyond both papers, for memories past one machine (MemLLM's held 49.7M triples behind a server): the triples and
every distinct phrase live in tables of one PostgreSQL schema, each phrase's unit vector in a `vector(dim)` column
with one HNSW index per phrase kind (`vector_ip_ops`: inner product on unit vectors = cosine), exact lookups through
B-tree indexes. `PgStore` is a `triple_store.TripleStore`, so the writes, inspection and IO are that class's code,
and `PgTripleMemory` adds `memory.MemoryReads` (RET-LLM exact-then-fuzzy, MemLLM τ / Q_thr), as `TripleMemory` does
on SQLite; the two backends cannot drift apart, and `tests/test_memory.py` runs on both. Importing this module needs
the `postgres` extra (psycopg, pgvector; pgserver for `local_server`); nothing else in the package imports it.

Nothing is cached in the process: every call asks the server, so other processes' commits are seen at once and
opening a memory of any size takes milliseconds. Writers on one memory take turns (a transaction-level advisory
lock, as SQLite's BEGIN IMMEDIATE; a writer waits up to `busy_timeout` seconds); new phrases are embedded before it,
so the lock is held for SQL only; readers never wait. Terms are cleaned and capped as on SQLite
(`triple_store.clean_triple`); a term holding a NUL character, which PostgreSQL text cannot store, raises
ValueError naming it.

    server = local_server("runs/pg")             # a private PostgreSQL 16 + pgvector (pgserver); or your server's URI
    mem = PgTripleMemory(server.get_uri(), embedder=load_embedder(), index="hnsw", schema="mw_dev")
    mem.write("Ann Lee", "employed by", "Pfizer")
    mem = open_memory(backend, "runs/mw_dev.sqlite", index="hnsw")   # backend = "sqlite" | "postgres"
"""

from __future__ import annotations

import contextlib
import os
import re
import time
import warnings
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from ..api import Triple
from ..memory import MemoryReads, TripleMemory
from ..phrase_index import ENTITY, KINDS, RELATION, chunks, get_meta
from ..triple_store import BUSY_TIMEOUT, EMBED_CHUNK, ROLES, SELECT_TEXT, TripleStore
from .pg_phrases import PgPhraseIndex, PhraseIds, QmarkConnection, set_meta

__all__ = ["PgTripleMemory", "PgStore", "PG_INDEX_KINDS", "local_server", "open_memory"]

PG_INDEX_KINDS = ("flat", "hnsw")  # pgvector has no LSH index
FORMAT = "retllm-triple-memory-1"  # the meta row that marks a schema as a memory
# a batch with this many new phrases of a kind (and a quarter of the table) rebuilds its index
BULK_PHRASES = 1000
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
    # platformdirs warns where XDG_RUNTIME_DIR is unset (containers): harmless
    with warnings.catch_warnings():
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


class PgStore(TripleStore):
    """A memory's triples and phrases in one PostgreSQL schema, phrase vectors in pgvector columns.

    Opening (the pgvector extension, the tables, the embedder check, the HNSW indexes), the write lock, phrase and
    triple inserts; the writes, inspection and IO are `TripleStore`'s. Arguments as `PgTripleMemory`'s.
    """

    index_kinds = PG_INDEX_KINDS
    _index_hints = {"lsh": " (pgvector has no LSH index: use 'hnsw')"}
    _where_key = "where"

    def __init__(
        self,
        dsn: str,
        embedder: Any = None,
        index: str = "flat",
        *,
        schema: str = "retllm",
        reembed: bool = False,
        hnsw_m: int = 16,  # pgvector's; 1M-triple bulk load 1.7x m 32's (2-core AMD EPYC), recall@1 0.963 vs 0.975
        create: bool = False,
        busy_timeout: float = BUSY_TIMEOUT,
    ):
        if not _IDENT.fullmatch(schema):
            raise ValueError(f"schema {schema!r} must be a lower-case SQL name (letters, digits, _; at most 63)")
        super().__init__(embedder, index, hnsw_m)
        self.schema = schema
        info = psycopg.conninfo.conninfo_to_dict(dsn)
        self.where = f"postgres {info.get('host') or 'localhost'}/{info.get('dbname') or ''} schema {schema}"
        self._lock_name = f"retllm-memory:{schema}"
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
        # one opener at a time (creating tables twice at once would collide); writers go on
        with c.transaction():
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
                set_meta(c, {"format": FORMAT})
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
            raise self._other_embedder(old_name, old_dim, n)
        c.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (self._lock_name,))  # no writer meanwhile
        # vector(old_dim) column: retype it (its indexes go with it)
        if old_dim is not None and old_dim != dim:
            c.execute("DROP INDEX IF EXISTS phrases_entity_hnsw, phrases_relation_hnsw")
            c.execute("ALTER TABLE phrases DROP COLUMN vec")
            c.execute(f"ALTER TABLE phrases ADD COLUMN vec vector({self.dim})")
        rows = c.execute("SELECT id, text FROM phrases ORDER BY id").fetchall()
        for chunk in chunks(rows, EMBED_CHUNK):
            vecs = self._encode([t for _, t in chunk])
            with c.cursor() as cur:
                cur.executemany("UPDATE phrases SET vec = %s WHERE id = %s", [(v, i) for (i, _), v in zip(chunk, vecs)])
        c.execute("ALTER TABLE phrases ALTER COLUMN vec SET NOT NULL")
        set_meta(c, {"embedder_name": name, "embedder_dim": dim})

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

    def _new_triple(self, t: Any, where: str = "") -> Triple:
        """As on SQLite, and a term holding a NUL character (which PostgreSQL text cannot hold) is refused."""
        clean = super()._new_triple(t, where)
        for term, (role, _) in zip(clean, ROLES):
            if "\x00" in term:
                raise ValueError(f"{role} {term!r} in triple {tuple(clean)!r} holds a NUL character: not storable")
        return clean

    def _unstored(self, kind: int, texts: list[str]) -> list[str]:
        """Those of `texts` not stored as phrases of `kind`, asked of the server."""
        sql = f"SELECT text FROM phrases WHERE kind = {kind} AND text = ANY(?)"
        stored = {r[0] for r in self._live().execute(sql, (texts,))}
        return [t for t in texts if t not in stored]

    def _phrase_ids(self, kind: int, texts: Iterable[str], vecs: dict[str, np.ndarray]) -> dict[str, int]:
        """Inside a transaction (holding the write lock): ids for `texts`, inserting only the new ones."""
        c = self._conn
        uniq = list(dict.fromkeys(texts))
        sql = f"SELECT text, id FROM phrases WHERE kind = {kind} AND text = ANY(?)"
        ids = dict(c.execute(sql, (uniq,)).fetchall())
        new = [t for t in uniq if t not in ids]
        if new:
            missing = [t for t in new if t not in vecs]
            # not embedded beforehand (stored then? phrases are never deleted): embed now, not fail
            if missing:
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

    @contextlib.contextmanager
    def bulk(self, maintenance_work_mem: str = "1GB", workers: int | None = None) -> Iterator[PgStore]:
        """A bulk load, as pgvector advises (load first, index after): the `write_many` calls inside the block are
        one transaction holding this memory's write lock, with the HNSW indexes dropped first and built once at the
        end, with `maintenance_work_mem` and `workers` parallel maintenance workers (None: the server's setting).

        The tables are analyzed at the end (a load this large leaves the planner without statistics until
        autovacuum comes). All or nothing: an exception in the block, or the process killed, leaves the memory as it
        was. DROP INDEX locks the phrase table until the commit, so readers of this memory wait for it and then see
        the new state: never a half-loaded memory or a half-built index.
        """
        if not re.fullmatch(r"[1-9][0-9]*(kB|MB|GB)", maintenance_work_mem):
            raise ValueError(f"maintenance_work_mem must read like '1GB' or '512MB'; got {maintenance_work_mem!r}")
        if workers is not None and not (isinstance(workers, int) and workers >= 0):
            raise ValueError(f"workers must be an int >= 0 or None; got {workers!r}")
        c = self._live()
        with c.transaction():
            c.execute("SELECT pg_advisory_xact_lock(hashtext(?))", (self._lock_name,))
            rebuild = []
            for kind in (ENTITY, RELATION):
                name = f"phrases_{KINDS[kind]}_hnsw"
                definition = c.execute("SELECT pg_get_indexdef(to_regclass(?))", (name,)).fetchone()[0]
                if definition is not None:
                    c.execute(f"DROP INDEX {name}")
                    rebuild.append(definition)
            t0 = time.perf_counter()
            yield self  # an exception here rolls the transaction back: indexes and rows as before
            t1 = time.perf_counter()
            c.execute(f"SET LOCAL maintenance_work_mem = '{maintenance_work_mem}'")
            if workers is not None:
                c.execute(f"SET LOCAL max_parallel_maintenance_workers = {workers}")
            for definition in rebuild:
                c.execute(definition)
            t2 = time.perf_counter()
            c.execute("ANALYZE phrases")  # without statistics exact reads took 2.8-4.2 ms p50 at 1M, after it 0.74
            c.execute("ANALYZE triples")
            # where a load's time goes (the benchmark reports it): the rows, the index builds, the statistics
            self.last_bulk = {"rows_s": t1 - t0, "index_s": t2 - t1, "analyze_s": time.perf_counter() - t2}

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

    def _insert_rows(self, rows: list[tuple[int, int, int]]) -> int:
        """Inside a transaction: insert (s, r, o) id rows in their order, ignoring stored ones; how many were new."""
        return self._conn.execute(
            "INSERT INTO triples (s, r, o) SELECT s, r, o FROM unnest(?::bigint[], ?::bigint[], ?::bigint[]) "
            "WITH ORDINALITY AS x(s, r, o, n) ORDER BY n ON CONFLICT DO NOTHING",
            [list(col) for col in zip(*rows)],
        ).rowcount

    def __iter__(self) -> Iterator[Triple]:
        """The triples in write order, a page at a time (take `list(mem)` first if you write meanwhile)."""
        last = 0
        sql = SELECT_TEXT.replace("SELECT ", "SELECT t.id, ", 1) + f" WHERE t.id > ? ORDER BY t.id LIMIT {_PAGE}"
        while rows := self._live().execute(sql, (last,)).fetchall():
            yield from (Triple(*r[1:]) for r in rows)
            last = rows[-1][0]


class PgTripleMemory(MemoryReads, PgStore):
    """RET-LLM / MemLLM memory in a PostgreSQL schema with pgvector: `TripleMemory`'s API and semantics.

    `PgTripleMemory(dsn, embedder=None, index="flat", *, schema="retllm", <read options>, reembed=False, hnsw_m=16,
    create=False, busy_timeout=60)`. `dsn`: a connection URI (`postgresql://user:pw@host/db`, or
    `local_server(path).get_uri()`). `schema`: the PostgreSQL schema holding this memory's tables (created if
    missing; one database holds many memories). `index`: "flat" (exact scan) or "hnsw" (pgvector HNSW, `hnsw_m`
    links, inner product, as MemLLM; 16, pgvector's default, where the SQLite backend's faiss index uses 32:
    building the graph is most of a bulk load's time here; `hnsw_ef_search` at read time); pgvector has no LSH. The
    read options (thresholds, `fuzzy_candidates`, `q_thr`) are `MemoryReads`', `reembed` and `busy_timeout` as in
    `TripleMemory`;
    `create` is accepted for the same signature (a missing schema is always created). A schema that holds other
    tables is refused, naming it. Closing is `close()` or a `with` block; there is nothing to save.
    """
