"""Where notebook 04 saves the MemLLM data set, and how notebooks 05 and 06 get it back: MemLLM §3.3's data on disk.

The MemLLM data modules: `docred` reads Re-DocRED; `examples` builds the write and read rows (MemLLM §3.2–3.3,
App. B–D) and the DatasetDict (`make_dataset`); `saved_dataset` (this one) says where a profile's DatasetDict lives,
whether a saved copy has the current read-row format, and rebuilds it with notebook 04's defaults when it is
missing or stale, so notebooks 05 and 06 run even when 04 has not run on that profile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..paths import DATA, ROOT, check_profile, run_dir
from .docred import load_docred, relation_names
from .examples import make_dataset
from .profiles import PROFILES

__all__ = ["dataset_dir", "read_rows_current", "load_or_build"]


def dataset_dir(profile: str = "cpu") -> Path:
    """Where a profile's data set lives: data/memllm_docred/ for cpu (committed), else under runs/."""
    return DATA / "memllm_docred" if check_profile(profile) == "cpu" else run_dir("memllm_docred", profile)


def _rel(path: Path) -> str:
    """The path as the repository shows it (relative to its root), for the line `load_or_build` returns."""
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def read_rows_current(ds: Any) -> bool:
    """True if saved read rows keep the read word's space after the call (the format since the evaluators landed)."""
    for row in ds:
        if row["read_word"] > 0:
            return row["text"][row["spans"][1][0] : row["spans"][1][0] + 1] == " "
    return True


def load_or_build(profile: str, seed: int = 0, **make_kw: Any) -> tuple[Any, str]:
    """The profile's DatasetDict as notebook 04 saved it, or built here with 04's defaults if it is missing or stale.

    Returns (DatasetDict, a line saying which), so notebooks 05 and 06 run even when 04 has not run on this profile.
    """
    from datasets import load_from_disk

    d = dataset_dir(profile)
    if (d / "dataset_dict.json").is_file():
        dd = load_from_disk(str(d))
        if read_rows_current(dd["read_train"]) and read_rows_current(dd["read_dev"]):
            return dd, f"loaded {_rel(d)} (saved by notebook 04)"
        why = f"{_rel(d)} predates the current read-row format"
    else:
        why = f"no saved data set at {_rel(d)}"
    red = DATA / "redocred"
    sizes = PROFILES[profile]
    kw = {
        "n_train": sizes["n_train"],
        "n_dev": sizes["n_dev"],
        "max_pretext_chars": sizes["max_pretext_chars"],
        "seed": seed,
        **make_kw,
    }
    dd, _ = make_dataset(
        load_docred(red / "test_revised.json"),
        load_docred(red / "dev_revised.json"),
        relation_names(red / "rel_info.json"),
        **kw,
    )
    return dd, f"built here with notebook 04's defaults ({why}; run notebook 04 to save it)"
