"""Shared fixtures: the real offline SmolLM2 model (loaded once per session) and the Re-DocRED test split."""

import pytest


@pytest.fixture(scope="session")
def smol():
    """(model, tokenizer) of the default offline model; the first run converts the GGUF (~40 s), then < 2 s."""
    from retllm_utils.models import load_model

    model, tokenizer = load_model("smollm2-135m-instruct", device="cpu")
    model.eval()
    return model, tokenizer


@pytest.fixture(scope="module")
def corpus():
    """(documents, relation names) of the bundled Re-DocRED test split."""
    from retllm_utils.memllm.docred import load_docred, relation_names
    from retllm_utils.paths import DATA

    docs = load_docred(DATA / "redocred" / "test_revised.json")
    return docs, relation_names(DATA / "redocred" / "rel_info.json")


# ---------------------------------------------------------------------------------------------- memory backends
@pytest.fixture(scope="session")
def pg_uri():
    """URI of a throwaway PostgreSQL 16 + pgvector server (pgserver, a temp dir) for the session.

    If it cannot start, the Postgres tests skip with the reason (RETLLM_PG_TEST=required makes that a failure).
    """
    import os
    import tempfile
    import warnings
    from pathlib import Path

    try:
        from retllm_utils.backends.postgres import local_server

        server = local_server(Path(tempfile.mkdtemp(prefix="retllm-pg-")) / "pgdata", cleanup_mode="delete")
        uri = server.get_uri()
    except Exception as e:  # no pgserver wheel for this platform, a data dir it cannot use, ...
        reason = f"POSTGRES MEMORY TESTS SKIPPED: pgserver could not start PostgreSQL ({type(e).__name__}: {e})"
        if os.environ.get("RETLLM_PG_TEST") == "required":
            pytest.fail(reason)
        warnings.warn(reason)
        pytest.skip(reason)
    yield uri
    server.cleanup()


class MemoryFactory:
    """Opens memories of one backend for a test: `make(name=None, **kw)`; the same name reopens the same memory
    (a file under tmp_path, or a Postgres schema), no name gives a new, private one. Everything opened is closed,
    and the test's schemas dropped, at teardown."""

    def __init__(self, backend, tmp_path, uri=None):
        import uuid

        self.backend, self.tmp_path, self.uri = backend, tmp_path, uri
        self.prefix = f"t{uuid.uuid4().hex[:10]}"
        self.opened, self.schemas, self.anonymous = [], set(), 0

    def __call__(self, name=None, embedder=None, index="flat", **kw):
        from retllm_utils.memory import TripleMemory
        from retllm_utils.models import NgramEmbedder

        embedder = NgramEmbedder() if embedder is None else embedder
        if self.backend == "sqlite":
            m = TripleMemory(None if name is None else self.tmp_path / f"{name}.sqlite", embedder, index, **kw)
        else:
            from retllm_utils.backends.postgres import PgTripleMemory

            if index == "lsh":
                pytest.skip("pgvector has no LSH index (PgTripleMemory takes flat or hnsw)")
            if name is None:
                self.anonymous += 1
                name = f"anon{self.anonymous}"
            schema = f"{self.prefix}_{name}".lower()
            self.schemas.add(schema)
            m = PgTripleMemory(self.uri, embedder, index, schema=schema, **kw)
        self.opened.append(m)
        return m

    def close(self):
        for m in self.opened:
            try:
                m.close()
            except Exception:  # a test may have closed its connection by hand (a simulated crash)
                pass
        if self.schemas:
            import psycopg

            with psycopg.connect(self.uri, autocommit=True) as conn:
                for schema in self.schemas:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgres"])
def make_memory(request, tmp_path):
    """A `MemoryFactory` of each backend: SQLite + faiss (`TripleMemory`) and PostgreSQL + pgvector
    (`PgTripleMemory`, on the session's throwaway server); `make_memory.backend` says which."""
    uri = request.getfixturevalue("pg_uri") if request.param == "postgres" else None
    factory = MemoryFactory(request.param, tmp_path, uri)
    yield factory
    factory.close()
