"""Execute the numbered notebooks with papermill on one profile (used by `make test` and `make reproduce`).

`--out DIR` writes executed copies there (for nbval to re-run and compare); without it the notebooks are
executed in place, which is how their committed outputs are produced.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import papermill as pm

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--profile", default="cpu", choices=["smoke", "cpu", "gpu"])
    ap.add_argument("--out", type=Path, help="directory for executed copies (default: in place)")
    ap.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/[0-9][0-9]_*.ipynb")
    args = ap.parse_args()
    nbs = args.notebooks or sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    for nb in nbs:
        nb = nb.resolve()
        out = (args.out.resolve() / nb.name) if args.out else nb
        t0 = time.time()
        print(f"== {nb.name} (profile={args.profile})", flush=True)
        pm.execute_notebook(str(nb), str(out), parameters={"profile": args.profile}, kernel_name="python3",
                            cwd=str(nb.parent), progress_bar=False)
        print(f"   done in {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
