"""The memory under concurrency, corruption and hostile input: no lost or wrong fact, a clear error for
everything else. Two writers and a reader in separate processes, opens racing a writer, concurrent saves, the write
lock during embedding, damaged files, bad imports, Unicode identity, SQL variable limits."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import unicodedata
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retllm_utils import phrase_index
from retllm_utils.api import Triple
from retllm_utils.backends import sqlite as sqlite_backend
from retllm_utils.memory import TripleMemory
from retllm_utils.models import NgramEmbedder

ROOT = Path(__file__).resolve().parents[1]


def _open(path, **kw):
    return TripleMemory(path, embedder=NgramEmbedder(), index="flat", **kw)


# ---------------------------------------------------------------------------------------------- 1: open vs writer
class Rows(list):
    """Rows already fetched, served as a cursor serves them."""

    def fetchmany(self, size=1):
        out = self[:size]
        del self[:size]
        return out

    def fetchall(self):
        return self.fetchmany(len(self))


def test_open_racing_a_writer_misses_no_phrase(tmp_path, monkeypatch):
    """A commit that lands while `_open` loads the phrase map is picked up, not lost for the life of the process."""
    path = tmp_path / "m.sqlite"
    with _open(path) as m:
        m.write_many([(f"P{i}", "knows", f"Q{i}") for i in range(50)])
    late = [(f"Late {i}", "met", f"Later {i}") for i in range(120)]
    fired = []
    real_connect = sqlite3.connect

    def connect(*args, **kw):
        base = kw.pop("factory", sqlite3.Connection)

        class Racy(base):
            def execute(self, sql, *params):
                cur = super().execute(sql, *params)
                if not fired and sql.startswith("SELECT id, kind, text FROM phrases"):
                    fired.append(sql)  # the phrase map is being loaded: another process commits right now
                    rows = cur.fetchall()
                    with _open(path) as other:
                        other.write_many(late)
                    return Rows(rows)
                return cur

        return real_connect(*args, factory=Racy, **kw)

    monkeypatch.setattr(sqlite_backend.sqlite3, "connect", connect)
    m = _open(path)
    monkeypatch.undo()
    assert fired
    try:
        assert all(t in m for t in late)  # was False: 120 phrases missed
        assert m.delete(*late[0])
        m.update(late[1], ("Late 1", "met", "Someone"))  # was KeyError
        assert m.write("Late 2", "met", "Later 3")  # was IntegrityError: UNIQUE constraint failed
        assert m.read(("", "", "Later 5")) == [Triple(*late[5])]
    finally:
        m.close()


def test_a_phrase_stored_behind_our_back_is_recovered_not_an_integrity_error(tmp_path):
    """Even with a stale phrase map, a write of a phrase another connection stored re-reads it instead of failing."""
    path = tmp_path / "m.sqlite"
    with _open(path) as a, _open(path) as b:
        b.write("Ann", "knows", "Bo")
        a._data_version = a._conn.execute("PRAGMA data_version").fetchone()[0]  # a believes nothing changed
        assert a.write("Ann", "knows", "Cy")  # "Ann" and "knows" exist: reused, not inserted twice
        assert set(a) == {Triple("Ann", "knows", "Bo"), Triple("Ann", "knows", "Cy")}
        assert ("Ann", "knows", "Bo") in a and a.read(("Ann", "", "")) == list(a)
        del a._ids[0]["Bo"]  # missed below a's largest id, as the old open race left it: a unique-constraint conflict
        assert a.write("Bo", "knows", "Dee") and a.write("Eve", "knows", "Bo") and len(a) == 4
        assert ("Ann", "knows", "Bo") in a and a.read(("", "", "Bo")) == [Triple("Ann", "knows", "Bo")] + [
            Triple("Eve", "knows", "Bo")
        ]
        assert a._conn.execute("SELECT COUNT(*) FROM phrases WHERE text = 'Bo'").fetchone()[0] == 1


# ---------------------------------------------------------------------------------------------- 2: concurrent save
def test_concurrent_saves_use_their_own_temp_files(tmp_path, monkeypatch):
    path = tmp_path / "m.sqlite"
    a, b = _open(path), _open(path)
    a.write_many([("Ann", "knows", "Bo")])
    b.write_many([("Cy", "knows", "Di")])
    real_write = phrase_index.faiss.write_index
    nested = []

    def write_index(index, name):
        real_write(index, name)
        if not nested:  # while a's temp file is written, b saves too
            nested.append(name)
            b.save()

    monkeypatch.setattr(phrase_index.faiss, "write_index", write_index)
    a.save()  # was FileNotFoundError: b's os.replace took the shared ".tmp"
    monkeypatch.undo()
    a.close(), b.close()
    assert not list(tmp_path.glob("*.tmp"))
    with _open(path) as m:
        assert m.index_status == {"entity": "loaded", "relation": "loaded"}
        assert m.read(("", "", "Di")) == [Triple("Cy", "knows", "Di")] and len(m) == 2


def test_stale_temp_files_of_dead_processes_are_removed(tmp_path):
    path = tmp_path / "m[1].sqlite"  # glob characters in the name are taken literally
    dead = tmp_path / "m[1].sqlite.entity.faiss.999999999-0a1b.tmp"  # pid above any pid_max
    alive = tmp_path / f"m[1].sqlite.entity.faiss.{os.getppid()}-0a1b.tmp"
    dead.write_bytes(b"x"), alive.write_bytes(b"x")
    with _open(path) as m:
        m.write("Ann", "knows", "Bo")
    assert not dead.exists() and alive.exists()


# ---------------------------------------------------------------------------------------------- 3: lock, busy timeout
class LockProbe(NgramEmbedder):
    """Records, at each encode, whether another connection could take the write lock (it must: no lock held)."""

    def __init__(self, path):
        super().__init__()
        self.path, self.locked = path, []

    def encode(self, texts):
        probe = sqlite3.connect(self.path, timeout=0, isolation_level=None)
        try:
            probe.execute("BEGIN IMMEDIATE")
            probe.execute("ROLLBACK")
            self.locked.append(False)
        except sqlite3.OperationalError:
            self.locked.append(True)
        finally:
            probe.close()
        return super().encode(texts)


def test_new_phrases_are_embedded_before_the_write_lock(tmp_path):
    path = tmp_path / "m.sqlite"
    emb = LockProbe(path)
    with TripleMemory(path, embedder=emb) as m:
        m.write_many([(f"E{i}", f"r{i % 3}", f"F{i}") for i in range(20)])
        m.update(("E1", "r1", "F1"), ("E1", "r1", "New F"))
        m.replace_object("E2", "r2", "Newer F")
        assert len(m) == 20
    assert emb.locked and not any(emb.locked)


def test_a_writer_waits_for_another_writers_lock(tmp_path):
    path = tmp_path / "m.sqlite"
    with _open(path) as m:
        assert m._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 60_000  # the documented default
        with _open(path, busy_timeout=0.5) as quick:
            assert quick._conn.execute("PRAGMA busy_timeout").fetchone()[0] == 500
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")
        timer = threading.Timer(0.3, lambda: other.execute("COMMIT"))
        timer.start()
        try:
            assert m.write("Ann", "knows", "Bo")  # waited for the other writer
        finally:
            timer.join()
        other.execute("BEGIN IMMEDIATE")  # held past a short busy_timeout: a clear error, nothing written
        try:
            with _open(path, busy_timeout=0.2) as quick:
                with pytest.raises(sqlite3.OperationalError, match=r"m\.sqlite: database is locked"):
                    quick.write_many([("Cy", "knows", "Di"), ("Ann", "knows", "Eve")])
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert list(m) == [Triple("Ann", "knows", "Bo")]


# ---------------------------------------------------------------------------------------------- 4: imports
def test_csv_row_with_an_extra_field_is_refused_naming_the_line(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("subject,relation,object\nAnn,knows,Bo,EXTRA\nCy,knows,Di\n")
    m = _open(None)
    with pytest.raises(ValueError, match=r"line 2.*4 fields"):
        m.from_csv(f)
    f.write_text("subject,relation,object\nAnn,knows,Bo\nCy,knows,Di,EXTRA\n")
    with pytest.raises(ValueError, match=r"line 3.*4 fields"):
        m.from_csv(f)
    f.write_text("subject,relation,object,\nAnn,knows,Bo,\nCy,knows,Di,EXTRA\n")  # a trailing comma in the header
    with pytest.raises(ValueError, match=r"data row 2: a value beyond the header's 3 columns"):
        m.from_csv(f)
    assert len(m) == 0
    f.write_text("subject,relation,object,\nAnn,knows,Bo,\n")
    assert m.from_csv(f) == 1 and list(m) == [Triple("Ann", "knows", "Bo")]


def test_failed_from_sql_leaves_the_callers_transaction_alone():
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (subject TEXT, relation TEXT, object TEXT)")
    conn.execute("INSERT INTO t VALUES ('Ann', 'knows', 'Bo')")  # opens the caller's transaction
    assert conn.in_transaction
    m = _open(None)
    with pytest.raises(Exception, match="no such table"):
        m.from_sql(conn, "missing_table")
    assert conn.in_transaction and conn.execute("SELECT COUNT(*) FROM t").fetchone()[0] == 1
    assert m.from_sql(conn, "t") == 1


@pytest.mark.parametrize("missing", [None, float("nan"), pd.NA])
def test_a_missing_value_is_named_by_row_and_column(missing):
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (subject TEXT, relation TEXT, object TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)", [("Ann", "knows", "Bo"), ("Cy", "knows", None)])
    m = _open(None)
    with pytest.raises(ValueError, match=r"missing value in row 1, column 'object'"):
        m.from_sql(conn, "t")
    df = pd.DataFrame({"subject": ["Ann", "Cy"], "relation": ["knows", missing], "object": ["Bo", "Di"]}, dtype=object)
    with pytest.raises(ValueError, match=r"missing value in row 1, column 'relation'"):
        m.from_dataframe(df)
    assert len(m) == 0


# ---------------------------------------------------------------------------------------------- 6: odd text
def test_a_lone_surrogate_is_a_value_error_not_an_encode_error():
    m = _open(None)
    with pytest.raises(ValueError, match="subject .* lone surrogate"):  # was UnicodeEncodeError from SQLite
        m.write("Ann\ud800", "knows", "Bo")
    with pytest.raises(ValueError, match="subject .* lone surrogate"):
        m.read(("Ann\udfff", "", ""))
    assert ("Ann\ud800", "knows", "Bo") not in m and len(m) == 0


# ---------------------------------------------------------------------------------------------- 7: Unicode identity
def test_nfc_and_nfd_forms_are_one_fact():
    nfc, nfd = unicodedata.normalize("NFC", "Café Zürich"), unicodedata.normalize("NFD", "Café Zürich")
    assert nfc != nfd
    m = _open(None)
    assert m.write(nfd, "located in", "Schweiz")
    assert not m.write(nfc, "located in", "Schweiz")  # the same fact
    assert (nfc, "located in", "Schweiz") in m and list(m) == [Triple(nfc, "located in", "Schweiz")]
    assert m.read((nfc, "", "")) == m.read((nfd, "", "")) == list(m)
    m.update((nfc, "located in", "Schweiz"), (nfd, "located in", "Suisse"))
    assert m.delete(nfd, "located in", "Suisse") and len(m) == 0


@pytest.mark.parametrize("invisible", ["\u200b", "\u200b\u200d", "\ufeff ", "\u00ad", "\u2060\u200c"])
def test_a_term_with_no_visible_character_is_refused(invisible):
    m = _open(None)
    with pytest.raises(ValueError, match="no visible character"):
        m.write(invisible, "knows", "Bo")
    assert (invisible, "knows", "Bo") not in m and len(m) == 0


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=12).filter(lambda s: any(c.isalnum() for c in s)))
def test_any_normal_form_finds_the_fact(term):
    m = _open(None)
    m.write(unicodedata.normalize("NFD", term), "r", "o")
    for form in ("NFC", "NFD"):
        t = (unicodedata.normalize(form, term), "r", "o")
        assert t in m and m.read(t) == list(m) and len(m) == 1


# ---------------------------------------------------------------------------------------------- 10: corruption, limits
@pytest.mark.parametrize("content", [b"", b"this is not a database, just some text\n" * 10])
def test_an_empty_or_foreign_file_is_refused_naming_it(tmp_path, content):
    path = tmp_path / "notes.sqlite"
    path.write_bytes(content)
    with pytest.raises((ValueError, sqlite3.DatabaseError), match="notes.sqlite"):
        _open(path)
    assert path.read_bytes() == content  # left as it was
    if not content:
        with _open(path, create=True) as m:  # explicitly asked for
            m.write("Ann", "knows", "Bo")
        assert len(_open(path)) == 1
    with _open(tmp_path / "new.sqlite") as m:  # a new path is created
        assert len(m) == 0


def test_errors_from_a_damaged_database_name_the_file(tmp_path):
    path = tmp_path / "m.sqlite"
    with _open(path) as m:
        m.write_many([(f"P{i}", "knows", f"Q{i}") for i in range(3000)])
    probe = sqlite3.connect(path)
    try:
        size = probe.execute("PRAGMA page_size").fetchone()[0]
        leaves = [r[0] for r in probe.execute("SELECT pageno FROM dbstat WHERE name = 'triples' AND pagetype = 'leaf'")]
    except sqlite3.OperationalError:
        pytest.skip("this SQLite has no dbstat table")
    finally:
        probe.close()
    data = bytearray(path.read_bytes())
    for page in leaves:  # the triple table's rows are garbage; the phrases and the indexes are intact
        data[(page - 1) * size : page * size] = b"\xff" * size
    path.write_bytes(bytes(data))
    with _open(path) as m:  # opening reads only the phrases
        with pytest.raises(sqlite3.DatabaseError, match=r"m\.sqlite: database disk image is malformed"):
            list(m)  # met while fetching rows
        with pytest.raises(sqlite3.DatabaseError, match=r"m\.sqlite: database disk image is malformed"):
            m.write("New", "knows", "One")  # met while executing a statement


def test_memllm_search_past_sqlites_variable_limit():
    """32,767 relations all match the query: more than SQLite's 32,766 variables in one IN list."""
    m = _open(None)
    m._conn.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 32_766)  # SQLite's default; some builds allow more
    n = 32_767
    m.write_many([("Ann", f"rel {i}", "Bo") for i in range(n)])
    m.tau_entity = m.tau_relation = m.tau_triple = -1.0
    hits = m.memllm_search(("Ann", "rel 1", ""))  # was OperationalError: too many SQL variables
    assert [h[0] for h in hits] == ["Bo"] and hits[0][2] == Triple("Ann", "rel 1", "Bo")


