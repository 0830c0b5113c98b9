"""Where the kit keeps things, and the profile names, so notebooks, tests and benchmarks agree.

What each profile sets: `retllm.config.RetLLMConfig` and `memllm.config.MemLLMConfig` (base: `config.ProfileConfig`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator

__all__ = [
    "ROOT",
    "DATA",
    "FIGURES",
    "RESULTS",
    "RUNS",
    "PROFILES",
    "check_profile",
    "figure_path",
    "results_path",
    "run_dir",
    "atomic_dir",
]

# The repo root when installed editable (`pip install -e .`); RETLLM_ROOT overrides (e.g. a Colab clone elsewhere).
ROOT = Path(os.environ.get("RETLLM_ROOT", Path(__file__).resolve().parents[1]))
DATA = ROOT / "data"
FIGURES = ROOT / "figures"
# headline numbers as JSON (cpu profile, committed); the README tables are made from them
RESULTS = ROOT / "results"
RUNS = Path(os.environ.get("RETLLM_RUNS", ROOT / "runs"))  # adapters, memories, eval outputs (git-ignored)
# CI seconds-to-minutes / 2 CPU cores (committed outputs) / paper size on a GPU
PROFILES = ("smoke", "cpu", "gpu")


def check_profile(profile: str) -> str:
    """The profile itself, or a ValueError that lists the valid ones (not a bare KeyError deep in a cell)."""
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {', '.join(PROFILES)}; got {profile!r}")
    return profile


def figure_path(name: str, profile: str = "cpu") -> Path:
    """figures/NAME on the cpu profile, whose outputs are committed; runs/<profile>/figures/NAME otherwise."""
    d = FIGURES if check_profile(profile) == "cpu" else RUNS / profile / "figures"
    d.mkdir(parents=True, exist_ok=True)
    return d / name


def results_path(name: str, profile: str = "cpu") -> Path:
    """results/NAME on the cpu profile (committed; `tools/readme_results.py` builds README tables from it), else
    runs/<profile>/results/NAME: a smoke run never overwrites the committed numbers."""
    d = RESULTS if check_profile(profile) == "cpu" else RUNS / profile / "results"
    d.mkdir(parents=True, exist_ok=True)
    return d / name


def run_dir(*parts: str) -> Path:
    """A directory under runs/, created on demand (e.g. run_dir("retllm", "cpu"))."""
    d = RUNS.joinpath(*parts)
    d.mkdir(parents=True, exist_ok=True)
    return d


@contextlib.contextmanager
def atomic_dir(target: Path, *, replace: bool = False) -> Iterator[Path]:
    """A temp folder beside `target`, swapped in only if the block completes: never a half-written folder.

    `replace=False` keeps a `target` that appeared meanwhile (a concurrent writer of the same cache won);
    `replace=True` swaps an existing `target` out (it is deleted only once the new one is in place).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    os.chmod(tmp, 0o755)  # mkdtemp's 0700 would outlive the rename
    old = target.with_name(f".{target.name}.old")
    try:
        yield tmp
        if replace and target.exists():
            shutil.rmtree(old, ignore_errors=True)
            os.rename(target, old)
        try:
            os.rename(tmp, target)
        except OSError:
            if replace and old.exists() and not target.exists():
                os.rename(old, target)  # put the old folder back: a failed swap loses nothing
                raise
            if replace or not target.is_dir():  # not a concurrent writer finishing first: a real failure
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
