"""A memory's triples in and out as a pandas DataFrame, a CSV file or an SQL table.

RET-LLM argues for a memory that is aggregatable, updatable and interpretable (abstract, §3.1): these functions
are how its contents are read and edited outside the model, and how facts from other sources (a spreadsheet, a
database table) come in. No notebook table or figure depends on them; `tests/test_memory.py` covers the round
trips. Every memory (`triple_store.TripleStore`, so both backends) exposes each as a method of the same name
(`mem.to_csv(path)`), the usual way to call them. They need of a memory only what `Triples` names, so this module
imports no store.
"""

from __future__ import annotations

import csv
import os
import re
from typing import Any, Iterable, Iterator, Protocol, Sequence

__all__ = ["COLUMNS", "Triples", "to_dataframe", "from_dataframe", "to_csv", "from_csv", "to_sql", "from_sql"]

COLUMNS = ["subject", "relation", "object"]  # DataFrame / CSV / SQL columns


class Triples(Protocol):
    """What import and export use of a memory: its triples in write order, and one all-or-nothing batch write."""

    def __iter__(self) -> Iterator[Sequence[str]]: ...

    def write_many(self, triples: Iterable[Sequence[str]]) -> int: ...


def to_dataframe(memory: Triples) -> Any:
    """The triples as a pandas DataFrame (columns subject, relation, object), in write order."""
    import pandas as pd

    return pd.DataFrame(list(memory), columns=COLUMNS, dtype=object)


def _missing(value: Any) -> bool:
    """None, NaN or pandas' NA: a cell with no value (SQL NULL, an empty spreadsheet cell)."""
    import pandas as pd

    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def from_dataframe(memory: Triples, df: Any) -> int:
    """Write every row of a DataFrame with columns subject, relation, object (others ignored); returns new.

    All or nothing: a missing value raises ValueError naming its row (0-based) and column; a non-string or empty
    term raises ValueError naming it.
    """
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"DataFrame lacks column(s) {missing}; it needs {COLUMNS}")
    rows = list(df[COLUMNS].itertuples(index=False, name=None))
    for i, row in enumerate(rows):
        for col, value in zip(COLUMNS, row):
            if _missing(value):
                raise ValueError(f"missing value in row {i}, column {col!r}: {tuple(row)!r}")
    return memory.write_many(rows)


def to_csv(memory: Triples, path: str | os.PathLike) -> None:
    """Write the triples to a CSV file with a subject,relation,object header."""
    to_dataframe(memory).to_csv(path, index=False, quoting=csv.QUOTE_ALL)  # minimal quoting loses a bare "\r"


def from_csv(memory: Triples, path: str | os.PathLike, **read_csv_kw: Any) -> int:
    """Write the triples of a CSV file (header subject,relation,object); every cell read as text.

    A row with more fields than the header raises ValueError naming the file and line (pandas would otherwise
    take the first column as an index and shift the others).
    """
    import pandas as pd

    # dtype=str, no NA parsing: "NA", "None" or "007" stay the strings they are; header=None: no index guessing
    kw = {"dtype": str, "keep_default_na": False, "na_filter": False, **read_csv_kw, "header": None}
    try:
        raw = pd.read_csv(path, **kw)
    except pd.errors.ParserError as e:
        m = re.search(r"Expected (\d+) fields in line (\d+), saw (\d+)", str(e))
        if m:
            raise ValueError(f"{path}, line {m[2]}: {m[3]} fields, the header has {m[1]}") from e
        raise ValueError(f"{path}: {e}") from e
    if raw.empty:
        return 0
    header = [str(h) for h in raw.iloc[0]]
    # a trailing comma adds an unnamed column
    width = max((i + 1 for i, h in enumerate(header) if h), default=0)
    wide = (raw.iloc[1:, width:] != "").any(axis=1).to_numpy()
    if wide.any():  # a value under no header name: refuse rather than shift or drop it
        raise ValueError(f"{path}, data row {int(wide.argmax()) + 1}: a value beyond the header's {width} columns")
    df = raw.iloc[1:, :width].set_axis(header[:width], axis=1).reset_index(drop=True)
    return from_dataframe(memory, df)


def to_sql(memory: Triples, conn: Any, table: str, if_exists: str = "fail") -> None:
    """Write the triples into an SQL table (a sqlite3 connection or SQLAlchemy engine, via pandas)."""
    to_dataframe(memory).to_sql(table, conn, index=False, if_exists=if_exists)


def from_sql(memory: Triples, conn: Any, table_or_query: str) -> int:
    """Write triples from an SQL table name, or from a query returning subject, relation, object columns
    (cast non-text columns in the query, e.g. `CAST(year AS TEXT) AS object`).

    A DB-API connection (sqlite3) is read on a cursor of its own, so a failed query leaves the caller's open
    transaction as it was; a SQLAlchemy engine or connection goes through pandas.
    """
    import pandas as pd

    if re.fullmatch(r"[A-Za-z_][\w$]*(\.[A-Za-z_][\w$]*)?", table_or_query):
        name = ".".join('"' + part + '"' for part in table_or_query.split("."))
        table_or_query = f"SELECT {', '.join(COLUMNS)} FROM {name}"
    if not hasattr(conn, "cursor"):
        return from_dataframe(memory, pd.read_sql_query(table_or_query, conn))
    cur = conn.cursor()  # pandas would roll the connection back on an error, ending the caller's transaction
    try:
        cur.execute(table_or_query)
        rows = cur.fetchall()
        columns = [d[0] for d in cur.description]
    finally:
        cur.close()
    return from_dataframe(memory, pd.DataFrame(rows, columns=columns, dtype=object))