# ---------------------------------------------------------------------------------------------- many processes
_WORKER = textwrap.dedent(
    """
    import json, sys, time
    from retllm_utils.memory import TripleMemory
    from retllm_utils.models import NgramEmbedder
    path, role, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    stop, done, checks = time.time() + seconds, [], 0
    if role == "reader":
        while time.time() < stop:  # a fresh open each time: it races the writers' commits
            with TripleMemory(path, embedder=NgramEmbedder(), index="flat") as m:
                for t in list(m):
                    assert t.subject.startswith(("w0 ", "w1 ")) and t.object == t.subject + " obj", t
                    assert t in m, ("listed but not found", t)
                    checks += 1
        print(json.dumps({"checks": checks}))
    else:
        with TripleMemory(path, embedder=NgramEmbedder(), index="flat") as m:
            i = 0
            while time.time() < stop:
                batch = [(f"{role} {i + k}", f"rel {(i + k) % 7}", f"{role} {i + k} obj") for k in range(5)]
                m.write_many(batch)
                done += batch
                i += 5
                if i % 50 == 0:
                    m.save()
                    assert all(tuple(t) in m for t in batch)
        print(json.dumps({"written": done}))
    """
)


def test_two_writers_and_a_reader_lose_nothing(tmp_path):
    path = tmp_path / "shared.sqlite"
    _open(path).close()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen([sys.executable, "-c", _WORKER, str(path), role, "2.5"], stdout=subprocess.PIPE, env=env)
        for role in ("w0", "w1", "reader")
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0]
    w0, w1, reader = (json.loads(o[0]) for o in outs)
    written = {Triple(*t) for t in w0["written"] + w1["written"]}
    assert w0["written"] and w1["written"] and reader["checks"] > 0
    with _open(path) as m:
        assert set(m) == written and len(m) == len(written)
        assert all(t in m for t in written)
        sample = sorted(written)[:: max(len(written) // 20, 1)]
        assert all(m.read((t.subject, "", "")) == [t] for t in sample)
    assert not list(tmp_path.glob("*.tmp"))


_KILLED = textwrap.dedent(
    """
    import sys
    from retllm_utils.memory import TripleMemory
    from retllm_utils.models import NgramEmbedder
    m = TripleMemory(sys.argv[1], embedder=NgramEmbedder(), index="hnsw")
    for i in range(10**6):
        m.write_many([(f"b{i} s{k}", "r", f"b{i} o{k}") for k in range(20)])  # a batch of 20: all or nothing
        print(i, flush=True)  # after the commit returned
        if i % 10 == 0:
            m.save()
    """
)


def test_kill_9_keeps_every_returned_write_and_no_half_batch(tmp_path):
    path = tmp_path / "m.sqlite"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    p = subprocess.Popen([sys.executable, "-c", _KILLED, str(path)], stdout=subprocess.PIPE, env=env, text=True)
    returned = []
    for line in p.stdout:  # kill -9 in the middle of writing, once a few dozen batches were committed
        returned.append(int(line))
        if len(returned) == 40:
            p.send_signal(signal.SIGKILL)
            break
    p.wait(timeout=30)
    with TripleMemory(path, embedder=NgramEmbedder(), index="hnsw") as m:
        batches = {int(t.subject.split()[0][1:]) for t in m}
        assert set(returned) <= batches  # every write that returned survived
        assert len(m) == 20 * len(batches)  # a batch the kill interrupted left nothing
        assert m.read(("b7 s3", "", "")) == [Triple("b7 s3", "r", "b7 o3")]


_POOL = [
    ("Ann", "knows", "Bo"),
    ("Ann", "knows", "Cy"),
    ("Bo", "met", "Ann"),
    ("Cy", "met", "Dee"),
    ("Dee", "knows", "Ann"),
]
_OPS = st.tuples(st.sampled_from([0, 1]), st.sampled_from(["write", "delete", "update", "reopen"]), st.integers(0, 4))


@settings(max_examples=40, deadline=None)
@given(st.lists(_OPS, min_size=1, max_size=25))
def test_two_connections_agree_with_a_set_model(ops):
    """Writes, deletes, updates and reopens from two connections on one file, interleaved: both see the model."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.sqlite"
        conns, model = [_open(path), _open(path)], set()
        try:
            for who, op, k in ops:
                t, other = _POOL[k], _POOL[(k + 1) % len(_POOL)]
                m = conns[who]
                if op == "write":
                    assert m.write(*t) == (t not in model)
                    model.add(t)
                elif op == "delete":
                    assert m.delete(*t) == (t in model)
                    model.discard(t)
                elif op == "update" and t in model:
                    assert m.update(t, other) == (other not in model)
                    model = (model - {t}) | {other}
                elif op == "update":
                    with pytest.raises(KeyError):
                        m.update(t, other)
                else:
                    m.close()
                    conns[who] = _open(path)
                for c in conns:
                    assert {x for x in _POOL if x in c} == model and set(c) == model
                    assert sorted(c.read(("Ann", "", ""))) == sorted(x for x in model if x[0] == "Ann")
        finally:
            for c in conns:
                c.close()
