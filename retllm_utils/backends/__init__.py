"""The memory's storage backends, each a `triple_store.TripleStore` (the papers' reads over it: `memory.MemoryReads`).

- `sqlite`: `SqliteStore`, SQLite rows and phrase vectors with faiss indexes beside the file; `memory.TripleMemory`
  is the papers' memory on it (notebooks 03, 07, 08).
- `postgres`: `PgTripleMemory`, the same memory on PostgreSQL + pgvector, beyond both papers (MemLLM-size memories
  behind a server); `local_server`, `open_memory`. Needs the `postgres` extra; nothing else imports it.
- `pg_phrases`: the pieces of it that stand in for SQLite's: a `?`-placeholder connection, phrase ids and the
  nearest-phrase search in SQL.

This package imports nothing itself, so loading one backend never loads another's driver.
"""
