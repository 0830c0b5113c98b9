"""Shared pieces of the benchmarks: the phrase-vector cache, a cached embedder, machine state, results, tables.

The benchmarks are scripts, not tests: each prints a table, writes `benchmarks/results/<name>.json` and a
figure `benchmarks/figures/08_<name>.png` (notebook 08 shows them). Vectors of the default encoder
(all-MiniLM-L6-v2) are cached on disk under `benchmarks/cache/` (git-ignored) so that 1M triples are embedded
once, in chunks that survive interruption;
the time the encoder took is recorded with the cache and reported apart from store+index time.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from retllm_utils.models import unit

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
CACHE = BENCH / "cache"
RESULTS = BENCH / "results"
FIGURES = BENCH / "figures"

# The kit's goals for the memory (at 1M triples) and for a RET-LLM chat turn on CPU: notebook 08, the figures and
# benchmarks/README.md check the results against these, here only.
MEMORY_GOALS = {"fuzzy_p50_ms": 1.0, "fuzzy_recall_at_1": 0.95, "exact_p50_ms": 0.2, "store_triples_per_s": 20_000}
CHAT_TARGETS = {"write_ms": 500, "read_ms": 1500, "ms_per_token": 25}
PG_BULK_GOAL = {"store_triples_per_s": 5_000, "size": "1M"}  # Postgres bulk(): compared in benchmarks/README.md only

SIZES = {"2k": 2_000, "10k": 10_000, "100k": 100_000, "1M": 1_000_000, "10M": 10_000_000}


def parse_size(s: str) -> int:
    return SIZES.get(s) or int(float(s.lower().replace("k", "e3").replace("m", "e6")))


def size_label(n: int) -> str:
    return next((k for k, v in SIZES.items() if v == n), str(n))


# ---------------------------------------------------------------------------------------------- machine state
def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def rss_mib() -> float:
    """Resident set size of this process now (VmRSS), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def machine() -> dict[str, Any]:
    """What the numbers were measured on: cores, memory, CPU model, library versions."""
    info: dict[str, Any] = {"nproc": os.cpu_count(), "python": platform.python_version()}
    try:
        mem_kb = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal:")
        )
        info["mem_gib"] = round(mem_kb / 2**20, 1)
        info["cpu"] = next(
            line.split(":", 1)[1].strip()
            for line in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines()
            if line.startswith("Model name")
        )
    except (StopIteration, OSError):
        pass
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("faiss-cpu", "torch", "transformers", "trl", "peft", "sentence-transformers", "numpy"):
        try:
            info[dist] = version(dist)
        except PackageNotFoundError:
            pass
    try:
        info["git"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        pass
    return info


def busy_processes(min_cpu: float = 20.0) -> list[str]:
    """Other processes using the CPU now (to say in the results what disturbed the timings)."""
    out = subprocess.run(["ps", "-eo", "pid,pcpu,etimes,args", "--sort=-pcpu"], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines()[1:8]:
        pid, cpu, _, args = line.split(None, 3)
        if float(cpu) >= min_cpu and int(pid) != os.getpid():
            rows.append(f"{float(cpu):.0f}% {args[:90]}")
    return rows


def set_threads(n: int) -> None:
    """Threads for faiss and torch (1 for niced background work, 2 = all cores for timings)."""
    try:
        import faiss

        faiss.omp_set_num_threads(n)
    except ImportError:
        pass
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)


def save_result(name: str, payload: dict[str, Any], results: Path = RESULTS) -> Path:
    """`payload` as `results/<name>.json` (benchmarks/results/ unless another folder is given)."""
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    path.write_text(json.dumps(payload, indent=1, default=float) + "\n")
    return path


def table(rows: Sequence[dict[str, Any]], cols: Sequence[str] | None = None) -> str:
    """A plain fixed-width table of dict rows (floats to 3 significant digits)."""
    if not rows:
        return "(no rows)"
    cols = list(cols or rows[0].keys())

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return "nan" if v != v else f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    cells = [[fmt(r.get(c, "")) for c in cols] for r in rows]
    width = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(cols, width)), "  ".join("-" * w for w in width)]
    lines += ["  ".join(v.rjust(w) for v, w in zip(row, width)) for row in cells]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------- vector cache
