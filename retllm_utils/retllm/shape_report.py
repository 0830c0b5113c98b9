"""Every metric per phrasing shape: the wide build's splits say each example in one shape (`wide_phrasings`), the
test split in shapes the training used and the paraphrase split in shapes held out from it, so a table per shape
shows which constructions the model generalises to and which it does not."""

from __future__ import annotations

from typing import Mapping

import pandas as pd

__all__ = ["by_shape"]


def by_shape(df: pd.DataFrame, free: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per `phrasing` (and "all"): statements, their exact write calls, where recorded the statements whose turn's
    writes are exactly the gold facts (`stored exact`: the model's writes and any a controller rule added), questions,
    read calls and answers (facts exact); `free`: the same examples with the answer free, scored by the same rule where
    they overlap."""
    rows: dict[str, Mapping[str, float]] = {}
    free_ok = None if free is None else free.set_index("id")["facts_ok"]
    for shape, g in [*df.groupby("phrasing"), ("all", df)]:
        w, r = g[g["kind"] == "write"], g[g["kind"] == "read"]
        row = {
            "statements": len(w),
            "writes exact": w["api_em"].mean() if len(w) else float("nan"),
            **({"stored exact": _mean(w["stored_exact"])} if "stored_exact" in w else {}),
            "questions": len(r),
            "read calls": r["api_em"].mean() if len(r) else float("nan"),
            "answers": r["facts_ok"].astype(float).mean() if len(r) else float("nan"),
        }
        if free_ok is not None:
            both = [i for i in r["id"] if i in free_ok.index]
            row["free answers"] = free_ok.loc[both].astype(float).mean() if both else float("nan")
            row["free n"] = len(both)
        rows[str(shape)] = row
    return pd.DataFrame(rows).T.astype(
        {"statements": int, "questions": int, **({"free n": int} if free is not None else {})}
    )


def _mean(col: pd.Series) -> float:
    return col.astype(float).mean() if len(col) else float("nan")
