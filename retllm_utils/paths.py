"""Where the kit keeps things, so notebooks, tests and benchmarks agree whatever the working directory."""
from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROOT", "DATA", "FIGURES", "RUNS", "figure_path", "run_dir"]

# The repo root when installed editable (`pip install -e .`); RETLLM_ROOT overrides (e.g. a Colab clone elsewhere).
ROOT = Path(os.environ.get("RETLLM_ROOT", Path(__file__).resolve().parents[1]))
DATA = ROOT / "data"
FIGURES = ROOT / "figures"
RUNS = Path(os.environ.get("RETLLM_RUNS", ROOT / "runs"))  # adapters, memories, eval outputs (git-ignored)


def figure_path(name: str) -> Path:
    """A path under figures/, created on demand."""
    FIGURES.mkdir(parents=True, exist_ok=True)
    return FIGURES / name


def run_dir(*parts: str) -> Path:
    """A directory under runs/, created on demand (e.g. run_dir("retllm", "cpu"))."""
    d = RUNS.joinpath(*parts)
    d.mkdir(parents=True, exist_ok=True)
    return d
