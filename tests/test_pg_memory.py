"""The PostgreSQL + pgvector memory beyond the shared suite (tests/test_memory.py runs that on both backends): several
processes writing through one server, the write lock and its timeout, odd text, foreign schemas, imports from the
server itself. Every test runs on the session's throwaway pgserver and skips, saying why, if it cannot start."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import unicodedata
import uuid
from pathlib import Path

import pytest

from retllm_utils.api import Triple
from retllm_utils.models import NgramEmbedder

psycopg = pytest.importorskip(
    "psycopg", reason="POSTGRES MEMORY TESTS SKIPPED: psycopg missing (pip install -e .[postgres])"
)
from retllm_utils.backends.postgres import PgTripleMemory, open_memory  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def schema(pg_uri):
    """A schema name of this test's own, dropped afterwards."""
    name = f"t{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _open(uri, schema, **kw):
    return PgTripleMemory(uri, embedder=NgramEmbedder(), index=kw.pop("index", "hnsw"), schema=schema, **kw)


# ---------------------------------------------------------------------------------------------- many processes
_WORKER = textwrap.dedent(
    """
    import json, sys, time
    from retllm_utils.backends.postgres import PgTripleMemory
    from retllm_utils.models import NgramEmbedder
    uri, schema, role, seconds = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
    stop, done, checks = time.time() + seconds, [], 0
    with PgTripleMemory(uri, embedder=NgramEmbedder(), index="hnsw", schema=schema) as m:
        if role == "reader":
            while time.time() < stop:
                for t in list(m):
                    assert t.subject.startswith(("w0 ", "w1 ")), t
                    assert t.object == t.subject + " obj" or t.object.startswith("shared "), t
                    assert t in m, ("listed but not found", t)
                    checks += 1
            print(json.dumps({"checks": checks}))
        else:
            i = 0
            while time.time() < stop:
                # both writers share the relations and every 3rd object phrase: concurrent inserts of one phrase
                batch = [(f"{role} {i + k}", f"rel {(i + k) % 7}", f"{role} {i + k} obj") for k in range(5)]
                batch.append((f"{role} {i}", "rel shared", f"shared {i % 3}"))
                m.write_many(batch)
                done += batch
                i += 5
                assert all(tuple(t) in m for t in batch)
            print(json.dumps({"written": done}))
    """
)


