"""A memory's triples in and out as a pandas DataFrame, a CSV file or an SQL table.

RET-LLM argues for a memory that is aggregatable, updatable and interpretable (abstract, §3.1): these functions
are how its contents are read and edited outside the model, and how facts from other sources (a spreadsheet, a
database table) come in. No notebook table or figure depends on them; `tests/test_memory.py` covers the round
trips. `TripleMemory` exposes each as a method of the same name (`mem.to_csv(path)`), the usual way to call them.
"""

from __future__ import annotations

import csv
import os
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .memory import TripleMemory

__all__ = ["COLUMNS", "to_dataframe", "from_dataframe", "to_csv", "from_csv", "to_sql", "from_sql"]

COLUMNS = ["subject", "relation", "object"]  # DataFrame / CSV / SQL columns


def to_dataframe(memory: TripleMemory) -> Any:
    """The triples as a pandas DataFrame (columns subject, relation, object), in write order."""
    import pandas as pd

    return pd.DataFrame(list(memory), columns=COLUMNS, dtype=object)


def from_dataframe(memory: TripleMemory, df: Any) -> int:
    """Write every row of a DataFrame with columns subject, relation, object (others ignored); returns new.

    All or nothing: a row with a missing or non-string term raises ValueError naming it.
    """
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"DataFrame lacks column(s) {missing}; it needs {COLUMNS}")
    return memory.write_many(df[COLUMNS].itertuples(index=False, name=None))


def to_csv(memory: TripleMemory, path: str | os.PathLike) -> None:
    """Write the triples to a CSV file with a subject,relation,object header."""
    to_dataframe(memory).to_csv(path, index=False, quoting=csv.QUOTE_ALL)  # minimal quoting loses a bare "\r"


def from_csv(memory: TripleMemory, path: str | os.PathLike, **read_csv_kw: Any) -> int:
    """Write the triples of a CSV file (header subject,relation,object); every cell read as text."""
    import pandas as pd

    # dtype=str, no NA parsing: "NA", "None" or "007" stay the strings they are
    df = pd.read_csv(path, dtype=str, keep_default_na=False, na_filter=False, **read_csv_kw)
    return from_dataframe(memory, df)


def to_sql(memory: TripleMemory, conn: Any, table: str, if_exists: str = "fail") -> None:
    """Write the triples into an SQL table (a sqlite3 connection or SQLAlchemy engine, via pandas)."""
    to_dataframe(memory).to_sql(table, conn, index=False, if_exists=if_exists)


def from_sql(memory: TripleMemory, conn: Any, table_or_query: str) -> int:
    """Write triples from an SQL table name, or from a query returning subject, relation, object columns
    (cast non-text columns in the query, e.g. `CAST(year AS TEXT) AS object`)."""
    import pandas as pd

    if re.fullmatch(r"[A-Za-z_][\w$]*(\.[A-Za-z_][\w$]*)?", table_or_query):
        name = ".".join('"' + part + '"' for part in table_or_query.split("."))
        table_or_query = f"SELECT {', '.join(COLUMNS)} FROM {name}"
    return from_dataframe(memory, pd.read_sql_query(table_or_query, conn))
