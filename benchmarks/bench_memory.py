"""Memory at scale: TripleMemory with flat / lsh / hnsw indexes at 10k, 100k and 1M triples; PgTripleMemory
(PostgreSQL + pgvector, flat / hnsw) with `--backend postgres`.

    .venv/bin/python benchmarks/embed_cache.py --sizes 10k 100k 1M     # once: phrase vectors (slow, resumable)
    .venv/bin/python benchmarks/bench_memory.py --sizes 10k 100k 1M    # -> benchmarks/results/memory.json
    .venv/bin/python benchmarks/bench_memory.py --sizes 1M --sweep     # recall vs latency (efSearch, nbits)

Per size and index kind, each phase in a fresh process (clean RSS, no warm caches carried over):
- build: `write_many` in batches of 10k triples into a new file-backed memory; time outside the (cached)
  encoder = store+index; then `close()` (faiss files written and hashed) = save.
- query: reopen (load phrase ids, load and verify the faiss files), RSS added by the open memory, then
  `read` one query at a time: exact hits (stored phrases) and fuzzy hits (a near-miss of a stored entity, found
  through the index); recall@1 = the phrase the memory substituted is the exact nearest stored entity
  (brute force over all entity vectors, ties by cosine).
Query vectors come from the cache, so lookup latency excludes the encoder; the encoder's own time (one phrase,
and phrases/s in batches) is measured apart, and embedding time at each size = new phrases / that rate.
Results merge into benchmarks/results/memory.json by (size, kind), so sizes can be measured in separate runs;
figures: benchmarks/figures/08_memory_scaling.png, 08_memory_sweep.png, and `benchmarks/plots.py` for notebook 08's.

    .venv/bin/python benchmarks/bench_memory.py --backend postgres --sizes 10k --threads 1   # -> memory_postgres.json

`--backend postgres` measures the same workload in PgTripleMemory, one schema per size and index, on the server
at `--pg-uri` or, without it, on a private pgserver started on `--dir`/pgdata (stopped at the end). Disk is the
schema's tables with their indexes (pg_total_relation_size); RSS is the client process's only (the server's memory
is not counted); the save step is nothing (commits are durable). Each memory is loaded in one
`PgTripleMemory.bulk()` transaction (the HNSW indexes built once, after the rows; `--no-pg-bulk`: batch by batch
into the live index, as before the bulk path existed). No figure is drawn for it.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import (
    CACHE,
    FIGURES,
    MEMORY_GOALS,
    RESULTS,
    CachedEmbedder,
    VectorCache,
    busy_processes,
    default_embedder_info,
    dir_size_mib,
    load_default_embedder,
    loadavg,
    machine,
    parse_size,
    peak_rss_mib,
    percentiles_ms,
    rss_mib,
    save_result,
    set_threads,
    size_label,
    table,
)
from benchmarks.workload import fuzzy_queries, phrases_of, workload
from retllm_utils.models import unit

KINDS = ["flat", "lsh", "hnsw"]
EF_SWEEP = [16, 24, 32, 48, 64, 128, 256]
NBITS_SWEEP = [128, 256, 512, 768, 1536]  # 3072: a 3072x3072 QR, 13 s per open


def mem_files(path: Path) -> list[Path]:
    return [
        path,
        Path(f"{path}-wal"),
        Path(f"{path}-shm"),
        Path(f"{path}.entity.faiss"),
        Path(f"{path}.relation.faiss"),
    ]


class DictEmbedder:
    """Query vectors handed over by the driver (no encoder in the query process)."""

    def __init__(self, name, dim, thresholds, texts, vecs):
        self.name, self.dim, self.thresholds = name, dim, thresholds
        self.vec = dict(zip(texts, vecs))

    def encode(self, texts):
        return np.stack([self.vec[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


# ---------------------------------------------------------------------------------------------- workers
class TimedEmbedder:
    """An embedder whose encode time is summed (so store+index time = write time - encode time)."""

    def __init__(self, inner):
        self.inner, self.name, self.dim, self.thresholds = inner, inner.name, inner.dim, inner.thresholds
        self.seconds = 0.0

    def encode(self, texts):
        t0 = time.perf_counter()
        try:
            return self.inner.encode(texts)
        finally:
            self.seconds += time.perf_counter() - t0


def open_memory(target, kind: str, embedder, **kw):
    """The memory under test: a TripleMemory file, or a PgTripleMemory schema (target "<uri>#<schema>").

    No spelling check (`fuzzy_char=0`): a fuzzy read then takes the nearest phrase, so recall@1 measures the index."""
    kw.setdefault("fuzzy_char", 0.0)
    if "#" in str(target):
        from retllm_utils.backends.postgres import PgTripleMemory

        uri, schema = str(target).rsplit("#", 1)
        return PgTripleMemory(uri, embedder=embedder, index=kind, schema=schema, **kw)
    from retllm_utils.memory import TripleMemory

    return TripleMemory(target, embedder=embedder, index=kind, **kw)


def pg_disk(target: str) -> dict[str, float]:
    """MiB of each table of the memory's schema, with its indexes and TOAST (pg_total_relation_size)."""
    import psycopg

    uri, schema = target.rsplit("#", 1)
    with psycopg.connect(uri) as conn:
        rows = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
            (schema,),
        ).fetchall()
    return {name: size / 2**20 for name, size in rows}