def test_two_writers_and_a_reader_through_postgres_lose_nothing(pg_uri, schema):
    _open(pg_uri, schema).close()  # created once, so the workers race writes, not the schema
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, pg_uri, schema, role, "2.5"], stdout=subprocess.PIPE, env=env, text=True
        )
        for role in ("w0", "w1", "reader")
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    w0, w1, reader = (json.loads(o[0].strip().splitlines()[-1]) for o in outs)
    written = {Triple(*t) for t in w0["written"] + w1["written"]}
    assert w0["written"] and w1["written"] and reader["checks"] > 0
    with _open(pg_uri, schema) as m:
        assert set(m) == written and len(m) == len(written)
        sample = sorted(written)[:: max(len(written) // 20, 1)]
        assert all(t in m for t in sample)
        assert all(m.read((t.subject, t.relation, "")) == [t] for t in sample if t.relation != "rel shared")
        n_shared = m._conn.execute("SELECT COUNT(*) FROM phrases WHERE text LIKE 'shared _'").fetchone()[0]
        assert n_shared == 3  # each phrase stored once, however many writers inserted it at once


_KILLED = textwrap.dedent(
    """
    import sys
    from retllm_utils.backends.postgres import PgTripleMemory
    from retllm_utils.models import NgramEmbedder
    m = PgTripleMemory(sys.argv[1], embedder=NgramEmbedder(), index="flat", schema=sys.argv[2])
    for i in range(10**6):
        m.write_many([(f"b{i} s{k}", "r", f"b{i} o{k}") for k in range(20)])  # a batch of 20: all or nothing
        print(i, flush=True)  # after the commit returned
    """
)


def test_kill_9_keeps_every_returned_write_and_no_half_batch(pg_uri, schema):
    _open(pg_uri, schema, index="flat").close()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    p = subprocess.Popen([sys.executable, "-c", _KILLED, pg_uri, schema], stdout=subprocess.PIPE, env=env, text=True)
    returned = []
    for line in p.stdout:
        returned.append(int(line))
        if len(returned) == 20:
            p.send_signal(signal.SIGKILL)
            break
    p.wait(timeout=30)
    with _open(pg_uri, schema, index="flat") as m:
        batches = {int(t.subject.split()[0][1:]) for t in m}
        assert set(returned) <= batches and len(m) == 20 * len(batches)
        assert m.read(("b7 s3", "", "")) == [Triple("b7 s3", "r", "b7 o3")]


# ---------------------------------------------------------------------------------------------- the write lock
class LockProbe(NgramEmbedder):
    """Records, at each encode, whether another connection could take the memory's write lock (it must)."""

    def __init__(self, uri, schema):
        super().__init__()
        self.uri, self.schema, self.locked = uri, schema, []

    def encode(self, texts):
        with psycopg.connect(self.uri, autocommit=True) as probe:
            got = probe.execute("SELECT pg_try_advisory_lock(hashtext(%s))", (f"retllm-memory:{self.schema}",))
            free = got.fetchone()[0]
            if free:
                probe.execute("SELECT pg_advisory_unlock(hashtext(%s))", (f"retllm-memory:{self.schema}",))
        self.locked.append(not free)
        return super().encode(texts)


def test_new_phrases_are_embedded_before_the_write_lock(pg_uri, schema):
    emb = LockProbe(pg_uri, schema)
    with PgTripleMemory(pg_uri, embedder=emb, schema=schema) as m:
        m.write_many([(f"E{i}", f"r{i % 3}", f"F{i}") for i in range(20)])
        m.update(("E1", "r1", "F1"), ("E1", "r1", "New F"))
        m.replace_object("E2", "r2", "Newer F")
        assert len(m) == 20
    assert emb.locked and not any(emb.locked)


def test_a_writer_waits_for_another_writers_lock(pg_uri, schema):
    key = f"retllm-memory:{schema}"
    with _open(pg_uri, schema) as m:
        other = psycopg.connect(pg_uri, autocommit=True)
        other.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))
        timer = threading.Timer(0.3, lambda: other.execute("SELECT pg_advisory_unlock(hashtext(%s))", (key,)))
        timer.start()
        try:
            t0 = time.monotonic()
            assert m.write("Ann", "knows", "Bo")  # waited for the other writer
            assert time.monotonic() - t0 >= 0.25
        finally:
            timer.join()
        other.execute("SELECT pg_advisory_lock(hashtext(%s))", (key,))  # held past a short busy_timeout
        try:
            with _open(pg_uri, schema, busy_timeout=0.2) as quick:
                with pytest.raises(psycopg.errors.LockNotAvailable, match=f"schema {schema}: .*lock timeout"):
                    quick.write_many([("Cy", "knows", "Di"), ("Ann", "knows", "Eve")])
                assert ("Ann", "knows", "Bo") in quick  # reads never wait
        finally:
            other.close()
        assert list(m) == [Triple("Ann", "knows", "Bo")]


# ---------------------------------------------------------------------------------------------- odd text, schemas
def test_text_identity_and_bad_terms(pg_uri, schema):
    nfc, nfd = unicodedata.normalize("NFC", "Café Zürich"), unicodedata.normalize("NFD", "Café Zürich")
    with _open(pg_uri, schema) as m:
        assert m.write(nfd, "located in", "Schweiz") and not m.write(nfc, "located in", "Schweiz")
        assert list(m) == [Triple(nfc, "located in", "Schweiz")] and m.read((nfd, "", "")) == list(m)
        with pytest.raises(ValueError, match="lone surrogate"):
            m.write("Ann\ud800", "knows", "Bo")
        with pytest.raises(ValueError, match="no visible character"):
            m.write("\u200b", "knows", "Bo")
        # a difference from SQLite: PostgreSQL text cannot hold NUL, so such a term is refused, naming it
        with pytest.raises(ValueError, match=r"subject 'A\\x00B' .* NUL"):
            m.write_many([("Ann", "knows", "Bo"), ("A\x00B", "knows", "Bo")])
        assert ("A\x00B", "knows", "Bo") not in m and len(m) == 1
        assert m.read_explained(("A\x00B", "", "")).substitutions[0].term == "A\x00B"  # read fuzzily, no error


def test_foreign_schema_and_bad_arguments_are_refused(pg_uri, schema):
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".orders (id int)')
    with pytest.raises(ValueError, match=f"schema {schema} holds other tables \\(orders\\), not a memory"):
        _open(pg_uri, schema)
    with pytest.raises(ValueError, match="no LSH index"):
        _open(pg_uri, schema + "x", index="lsh")
    with pytest.raises(ValueError, match="lower-case SQL name"):
        _open(pg_uri, 'bad"; DROP TABLE x; --')


