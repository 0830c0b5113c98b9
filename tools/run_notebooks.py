"""Execute the numbered notebooks with papermill on one profile (used by `make test` and `make reproduce`).

`--out DIR` writes executed copies there (for nbval to re-run and compare); `--checked DIR` then writes, for each
copy with cells marked NBVAL_CHECK_OUTPUT, the copy cut after its last marked cell (see `checked_prefix`). Without
`--out` the notebooks are executed in place, which is how their committed outputs are produced. An in-place run
then tidies the notebook (see `tidy_in_place`): it opens as users expect, with the profile in its parameters cell's
default and in the validation cell's output, and papermill's parameters kept in the notebook metadata.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import papermill as pm
import yaml
from nbclient.exceptions import CellTimeoutError

ROOT = Path(__file__).resolve().parents[1]
INJECTED = "injected-parameters"  # the tag of the cell papermill adds after the `parameters` cell
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
# tqdm's text fallback of a notebook bar, e.g. "masked:   0%|          | 0/60 [00:00<?, ?it/s]"
# what JupyterLab writes into a notebook it runs on the kernel `make install` registers (ipykernel's default name)
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
PROGRESS_BAR = re.compile(r"\d+%\|.*\|\s*\S+/\S+\s*\[")


def is_progress_bar(output: dict) -> bool:
    """A tqdm widget bar: papermill saves only its first frame (0%), since the widget's updates are not outputs."""
    data = output.get("data", {})
    text = data.get("text/plain", "")
    text = "".join(text) if isinstance(text, list) else text
    return output.get("output_type") == "display_data" and WIDGET_VIEW in data and bool(PROGRESS_BAR.search(text))


def tidy_in_place(path: Path) -> dict[str, int]:
    """Remove what papermill leaves in a notebook executed in place, so the committed copy opens as users expect.

    - the injected-parameters cell: its `profile = ...` would shadow the parameters cell for anyone who edits
      that cell and re-runs (the run's parameters stay in `metadata.papermill.parameters`);
    - progress-bar widgets frozen at 0% (and the widget state, once no widget view is left);
    - absolute paths of the machine in `metadata.papermill` (input_path, output_path), made relative to the repo;
    - the kernelspec as JupyterLab writes it for the kit's kernel ("Python 3 (ipykernel)"), so opening a notebook
      does not mark it modified.
    """
    nb = json.loads(path.read_text(encoding="utf-8"))
    n_cells = len(nb["cells"])
    nb["cells"] = [c for c in nb["cells"] if INJECTED not in c.get("metadata", {}).get("tags", [])]
    bars = 0
    for cell in nb["cells"]:
        if "outputs" in cell:
            kept = [o for o in cell["outputs"] if not is_progress_bar(o)]
            bars += len(cell["outputs"]) - len(kept)
            cell["outputs"] = kept
    if not any(WIDGET_VIEW in o.get("data", {}) for c in nb["cells"] for o in c.get("outputs", [])):
        nb["metadata"].pop("widgets", None)
    meta = nb["metadata"].get("papermill", {})
    for key in ("input_path", "output_path"):
        if meta.get(key) and Path(meta[key]).is_absolute():
            meta[key] = os.path.relpath(meta[key], ROOT)
    nb["metadata"]["kernelspec"] = dict(KERNELSPEC)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return {"injected cells": n_cells - len(nb["cells"]), "progress bars": bars}


CHECK_MARK = "NBVAL_CHECK_OUTPUT"  # nbval compares the outputs of the cells whose source holds it


def checked_prefix(nb: dict) -> dict | None:
    """The executed notebook up to its last cell marked for nbval (None if none is marked): the cells after it cannot
    change what nbval compares, and re-running them (notebook 02's training and validation) only costs time."""
    marked = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "code" and CHECK_MARK in "".join(c["source"])]
    return {**nb, "cells": nb["cells"][: marked[-1] + 1]} if marked else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profile", default="cpu", choices=["smoke", "cpu", "gpu"])
    ap.add_argument("--out", type=Path, help="directory for executed copies (default: in place)")
    ap.add_argument(
        "-p",
        nargs=2,
        action="append",
        default=[],
        metavar=("NAME", "VALUE"),
        help="another parameter, as papermill's -p",
    )
    ap.add_argument(
        "--cell-timeout",
        type=int,
        default=None,
        help="seconds a cell may run before the run fails (make test: 300, so a hung cell fails fast; default none)",
    )
    ap.add_argument(
        "--timeout-retries",
        type=int,
        default=0,
        help="runs of a notebook again after a cell timed out (make test: 1). A cell that creates a widget sometimes "
        "never gets its reply under nbclient (kernel idle, client waiting: an open nbclient bug), once in three "
        "fresh-clone runs of notebook 09 here",
    )
    ap.add_argument(
        "--checked",
        type=Path,
        help="with --out: directory for the executed copies cut after their last NBVAL_CHECK_OUTPUT cell, for nbval "
        "(make test); a copy with no marked cell is left out",
    )
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/[0-9][0-9]_*.ipynb")
    args = ap.parse_args()
    extra = {name: yaml.safe_load(value) for name, value in args.p}  # "False" -> False, "3" -> 3, as papermill reads
    nbs = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    for nb in nbs:
        nb = nb.resolve()
        out = (args.out.resolve() / nb.name) if args.out else nb
        t0 = time.time()
        print(f"== {nb.name} (profile={args.profile}{''.join(f', {k}={v!r}' for k, v in extra.items())})", flush=True)
        try:
            for attempt in range(args.timeout_retries + 1):
                try:
                    pm.execute_notebook(
                        str(nb),
                        str(out),
                        parameters={"profile": args.profile, **extra},
                        kernel_name="python3",
                        cwd=str(nb.parent),
                        progress_bar=False,
                        execution_timeout=args.cell_timeout,
                    )
                    break
                except CellTimeoutError:
                    if attempt == args.timeout_retries:
                        raise
                    print(f"   a cell ran past {args.cell_timeout} s: running {nb.name} again", flush=True)
        finally:
            # Executed copies (--out, as `make test` makes them) are left exactly as papermill wrote them: nbval
            # re-runs the copy, and without its injected cell it would run the parameters cell's default profile
            # (cpu, an hour per notebook) instead of the profile papermill ran.
            if not args.out and out.is_file():
                print(f"   tidied: {tidy_in_place(out)}", flush=True)
        print(f"   done in {time.time() - t0:.0f} s", flush=True)
        if args.out and args.checked:
            prefix = checked_prefix(json.loads(out.read_text(encoding="utf-8")))
            if prefix is not None:
                args.checked.mkdir(parents=True, exist_ok=True)
                (args.checked / nb.name).write_text(json.dumps(prefix, indent=1, ensure_ascii=False), encoding="utf-8")
                print(f"   for nbval: its first {len(prefix['cells'])} cells in {args.checked / nb.name}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
