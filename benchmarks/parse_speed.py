"""Parser cost on hostile and ordinary shapes: every parse/strip function must stay linear in its input.

    .venv/bin/python benchmarks/parse_speed.py                 # 1 MB of each shape, every function
    .venv/bin/python benchmarks/parse_speed.py --mb 0.25 1 4   # the scaling: 4x the input should cost ~4x

Prints a table of seconds per call, best of `--repeat`, as "wall / cpu" (the process's CPU time, which other load
on the machine inflates less); the goal is <= 0.5 s at 1 MB on the development machine (2 cores). Not a timed test:
a loaded machine would make one flaky. `neutralize` (the controller's user-text filter) is timed when torch is
importable.
"""

from __future__ import annotations

import argparse
import time
from typing import Callable

from retllm_utils import api

SHAPES = {  # name -> one repeated unit
    "[MEM_X]": "[MEM_X]",
    "({MEM_READ(": "({MEM_READ(",
    "MemLLM writes": "({MEM_WRITE-->Ann Lee>>employer>>Pfizer;Bo Wu>>employer>>Pfizer}) and ",
    "MemLLM reads": "({MEM_READ(Ann>>employer>>;>>founded by>>Bo)-->Pfizer, Moderna}) then ",
    "RET-LLM writes": "[MEM_WRITE{Ann Lee>>employed by>>Pfizer}] ok ",
    "RET-LLM reads": "[MEM_READ{>>employed by>>Pfizer}:{Ann>>employed by>>Pfizer};{Bo>>employed by>>Pfizer}] ",
    "[MEM_WRITE{": "[MEM_WRITE{",
    "[MEM_READ{a>>b>>}:{": "[MEM_READ{a>>b>>}:{",
    "({MEM_WRITE-->a": "({MEM_WRITE-->a",
    "escapes": "[MEM_WRITE{a\\}:b\\>\\>c>>r\\;s>>o\\]}]({MEM_WRITE-->a\\)-->b>>r>>o}) ",
    "plain text": "The quick brown fox jumps over the lazy dog. ",
}


def functions() -> dict[str, Callable[[str], object]]:
    """The functions timed: the four parse/strip functions, and the controller's `neutralize` if it imports."""
    out: dict[str, Callable[[str], object]] = {
        "parse_retllm": api.parse_retllm,
        "strip_retllm_calls": api.strip_retllm_calls,
        "parse_memllm": api.parse_memllm,
        "strip_memllm_calls": api.strip_memllm_calls,
    }
    try:
        from retllm_utils.controller import neutralize

        out["neutralize"] = neutralize
    except ImportError:
        pass
    return out


def best_time(fn: Callable[[str], object], text: str, repeat: int) -> tuple[float, float]:
    """The fastest of `repeat` calls, (wall, cpu) seconds: the least disturbed by other load."""
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn(text)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return min(walls), min(cpus)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, nargs="+", default=[1.0], help="input sizes in MB (10^6 characters)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--only", nargs="*", default=None, help="function names to time (default: all)")
    args = ap.parse_args()
    fns = {k: v for k, v in functions().items() if args.only is None or k in args.only}
    print(f"| shape | MB | {' | '.join(fns)} |")
    print(f"| --- | --- | {' | '.join('---' for _ in fns)} |")
    worst = 0.0
    for name, unit in SHAPES.items():
        for mb in args.mb:
            n = int(mb * 1_000_000)
            text = (unit * (n // len(unit) + 1))[:n]
            secs = [best_time(fn, text, args.repeat) for fn in fns.values()]
            worst = max([worst, *(w for w, _ in secs)]) if mb == 1.0 else worst
            print(f"| `{name}` | {mb:g} | {' | '.join(f'{w:.3f} / {c:.3f}' for w, c in secs)} |", flush=True)
    if 1.0 in args.mb:
        print(f"\nslowest at 1 MB: {worst:.3f} s wall (goal <= 0.5 s)")


if __name__ == "__main__":
    main()