def memory_exists(target) -> bool:
    """Whether an earlier build is there: the SQLite file, or the Postgres schema ("<uri>#<schema>")."""
    if "#" in str(target):
        import psycopg

        uri, schema = str(target).rsplit("#", 1)
        with psycopg.connect(uri, autocommit=True) as conn:
            sql = "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s"
            return conn.execute(sql, (schema,)).fetchone() is not None
    return Path(target).exists()


def drop_memory(target) -> None:
    """Remove an earlier build: the SQLite file and its companions, or the Postgres schema."""
    if "#" in str(target):
        import psycopg

        uri, schema = str(target).rsplit("#", 1)
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        return
    for f in mem_files(target):
        f.unlink(missing_ok=True)


def build_memory(
    path,
    kind: str,
    embedder,
    triples,
    batch: int,
    bulk: bool = False,
    hnsw_m: int = 16,
    work_mem: str = "1GB",
    workers: int | None = None,
) -> dict:
    """Write `triples` in batches into a new memory at `path`, then close it (saving the indexes); `bulk` (Postgres):
    every batch inside one `PgTripleMemory.bulk()` load, the HNSW indexes built once at its end with `work_mem` as
    maintenance_work_mem and `workers` parallel maintenance workers (None: the server's setting); `hnsw_m`
    (Postgres): the HNSW graph's links per node."""
    ents, rels = phrases_of(triples)
    emb = TimedEmbedder(embedder)
    drop_memory(path)
    rss0 = rss_mib()
    load0 = loadavg()
    mem = open_memory(path, kind, emb, **({"hnsw_m": hnsw_m} if "#" in str(path) else {}))
    t0 = time.perf_counter()
    with mem.bulk(maintenance_work_mem=work_mem, workers=workers) if bulk else contextlib.nullcontext():
        for i in range(0, len(triples), batch):
            mem.write_many(triples[i : i + batch])
    write_s = time.perf_counter() - t0
    # a bulk load's rows, index builds and statistics (the rest of write_s: the commit)
    split = {"bulk_split_s": mem.last_bulk} if bulk else {}
    rss_built = rss_mib() - rss0
    t1 = time.perf_counter()
    mem.close()
    save_s = time.perf_counter() - t1
    n = len(triples)
    if "#" in str(path):
        disk = {"disk_files_mib": {k: round(v, 1) for k, v in pg_disk(str(path)).items()}}
        disk["disk_mib"] = sum(pg_disk(str(path)).values())
    else:
        disk = {
            "disk_mib": dir_size_mib(mem_files(path)),
            "disk_files_mib": {f.name: round(f.stat().st_size / 2**20, 1) for f in mem_files(path) if f.exists()},
        }
    return {
        "n_triples": n,
        "n_entities": len(ents),
        "n_relations": len(rels),
        "batch": batch,
        "bulk": bulk,
        **({"hnsw_m": hnsw_m} if "#" in str(path) and kind == "hnsw" else {}),
        **({"maintenance_work_mem": work_mem, "parallel_maintenance_workers": workers} if bulk else {}),
        "write_s": write_s,
        **split,
        "cache_lookup_s": emb.seconds,
        "store_index_s": write_s - emb.seconds,
        "store_index_triples_per_s": n / (write_s - emb.seconds),
        "save_s": save_s,
        "build_rss_mib": rss_built,
        "build_peak_rss_mib": peak_rss_mib(),
        **disk,
        "loadavg_build": [load0, loadavg()],
    }