def test_many_memories_in_one_database_and_import_from_a_server_table(pg_uri, schema):
    with _open(pg_uri, schema + "_a") as a, _open(pg_uri, schema + "_b", index="flat") as b:
        a.write("Ann", "knows", "Bo")
        assert len(b) == 0 and ("Ann", "knows", "Bo") not in b  # schemas are separate memories
        with psycopg.connect(pg_uri, autocommit=True) as conn:  # a table of the same server as the source
            conn.execute(f'CREATE TABLE "{schema}_b".staff (name text, employer text)')
            conn.execute(f"INSERT INTO \"{schema}_b\".staff VALUES ('Dee Ito', 'Novartis'), ('Eve Ng', 'Pfizer')")
            q = f"SELECT name AS subject, 'employed by' AS relation, employer AS object FROM \"{schema}_b\".staff"
            assert b.from_sql(conn, q) == 2
        assert b.read(("", "employed by", "Pfizer")) == [Triple("Eve Ng", "employed by", "Pfizer")]
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        for s in ("_a", "_b"):
            conn.execute(f'DROP SCHEMA "{schema}{s}" CASCADE')


def test_hnsw_index_is_used_for_fuzzy_reads(pg_uri, schema):
    """The plan of the candidate query goes through the partial HNSW index once the table is large enough."""
    with _open(pg_uri, schema) as m:
        m.write_many([(f"Person {i}", f"rel {i % 20}", f"Company {i % 101}") for i in range(1000)])
        m._conn.execute("ANALYZE phrases")
        vec = m._encode(["Persn 17"])[0]
        plan = m._conn.execute(
            "EXPLAIN SELECT id FROM phrases WHERE kind = 0 ORDER BY vec <#> ? LIMIT 16", (vec,)
        ).fetchall()
        assert "phrases_entity_hnsw" in " ".join(r[0] for r in plan)  # rebuilt after the bulk batch, same settings
        definition = m._conn.execute("SELECT pg_get_indexdef(to_regclass('phrases_entity_hnsw'))").fetchone()[0]
        assert "hnsw" in definition and "m='16'" in definition and "(kind = 0)" in definition  # pgvector's default
        m.write("Persn 17 Jr", "rel 1", "Company 5")  # a small write goes into the index as it is
        assert m.read_explained(("Persn 17 Jr.", "", "")).substitutions[0].stored == "Persn 17 Jr"
        assert m.read_explained(("Persn 17", "", "")).substitutions[0].stored.startswith("Person 17")


def test_one_switch_opens_either_backend(pg_uri, schema, tmp_path):
    """A notebook changes `backend` only: the same calls, the same answers; without dsn a private server starts."""
    facts = [("Ann Lee", "employed by", "Pfizer"), ("Bo Wu", "employed by", "Pfizer")]
    answers = []
    for backend, kw in (("sqlite", {}), ("postgres", {"dsn": pg_uri, "schema": schema}), ("postgres", {})):
        with open_memory(backend, tmp_path / "mem.sqlite", embedder=NgramEmbedder(), index="hnsw", **kw) as m:
            m.write_many(facts)
            answers.append(
                (type(m).__name__, m.read(("Anne Lee", "", "")), m.query_memllm([("", "employed by", "Pfizer")]))
            )
    assert [a[0] for a in answers] == ["TripleMemory", "PgTripleMemory", "PgTripleMemory"]
    assert answers[0][1:] == answers[1][1:] == answers[2][1:] == ([Triple(*facts[0])], ["Ann Lee", "Bo Wu"])
    assert (tmp_path / "mem.sqlite.pgdata" / "PG_VERSION").is_file()  # the private server's data directory
    with pytest.raises(ValueError, match="backend must be"):
        open_memory("redis", tmp_path / "x")


# ---------------------------------------------------------------------------------------------- bulk loads
def _indexes(m):
    sql = "SELECT indexname FROM pg_indexes WHERE schemaname = ? AND right(indexname, 4) = 'hnsw'"
    return sorted(r[0] for r in m._conn.execute(sql, (m.schema,)))


