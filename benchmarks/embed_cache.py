"""Fill the phrase-vector cache for the memory benchmark (heavy, not a timing: run it niced, one thread).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/embed_cache.py --sizes 10k 100k 1M --budget-min 20

Encodes every phrase the given sizes need (stored entities and relations, and the fuzzy queries) with the
default encoder (all-MiniLM-L6-v2) into benchmarks/cache/vectors/ (git-ignored), chunk by chunk: an
interrupted or budget-limited run keeps what it did, the next run goes on. Each chunk records its encode time.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import (
    VectorCache,
    default_embedder_info,
    load_default_embedder,
    loadavg,
    parse_size,
    set_threads,
)
from benchmarks.workload import workload


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", nargs="+", default=["10k", "100k", "1M"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--encoder", choices=["minilm", "ngram"], default="minilm")
    ap.add_argument("--budget-min", type=float, default=None, help="stop after this many minutes (resumable)")
    args = ap.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    set_threads(args.threads)
    name, _, _ = default_embedder_info(args.encoder)
    cache = VectorCache(name)
    embedder = None
    t0 = time.perf_counter()
    for size in args.sizes:
        n = parse_size(size)
        needed = workload(n, args.seed, args.queries)[3]
        todo = cache.missing(needed)
        print(f"{size}: {len(set(needed)):,} phrases, {len(todo):,} not cached (load {loadavg()[0]:.2f})", flush=True)
        if not todo:
            continue
        embedder = embedder or load_default_embedder(args.encoder)
        budget = None if args.budget_min is None else args.budget_min * 60 - (time.perf_counter() - t0)
        left = cache.fill(todo, embedder, budget_s=budget)
        if left:
            print(f"budget spent: {left:,} phrases of {size} left; run again to go on")
            return
    print("cache:", cache.encode_rate())


if __name__ == "__main__":
    main()