def worker_build(a) -> dict:
    set_threads(a.threads)
    name, dim, th = default_embedder_info(a.encoder)
    cache = VectorCache(name)
    triples = workload(a.size, a.seed, a.queries)[0]
    ents, rels = phrases_of(triples)
    cache.get(ents + rels)  # load the cached vectors now: reading the cache is not the memory's time
    return build_memory(
        a.path if "#" in a.path else Path(a.path),
        a.kind,
        CachedEmbedder(cache, name, dim, th),
        triples,
        a.batch,
        bulk="#" in a.path and a.pg_bulk,
        hnsw_m=a.pg_hnsw_m,
        work_mem=a.pg_work_mem,
        workers=a.pg_workers,
    )


def _lookups(mem, exact, fuzzy, gt_cos, warm=50):
    for q in exact[:warm]:
        mem.read(q)
    for q, _ in fuzzy[:warm]:
        mem.read_explained(q)
    ex_t, ex_n = [], 0
    for q in exact:
        t0 = time.perf_counter()
        r = mem.read(q)
        ex_t.append(time.perf_counter() - t0)
        ex_n += len(r)
    fz_t, hits, accepted, same_src, fz_n = [], 0, 0, 0, 0
    for (q, src), best in zip(fuzzy, gt_cos):
        t0 = time.perf_counter()
        res = mem.read_explained(q)
        fz_t.append(time.perf_counter() - t0)
        sub = res.substitutions[0]
        hits += sub.stored is not None and sub.cosine >= best - 1e-5
        accepted += sub.accepted
        same_src += sub.stored == src
        fz_n += len(res.matches)
    k = len(fuzzy)
    return {
        "exact": {**percentiles_ms(ex_t), "mean_results": ex_n / len(exact)},
        "fuzzy": {
            **percentiles_ms(fz_t),
            "recall_at_1": hits / k,
            "accepted": accepted / k,
            "nearest_is_source": same_src / k,
            "mean_results": fz_n / k,
        },
    }


def _set_shared_buffers(server, size: str | None) -> None:
    """Write the private server's shared_buffers (None: back to the default) and stop it; the next start reads it."""
    import psycopg

    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET shared_buffers = '{size}'" if size else "ALTER SYSTEM RESET shared_buffers")
    server.cleanup()


def reset_shared_buffers_at_exit(pgdata: Path) -> None:
    """ALTER SYSTEM persists in the data directory: reset it when the run ends however Python sees the end (done,
    an error, Ctrl-C, SIGTERM), so a failed run does not leave the next run's server changed. kill -9 still does."""

    def reset() -> None:
        from retllm_utils.backends.postgres import local_server

        _set_shared_buffers(local_server(pgdata, cleanup_mode="stop"), None)

    atexit.register(reset)
    signal.signal(signal.SIGTERM, lambda sig, _frame: sys.exit(128 + sig))


