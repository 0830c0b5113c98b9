"""Run a notebook's code cells in one plain Python process, for a machine without Jupyter (the lent GPU machine).

    python experiments/run_cells.py notebooks/02_finetune_retllm.ipynb --out DIR -p profile='"gpu"' -p max_steps=120

What papermill does, without a kernel: the `parameters` cell runs, then the `-p` values over it (Python literals),
then every other code cell in order, in one namespace. Each cell's printed output, wall time and (on CUDA) the peak
GPU memory so far go to DIR/cells.json after every cell, and the cell about to run before it starts, so a run
stopped early still says how far it got. Figures
are saved by the notebook itself; `plt.show()` and `display()` print nothing graphic.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import io
import json
import sys
import time
import traceback
from pathlib import Path


class Tee(io.TextIOBase):
    """Echo to the real stream and keep a copy for the cell's record."""

    def __init__(self, stream):
        self.stream, self.buf = stream, io.StringIO()

    def write(self, s: str) -> int:
        self.stream.write(s)
        self.stream.flush()
        return self.buf.write(s)


def without_ipython(src: str) -> str:
    """Where IPython is not installed, `display` prints (a stub IPython module would confuse matplotlib)."""
    try:
        import IPython.display  # noqa: F401
    except ImportError:
        return src.replace("from IPython.display import display", "display = print")
    return src


def cuda_peak_gib() -> float | None:
    """Peak GPU memory allocated by torch so far, GiB (None without CUDA)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return None
    return round(torch.cuda.max_memory_allocated() / 2**30, 3)


def write_record(out: Path, record: dict) -> None:
    """cells.json, rewritten whole after each step: what a run stopped by a time limit leaves behind."""
    (out / "cells.json").write_text(json.dumps(record, indent=1), encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("notebook", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("-p", "--param", action="append", default=[], help="NAME=PYTHON_LITERAL, over the parameters cell")
    args = ap.parse_args()
    params = {}
    for p in args.param:
        name, _, value = p.partition("=")
        params[name] = ast.literal_eval(value)
    import matplotlib

    matplotlib.use("Agg")
    args.out.mkdir(parents=True, exist_ok=True)
    cells = [c for c in json.loads(args.notebook.read_text(encoding="utf-8"))["cells"] if c["cell_type"] == "code"]
    ns: dict = {"__name__": "__main__"}
    record: dict = {"notebook": str(args.notebook), "params": params, "cells": []}
    t_all = time.perf_counter()
    status = 0
    for i, cell in enumerate(cells):
        src = without_ipython("".join(cell["source"]))
        tee_out = Tee(sys.stdout)
        t0 = time.perf_counter()
        error = None
        first = src.splitlines()[0] if src else ""
        running = {"index": i, "first_line": first, "running_since_s": round(t0 - t_all, 1)}
        write_record(args.out, {**record, "cells": [*record["cells"], running]})  # a run cut off says where it was
        with contextlib.redirect_stdout(tee_out):
            try:
                exec(compile(src, f"<cell {i}>", "exec"), ns)
                if "parameters" in cell["metadata"].get("tags", []):
                    ns.update(params)
                    print("parameters over the cell:", params)
            except Exception:
                error = traceback.format_exc()
                print(error)
        record["cells"].append(
            {
                "index": i,
                "first_line": first,
                "seconds": round(time.perf_counter() - t0, 2),
                "cuda_peak_gib": cuda_peak_gib(),
                "output": tee_out.buf.getvalue()[-4000:],
                "error": error,
            }
        )
        record["seconds"] = round(time.perf_counter() - t_all, 1)
        write_record(args.out, record)
        if error:
            status = 1
            break
    return status


if __name__ == "__main__":
    sys.exit(main())