def test_a_bulk_load_indexes_once_and_is_all_or_nothing(pg_uri, schema):
    """Inside `bulk()` the HNSW indexes are gone and every write is one transaction; at the end they are built again
    with the same definition. An exception in the block leaves the triples and the indexes as they were."""
    with _open(pg_uri, schema) as m:
        m.write_many([("Ann Lee", "employed by", "Pfizer")])
        before = _indexes(m)
        assert before == ["phrases_entity_hnsw", "phrases_relation_hnsw"]
        with m.bulk(maintenance_work_mem="64MB", workers=1):
            assert _indexes(m) == []
            for i in range(0, 3000, 500):
                m.write_many([(f"Person {k}", f"rel {k % 20}", f"Company {k % 101}") for k in range(i, i + 500)])
            assert len(m) == 3001  # the load's own connection sees its rows
        assert _indexes(m) == before and len(m) == 3001
        assert sorted(m.last_bulk) == ["analyze_s", "index_s", "rows_s"] and min(m.last_bulk.values()) > 0
        stats = "SELECT COUNT(*) FROM pg_stats WHERE schemaname = ? AND tablename = ?"
        assert all(m._conn.execute(stats, (m.schema, t)).fetchone()[0] > 0 for t in ("phrases", "triples"))  # analyzed
        assert m.read_explained(("Persn 17", "", "")).substitutions[0].stored.startswith("Person 17")
        with pytest.raises(RuntimeError, match="stop"):
            with m.bulk():
                m.write_many([(f"Other {k}", "r", "o") for k in range(100)])
                raise RuntimeError("stop")
        assert _indexes(m) == before and len(m) == 3001 and ("Other 5", "r", "o") not in m
        for bad in ({"maintenance_work_mem": "1GB; DROP TABLE x"}, {"workers": -1}):
            with pytest.raises(ValueError, match="maintenance_work_mem|workers"):
                with m.bulk(**bad):
                    pass
        assert len(m) == 3001


_KILLED_BULK = textwrap.dedent(
    """
    import sys
    from retllm_utils.backends.postgres import PgTripleMemory
    from retllm_utils.models import NgramEmbedder
    m = PgTripleMemory(sys.argv[1], embedder=NgramEmbedder(), index="hnsw", schema=sys.argv[2])
    m.write_many([(f"before {k}", "r", f"o {k}") for k in range(50)])
    with m.bulk():
        for i in range(10**6):
            m.write_many([(f"bulk {i} s{k}", "r", f"bulk {i} o{k}") for k in range(50)])
            print(i, flush=True)
    """
)


def test_kill_9_in_a_bulk_load_leaves_the_memory_as_before_it(pg_uri, schema):
    """A crash in the middle of a bulk load (kill -9 after batches it wrote) loses the load, nothing before it; the
    indexes it dropped are there again."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    args = [sys.executable, "-c", _KILLED_BULK, pg_uri, schema]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, env=env, text=True)
    for n, _ in enumerate(p.stdout, 1):
        if n == 10:
            p.send_signal(signal.SIGKILL)
            break
    p.wait(timeout=30)
    assert n == 10
    with _open(pg_uri, schema) as m:
        assert len(m) == 50 and all(t.subject.startswith("before ") for t in m)
        assert _indexes(m) == ["phrases_entity_hnsw", "phrases_relation_hnsw"]
        m.write("after", "r", "o")  # the killed load's lock went with its session
        assert len(m) == 51


@pytest.mark.parametrize("end", ["error", "sigterm"])
def test_a_benchmark_run_that_fails_resets_the_shared_buffers_it_set(tmp_path, end):
    # bench_memory --pg-shared-buffers writes the private server's setting with ALTER SYSTEM, which outlives the
    # process: a run ending in an error or on SIGTERM must still put it back, as a finished run does
    script = textwrap.dedent(
        f"""
        import sys, time
        from benchmarks.bench_memory import _set_shared_buffers, reset_shared_buffers_at_exit
        from retllm_utils.backends.postgres import local_server
        pgdata = {str(tmp_path / "pgdata")!r}
        _set_shared_buffers(local_server(pgdata), "64MB")
        reset_shared_buffers_at_exit(pgdata)
        print("set", flush=True)
        if {end!r} == "error":
            raise RuntimeError("the run fails here")
        time.sleep(120)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().strip() == b"set"
    assert "shared_buffers" in (tmp_path / "pgdata" / "postgresql.auto.conf").read_text()
    if end == "sigterm":
        proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode != 0 and (end != "error" or b"the run fails here" in err)
    assert "shared_buffers" not in (tmp_path / "pgdata" / "postgresql.auto.conf").read_text()