def query_memory(
    path,
    kind: str,
    embedder,
    exact,
    fuzzy,
    gt,
    sweep: bool,
    ef_sweep=EF_SWEEP,
    nbits_sweep=NBITS_SWEEP,
    warmup=(),
    ef_search: int | None = None,
) -> dict:
    """Reopen the memory at `path`, then time exact and fuzzy reads one at a time (and sweep, if asked). `warmup`:
    other fuzzy queries read first, untimed, so a server's cache holds what such reads touch (a server in use);
    `ef_search`: the HNSW efSearch of the timed reads (None: the memory's default)."""
    from retllm_utils.memory import TripleMemory

    load0 = loadavg()
    rss0 = rss_mib()
    t0 = time.perf_counter()
    mem = open_memory(path, kind, embedder)
    if ef_search is not None:
        mem.hnsw_ef_search = ef_search
    reopen_s = time.perf_counter() - t0
    out = {"reopen_s": reopen_s, "reopen_status": dict(mem.index_status), "open_rss_mib": rss_mib() - rss0}
    out["ef_search"] = mem.hnsw_ef_search if kind == "hnsw" else None
    t0 = time.perf_counter()
    for q, _ in warmup:
        mem.read_explained(q)
    out["warmup"] = {"queries": len(warmup), "seconds": time.perf_counter() - t0}
    out.update(_lookups(mem, exact, fuzzy, gt))
    points = []
    if sweep and kind == "hnsw":
        default = mem.hnsw_ef_search
        for ef in ef_sweep:
            mem.hnsw_ef_search = ef
            points.append({"param": "efSearch", "value": ef, **_lookups(mem, exact[:100], fuzzy, gt)["fuzzy"]})
        mem.hnsw_ef_search = default
    mem.close()
    if sweep and kind == "lsh":
        for nbits in list(nbits_sweep) + [None]:  # None last: leaves the saved index at the default nbits
            m = TripleMemory(path, embedder=embedder, index="lsh", lsh_nbits=nbits, fuzzy_char=0.0)
            if nbits is not None:
                points.append({"param": "nbits", "value": nbits, **_lookups(m, exact[:100], fuzzy, gt)["fuzzy"]})
            m.close()
    out["sweep"] = points
    out["loadavg_query"] = [load0, loadavg()]
    return out


def worker_query(a) -> dict:
    set_threads(a.threads)
    q = json.loads(Path(a.queries_file).read_text())
    z = np.load(a.queries_file.replace(".json", ".npz"))
    name, dim, th = default_embedder_info(a.encoder)
    emb = DictEmbedder(name, dim, th, z["texts"].tolist(), z["vecs"])
    return query_memory(
        a.path if "#" in a.path else Path(a.path),
        a.kind,
        emb,
        [tuple(x) for x in q["exact"]],
        [(tuple(x), src) for x, src in q["fuzzy"]],
        q["gt_cos"],
        a.sweep,
        warmup=[(tuple(x), src) for x, src in q.get("warmup", [])],
        ef_search=a.ef_search,
    )


def run_in_process(
    n: int,
    embedder,
    workdir: Path,
    kinds=KINDS,
    seed: int = 0,
    queries: int = 200,
    sweep: bool = True,
    batch: int = 10_000,
    threads: int = 1,
    ef_sweep=EF_SWEEP,
    nbits_sweep=NBITS_SWEEP,
) -> dict:
    """The whole benchmark for a small size in this process, with any embedder (e.g. NgramEmbedder): for the
    notebook's smoke profile. Same record format as benchmarks/results/memory.json; RSS is not isolated per phase."""
    set_threads(threads)
    triples, exact, fuzzy, needed = workload(n, seed, queries)
    texts = list(dict.fromkeys(needed))
    t0 = time.perf_counter()
    vecs = np.asarray(embedder.encode(texts), np.float32)
    embed_s = time.perf_counter() - t0
    vecs = unit(vecs)
    emb = DictEmbedder(embedder.name, embedder.dim, embedder.thresholds, texts, vecs)
    ents, _ = phrases_of(triples)
    pos = {t: i for i, t in enumerate(texts)}
    E, Q = vecs[[pos[e] for e in ents]], vecs[[pos[q[0] or q[2]] for q, _ in fuzzy]]
    gt = (Q @ E.T).max(axis=1)
    runs = []
    for kind in kinds:
        path = Path(workdir) / f"{size_label(n)}-{kind}.sqlite"
        rec = {
            "size": size_label(n),
            "kind": kind,
            **build_memory(path, kind, emb, triples, batch),
            **query_memory(path, kind, emb, exact, fuzzy, gt.tolist(), sweep, ef_sweep, nbits_sweep),
        }
        rec["embed_s"] = embed_s
        runs.append(rec)
    return {
        "benchmark": "memory",
        "embedder": embedder.name,
        "seed": seed,
        "queries": queries,
        "runs": runs,
        "machine": machine(),
    }


# ---------------------------------------------------------------------------------------------- driver
def ground_truth(cache: VectorCache, ents: list[str], fuzzy) -> np.ndarray:
    """Cosine of the exact nearest stored entity for each fuzzy query term (brute force)."""
    E = cache.get(ents)
    terms = [q[0] or q[2] for q, _ in fuzzy]
    Q = cache.get(terms)
    best = np.full(len(terms), -2.0, np.float32)
    for i in range(0, len(E), 50_000):
        best = np.maximum(best, (Q @ E[i : i + 50_000].T).max(axis=1))
    return best