class VectorCache:
    """phrase -> unit float32 vector of one encoder, on disk as numbered .npz chunks (append-only).

    Each chunk records how long the encoder took for it, with the load average then, so embedding time is
    reported from real measurements even when the cache was filled over several runs.
    """

    def __init__(self, embedder_name: str, root: Path = CACHE):
        self.dir = root / "vectors" / embedder_name.replace("/", "_")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.index: dict[str, tuple[int, int]] = {}  # text -> (chunk no, row)
        self._chunks: dict[int, np.ndarray] = {}
        self.log: list[dict[str, Any]] = []
        for f in sorted(self.dir.glob("chunk-*.npz")):
            no = int(f.stem.split("-")[1])
            with np.load(f, allow_pickle=False) as z:
                texts = z["texts"].tolist()
            self.index.update((t, (no, i)) for i, t in enumerate(texts))
            meta = f.with_suffix(".json")
            if meta.exists():
                self.log.append(json.loads(meta.read_text()))

    def __contains__(self, text: str) -> bool:
        return text in self.index

    def missing(self, texts: Sequence[str]) -> list[str]:
        return [t for t in dict.fromkeys(texts) if t not in self.index]

    def _chunk(self, no: int) -> np.ndarray:
        if no not in self._chunks:
            with np.load(self.dir / f"chunk-{no:05d}.npz", allow_pickle=False) as z:
                self._chunks[no] = z["vecs"]
        return self._chunks[no]

    def get(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of cached texts, in order (KeyError for a text not cached)."""
        out = np.empty((len(texts), self._dim()), np.float32)
        for i, t in enumerate(texts):
            no, row = self.index[t]
            out[i] = self._chunk(no)[row]
        return out

    def _dim(self) -> int:
        no = next(iter(self.index.values()))[0]
        return self._chunk(no).shape[1]

    def fill(
        self,
        texts: Sequence[str],
        embedder: Any,
        chunk: int = 4096,
        budget_s: float | None = None,
        verbose: bool = True,
    ) -> int:
        """Encode and store the texts not cached yet, chunk by chunk; stops after `budget_s`. Returns # left."""
        todo = self.missing(texts)
        t_start = time.perf_counter()
        no = max((n for n, _ in self.index.values()), default=0) + 1
        for i in range(0, len(todo), chunk):
            if budget_s is not None and time.perf_counter() - t_start > budget_s:
                return len(todo) - i
            part = todo[i : i + chunk]
            load0 = loadavg()[0]
            t0 = time.perf_counter()
            vecs = np.asarray(embedder.encode(part), np.float32)
            dt = time.perf_counter() - t0
            vecs = unit(vecs)
            np.savez(self.dir / f"chunk-{no:05d}.npz", texts=np.array(part), vecs=vecs)
            meta = {
                "chunk": no,
                "n": len(part),
                "encode_s": dt,
                "loadavg_before": load0,
                "loadavg_after": loadavg()[0],
                "threads": _torch_threads(),
                "nice": os.nice(0),
                "time": time.strftime("%Y-%m-%d %H:%M:%S"),
            }
            (self.dir / f"chunk-{no:05d}.json").write_text(json.dumps(meta))
            self.log.append(meta)
            self.index.update((t, (no, j)) for j, t in enumerate(part))
            self._chunks[no] = vecs
            if verbose:
                print(
                    f"  cached {i + len(part):,}/{len(todo):,} phrases ({len(part) / dt:.0f}/s, load {load0:.2f})",
                    flush=True,
                )
            no += 1
        return 0

    def encode_rate(self) -> dict[str, float]:
        """Phrases/s over every chunk the cache was filled with (as filled: threads, nice and load vary)."""
        n = sum(m["n"] for m in self.log)
        s = sum(m["encode_s"] for m in self.log)
        best = max(self.log, key=lambda m: m["n"] / m["encode_s"], default=None)
        return {
            "phrases": n,
            "encode_s": s,
            "phrases_per_s": n / s if s else float("nan"),
            "best_chunk": None
            if best is None
            else {"phrases_per_s": best["n"] / best["encode_s"], "loadavg": best["loadavg_before"], "n": best["n"]},
            "threads": sorted({m.get("threads") for m in self.log} - {None}),
            "mean_loadavg": float(np.mean([m["loadavg_before"] for m in self.log])) if self.log else float("nan"),
        }


def _torch_threads() -> int | None:
    return sys.modules["torch"].get_num_threads() if "torch" in sys.modules else None


class CachedEmbedder:
    """Looks vectors up in a VectorCache; a miss is encoded by the real encoder (loaded on first miss) and
    counted. It carries the real encoder's name, dim and thresholds, so a memory built with it reopens with
    the real one."""

    def __init__(self, cache: VectorCache, name: str, dim: int, thresholds: dict[str, float], loader: Any = None):
        self.cache, self.name, self.dim, self.thresholds = cache, name, dim, dict(thresholds)
        self.loader, self._real, self.misses = loader, None, 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        miss = [t for t in texts if t not in self.cache]
        if miss:
            if self._real is None:
                if self.loader is None:
                    raise KeyError(f"{len(miss)} phrases not in the vector cache, e.g. {miss[:3]}")
                self._real = self.loader()
            self.misses += len(miss)
            self.cache.fill(miss, self._real, verbose=False)
        return self.cache.get(texts)


ENCODERS = ("minilm", "ngram")  # the bundled all-MiniLM-L6-v2 (default), or hashed trigrams (384-d, instant)


def default_embedder_info(encoder: str = "minilm") -> tuple[str, int, dict[str, float]]:
    """(name, dim, thresholds) of a benchmark encoder, without loading it."""
    if encoder == "ngram":
        from retllm_utils.models import NgramEmbedder

        e = NgramEmbedder(384)  # the MiniLM's dim: same index and vector sizes, encoder cost ~0
        return e.name, e.dim, dict(e.thresholds)
    from retllm_utils.models import DEFAULT_EMBEDDER, MINILM_THRESHOLDS

    return DEFAULT_EMBEDDER, 384, dict(MINILM_THRESHOLDS)


def load_default_embedder(encoder: str = "minilm") -> Any:
    from retllm_utils.models import NgramEmbedder, load_embedder

    return NgramEmbedder(384) if encoder == "ngram" else load_embedder()


def percentiles_ms(samples_s: Sequence[float]) -> dict[str, float]:
    a = np.asarray(samples_s) * 1e3
    return {"p50_ms": float(np.percentile(a, 50)), "p99_ms": float(np.percentile(a, 99)), "mean_ms": float(a.mean())}


def dir_size_mib(paths: Sequence[Path]) -> float:
    return sum(p.stat().st_size for p in paths if p.exists()) / 2**20