def run_worker(role: str, a, kind: str, n: int, path: Path, extra: list[str] = ()) -> dict:
    cmd = [
        sys.executable,
        __file__,
        "--worker",
        role,
        "--kind",
        kind,
        "--size",
        str(n),
        "--path",
        str(path),
        "--seed",
        str(a.seed),
        "--queries",
        str(a.queries),
        "--threads",
        str(a.threads),
        "--batch",
        str(a.batch),
        "--encoder",
        a.encoder,
        "--pg-bulk" if a.pg_bulk else "--no-pg-bulk",
        "--pg-hnsw-m",
        str(a.pg_hnsw_m),
        "--pg-work-mem",
        a.pg_work_mem,
        *(["--pg-workers", str(a.pg_workers)] if a.pg_workers is not None else []),
        *(["--ef-search", str(a.ef_search)] if a.ef_search is not None else []),
        *extra,
    ]
    if a.backend == "postgres":  # PgTripleMemory's server process inherits nothing: the client is measured alone
        cmd[cmd.index("--path") + 1] = f"{a.pg_uri}#{path}"
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode:
        sys.stderr.write(p.stdout + p.stderr)
        raise SystemExit(f"{role} worker failed for {kind} at {n}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def encoder_speed(encoder: str, phrases: list[str], threads: int) -> dict:
    """The default encoder measured now: one phrase at a time (as a fuzzy query) and batched (as a write)."""
    import torch

    torch.set_num_threads(threads)
    emb = load_default_embedder(encoder)
    emb.encode(phrases[:64])
    one = []
    for p in phrases[:100]:
        t0 = time.perf_counter()
        emb.encode([p])
        one.append(time.perf_counter() - t0)
    batch = phrases[100 : 100 + 2048]
    t0 = time.perf_counter()
    emb.encode(batch)
    dt = time.perf_counter() - t0
    return {
        "one_phrase": percentiles_ms(one),
        "batch_phrases_per_s": len(batch) / dt,
        "threads": threads,
        "loadavg": loadavg(),
    }


def figure(res: dict, stem: str = "memory") -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = res["runs"]
    colors = {"flat": "tab:gray", "lsh": "tab:orange", "hnsw": "tab:blue"}
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), dpi=100)
    for kind in KINDS:
        rs = sorted((r for r in runs if r["kind"] == kind), key=lambda r: r["n_triples"])
        if not rs:
            continue
        x = [r["n_triples"] for r in rs]
        axes[0].plot(x, [r["fuzzy"]["p50_ms"] for r in rs], "o-", color=colors[kind], label=f"{kind} fuzzy p50")
        axes[0].plot(
            x, [r["exact"]["p50_ms"] for r in rs], "s--", color=colors[kind], alpha=0.6, label=f"{kind} exact p50"
        )
        axes[1].plot(x, [r["store_index_triples_per_s"] for r in rs], "o-", color=colors[kind], label=kind)
        axes[2].plot(x, [r["open_rss_mib"] for r in rs], "o-", color=colors[kind], label=f"{kind} RSS")
        axes[2].plot(x, [r["disk_mib"] for r in rs], "s--", color=colors[kind], alpha=0.6, label=f"{kind} disk")
    axes[0].axhline(MEMORY_GOALS["fuzzy_p50_ms"], color="k", lw=0.6, ls=":")
    axes[0].set(xscale="log", yscale="log", xlabel="triples", ylabel="ms per read", title="lookup latency (p50)")
    axes[1].axhline(MEMORY_GOALS["store_triples_per_s"], color="k", lw=0.6, ls=":")
    axes[1].set(xscale="log", xlabel="triples", ylabel="triples/s", title="store+index throughput")
    axes[2].set(xscale="log", yscale="log", xlabel="triples", ylabel="MiB", title="memory: RSS and disk")
    for ax in axes:
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    out = [FIGURES / f"08_{stem}_scaling.png"]
    FIGURES.mkdir(exist_ok=True)
    fig.savefig(out[0])
    sweeps = [r for r in runs if r.get("sweep")]
    if sweeps:
        fig, ax = plt.subplots(figsize=(5.5, 3.8), dpi=100)
        for r in sweeps:
            pts = r["sweep"]
            ax.plot(
                [p["p50_ms"] for p in pts],
                [p["recall_at_1"] for p in pts],
                "o-",
                color=colors[r["kind"]],
                label=f"{r['kind']} {pts[0]['param']} @ {size_label(r['n_triples'])}",
            )
            for p in pts:
                ax.annotate(
                    str(p["value"]),
                    (p["p50_ms"], p["recall_at_1"]),
                    fontsize=6,
                    xytext=(3, -8),
                    textcoords="offset points",
                )
        flat = [r for r in runs if r["kind"] == "flat" and r["n_triples"] in {s["n_triples"] for s in sweeps}]
        for r in flat:
            ax.plot(
                r["fuzzy"]["p50_ms"],
                r["fuzzy"]["recall_at_1"],
                "s",
                color=colors["flat"],
                label=f"flat @ {size_label(r['n_triples'])}",
            )
        ax.axhline(MEMORY_GOALS["fuzzy_recall_at_1"], color="k", lw=0.6, ls=":")
        ax.axvline(MEMORY_GOALS["fuzzy_p50_ms"], color="k", lw=0.6, ls=":")
        ax.set(
            xscale="log", xlabel="fuzzy lookup p50 (ms)", ylabel="recall@1 vs exact search", title="recall vs latency"
        )
        ax.legend(fontsize=7)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        out.append(FIGURES / f"08_{stem}_sweep.png")
        fig.savefig(out[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", default=["10k", "100k", "1M"])
    ap.add_argument(
        "--kinds", nargs="+", default=None, choices=KINDS, help="default: flat lsh hnsw (postgres: flat hnsw)"
    )
    ap.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    ap.add_argument(
        "--pg-bulk",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="postgres: load each memory in one bulk() transaction, HNSW indexes built once at the end (default)",
    )
    ap.add_argument("--pg-hnsw-m", type=int, default=16, help="postgres: HNSW links per node (m; the kit's default 16)")
    ap.add_argument(
        "--pg-work-mem", default="1GB", help="postgres: maintenance_work_mem of a bulk load's index builds (bulk()'s)"
    )
    ap.add_argument(
        "--pg-workers",
        type=int,
        default=None,
        help="postgres: parallel maintenance workers of a bulk load's index builds (default: the server's, 2)",
    )
    ap.add_argument(
        "--pg-shared-buffers",
        default=None,
        help="postgres: the private server's shared_buffers, set before the run and reset after it, "
        "also after an error or SIGTERM (e.g. 8GB; default: the server's, 128MB)",
    )
    ap.add_argument("--pg-uri", help="postgres: your server's URI (default: a private pgserver on --dir/pgdata)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", type=int, default=1000, help="exact and fuzzy lookups, each")
    ap.add_argument("--threads", type=int, default=2, help="faiss threads (2 = every core here)")
    ap.add_argument("--batch", type=int, default=10_000, help="triples per write_many call")
    ap.add_argument("--sweep", action="store_true", help="also sweep HNSW efSearch and LSH nbits")
    ap.add_argument("--no-build", action="store_true", help="reuse the memories built by an earlier run")
    ap.add_argument(
        "--ef-search", type=int, default=None, help="HNSW efSearch of the timed reads (default: the memory's, 64)"
    )
    ap.add_argument(
        "--warmup",
        type=int,
        default=0,
        help="fuzzy queries (another seed's) read untimed before the timed ones, to time a warm server or page cache",
    )
    ap.add_argument("--encoder-check", type=int, default=1, help="0: skip timing the encoder itself")
    ap.add_argument("--encoder-only", action="store_true", help="only time the encoder, keep the memory results")
    ap.add_argument("--dir", type=Path, default=CACHE / "memories", help="where the memories are built")
    ap.add_argument(
        "--encoder",
        choices=["minilm", "ngram"],
        default="minilm",
        help="minilm: the bundled all-MiniLM-L6-v2; ngram: hashed trigrams, 384-d (no model, for scale)",
    )
    ap.add_argument("--out", default=None, help="benchmarks/results/<out>.json (default memory, or memory_ngram)")
    ap.add_argument("--worker", choices=["build", "query"], help=argparse.SUPPRESS)
    ap.add_argument("--kind", help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--path", help=argparse.SUPPRESS)
    ap.add_argument("--queries-file", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps((worker_build if a.worker == "build" else worker_query)(a), default=float))
        return

    name, dim, th = default_embedder_info(a.encoder)
    a.kinds = a.kinds or (["flat", "hnsw"] if a.backend == "postgres" else KINDS)
    if a.backend == "postgres" and "lsh" in a.kinds:
        raise SystemExit("pgvector has no LSH index: --kinds flat hnsw")
    suffix = "_postgres" if a.backend == "postgres" else ""
    a.out = a.out or ("memory" if a.encoder == "minilm" else f"memory_{a.encoder}") + suffix
    server = None
    if a.backend == "postgres":
        a.dir.mkdir(parents=True, exist_ok=True)
        if not a.pg_uri:
            from retllm_utils.backends.postgres import local_server

            server = local_server(a.dir / "pgdata", cleanup_mode="stop")
            if a.pg_shared_buffers:  # a server setting: takes a restart, so set it, stop, start again
                _set_shared_buffers(server, a.pg_shared_buffers)
                reset_shared_buffers_at_exit(a.dir / "pgdata")
                server = local_server(a.dir / "pgdata", cleanup_mode="stop")
            a.pg_uri = server.get_uri()
        elif a.pg_shared_buffers:
            raise SystemExit("--pg-shared-buffers sets the private server's; set your own server's yourself")
    cache = VectorCache(name)
    out_path = RESULTS / f"{a.out}.json"
    res = json.loads(out_path.read_text()) if out_path.exists() else {"runs": []}
    res.update(
        {
            "benchmark": "memory",
            "embedder": name,
            "seed": a.seed,
            "queries": a.queries,
            "faiss_threads": a.threads,
            "batch": a.batch,
            "machine": machine(),
            "cache_fill": cache.encode_rate(),
            "backend": a.backend,
        }
    )
    if a.backend == "postgres":
        import psycopg

        with psycopg.connect(a.pg_uri, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            res["server"] = {
                "postgres": conn.execute("SHOW server_version").fetchone()[0],
                "pgvector": conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0],
                "private_pgserver": server is not None,
                "shared_buffers": conn.execute("SHOW shared_buffers").fetchone()[0],
            }
    a.dir.mkdir(parents=True, exist_ok=True)
    for size in [] if a.encoder_only else a.sizes:
        n = parse_size(size)
        triples, exact, fuzzy, needed = workload(n, a.seed, a.queries)
        missing = cache.missing(needed)
        if missing:
            raise SystemExit(
                f"{len(missing):,} phrases of {size} are not in the vector cache: run "
                f"benchmarks/embed_cache.py --encoder {a.encoder} --sizes {size} first"
            )
        ents, rels = phrases_of(triples)
        gt = ground_truth(cache, ents, fuzzy)
        # warm-up queries: made like the timed ones from another seed, none of them timed (their few vectors encoded
        # now if the cache lacks them)
        warm = [w for w in fuzzy_queries(triples, a.warmup, a.seed + 1, set(ents)) if w not in fuzzy]
        if cache.missing(wterms := [x for q, _ in warm for x in q if x]):
            cache.fill(wterms, load_default_embedder(a.encoder), verbose=False)
        del triples
        qdir = Path(tempfile.mkdtemp(prefix="bench_q"))
        qfile = qdir / "q.json"
        qfile.write_text(json.dumps({"exact": exact, "fuzzy": fuzzy, "gt_cos": gt.tolist(), "warmup": warm}))
        terms = list(dict.fromkeys(x for q in [q for q, _ in fuzzy + warm] + exact for x in q if x))
        np.savez(qdir / "q.npz", texts=np.array(terms), vecs=cache.get(terms))
        for kind in a.kinds:
            path = a.dir / f"{size_label(n)}-{kind}{'' if a.encoder == 'minilm' else '-' + a.encoder}.sqlite"
            if a.backend == "postgres":  # a schema: run_worker passes "<uri>#<schema>"
                path = Path(f"bench_{size_label(n)}_{kind}{'' if a.encoder == 'minilm' else '_' + a.encoder}".lower())
            print(f"== {size_label(n)} {kind}: load {loadavg()}", flush=True)
            busy = busy_processes()
            if a.no_build and memory_exists(f"{a.pg_uri}#{path}" if a.backend == "postgres" else path):
                prev = next((r for r in res["runs"] if r["n_triples"] == n and r["kind"] == kind), None)
                build = {
                    k: v
                    for k, v in (prev or {}).items()
                    if k
                    in (
                        "n_triples",
                        "n_entities",
                        "n_relations",
                        "batch",
                        "bulk",
                        "write_s",
                        "cache_lookup_s",
                        "store_index_s",
                        "store_index_triples_per_s",
                        "save_s",
                        "build_rss_mib",
                        "build_peak_rss_mib",
                        "disk_mib",
                        "disk_files_mib",
                        "loadavg_build",
                    )
                }
            else:
                build = run_worker("build", a, kind, n, path)
                print(f"   built: {build['store_index_triples_per_s']:,.0f} triples/s store+index", flush=True)
            query = run_worker(
                "query", a, kind, n, path, ["--queries-file", str(qfile)] + (["--sweep"] if a.sweep else [])
            )
            rec = {
                "size": size_label(n),
                "kind": kind,
                **build,
                **query,
                "busy_processes": busy,
                "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            }
            if not a.sweep:  # keep an earlier sweep of this size and kind
                prev = next((r for r in res["runs"] if r["n_triples"] == n and r["kind"] == kind), {})
                rec["sweep"] = prev.get("sweep", [])
            res["runs"] = [r for r in res["runs"] if not (r["n_triples"] == n and r["kind"] == kind)] + [rec]
            res["runs"].sort(key=lambda r: (r["n_triples"], KINDS.index(r["kind"])))
            save_result(a.out, res)
        shutil.rmtree(qdir)
    if a.encoder_check:
        ents = phrases_of(workload(10_000, a.seed + 7, 10)[0])[0]
        res["encoder"] = encoder_speed(a.encoder, ents, a.threads)
    rate = (res.get("encoder") or {}).get("batch_phrases_per_s")
    for r in res["runs"]:
        r["embed_s_est"] = (r["n_entities"] + r["n_relations"]) / rate if rate else None
        if rate:
            r["write_triples_per_s_with_embedding"] = r["n_triples"] / (r["embed_s_est"] + r["store_index_s"])
    save_result(a.out, res)
    rows = [
        {
            "size": r["size"],
            "index": r["kind"],
            "phrases": r["n_entities"] + r["n_relations"],
            "embed s (est)": r.get("embed_s_est") or float("nan"),
            "store+index s": r["store_index_s"],
            "store+index tr/s": r["store_index_triples_per_s"],
            "exact p50 ms": r["exact"]["p50_ms"],
            "exact p99 ms": r["exact"]["p99_ms"],
            "fuzzy p50 ms": r["fuzzy"]["p50_ms"],
            "fuzzy p99 ms": r["fuzzy"]["p99_ms"],
            "recall@1": r["fuzzy"]["recall_at_1"],
            "RSS MiB": r["open_rss_mib"],
            "disk MiB": r["disk_mib"],
            "reopen s": r["reopen_s"],
            "load": r["loadavg_query"][0][0],
        }
        for r in res["runs"]
    ]
    print(table(rows))
    for r in res["runs"]:
        for p in r.get("sweep", []):
            print(
                f"  {r['size']} {r['kind']} {p['param']}={p['value']}: p50 {p['p50_ms']:.3f} ms "
                f"p99 {p['p99_ms']:.3f} ms recall@1 {p['recall_at_1']:.3f}"
            )
    if res.get("encoder"):
        e = res["encoder"]
        print(
            f"encoder ({name}, {e['threads']} threads): one phrase p50 {e['one_phrase']['p50_ms']:.1f} ms, "
            f"batched {e['batch_phrases_per_s']:.0f} phrases/s (load {e['loadavg'][0]:.2f})"
        )
    for f in figure(res, a.out) if a.backend == "sqlite" else []:
        print("figure:", os.path.relpath(f))
    if server is not None:
        server.cleanup()  # a shared_buffers of --pg-shared-buffers is reset at exit (reset_shared_buffers_at_exit)
    print("results:", os.path.relpath(out_path))


if __name__ == "__main__":
    main()
