"""The two memory-API text dialects: RET-LLM (2023) and MemLLM (2024), formatted and parsed both ways.

Serves RET-LLM §3.2 (Figure 2's API; notebooks 01–03) and MemLLM §3.2–3.3 (notebooks 04–07).

RET-LLM::

    [MEM_WRITE{Ann>>employed by>>Pfizer}]
    [MEM_READ{>>employed by>>Pfizer}:{Ann>>employed by>>Pfizer};{Bob>>employed by>>Pfizer}]

MemLLM (spacing as in the official code: none around tags)::

    ({MEM_WRITE-->Ann>>employer>>Pfizer;Bob>>employer>>Pfizer})
    ({MEM_READ(Ann>>employer>>;>>founded by>>Bob)-->Pfizer, Moderna})

Terms are stripped of surrounding whitespace. A delimiter character inside a term is escaped with a
backslash (``Washington\\, D.C.``), so a term is never split; `parse_*` undoes the escape. Parsers never
raise: malformed calls come back as `ApiError` objects the caller can log, and nothing is written for
them; an error's span stays inside the text and ends where the call does, not in the text after it. Every
parse and strip function takes time linear in the text (`benchmarks/parse_speed.py`: 1 MB of any shape).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence, Union

from .escaping import cut_spans, escape
from .escaping import find_unescaped as _find_unescaped  # memllm.write_quality imports these three from here
from .escaping import split_unescaped as _split_unescaped
from .escaping import unescape as _unescape

__all__ = [
    "Triple",
    "MemWrite",
    "MemRead",
    "ApiError",
    "ApiFormatError",
    "Call",
    "format_retllm_write",
    "format_retllm_read_query",
    "format_retllm_read_reply",
    "format_retllm_read",
    "parse_retllm",
    "strip_retllm_calls",
    "format_memllm_write",
    "format_memllm_read_query",
    "format_memllm_read_reply",
    "format_memllm_read",
    "parse_memllm",
    "strip_memllm_calls",
    "RETLLM_WRITE_OPEN",
    "RETLLM_READ_OPEN",
    "MEMLLM_WRITE_OPEN",
    "MEMLLM_READ_OPEN",
    "MEMLLM_READ_SEP",
    "MEMLLM_CLOSE",
    "USER_ST",
    "USER_END",
    "query_shape",
    "is_memllm_query",
    "read_query_end",
    "memllm_query_closed",
]

RETLLM_WRITE_OPEN = "[MEM_WRITE{"
RETLLM_READ_OPEN = "[MEM_READ{"
MEMLLM_WRITE_OPEN = "({MEM_WRITE-->"
MEMLLM_READ_OPEN = "({MEM_READ("
MEMLLM_READ_SEP = ")-->"
MEMLLM_CLOSE = "})"
USER_ST = "({USER_ST})"
USER_END = "({USER_END})"
SEP = ">>"

# Characters that delimit something in each dialect; inside a term they are backslash-escaped.
_RETLLM_SPECIAL = set("\\{}[]>;")
_MEMLLM_SPECIAL = set("\\{}()>;,")


class Triple(NamedTuple):
    """A (subject, relation, object) fact; in a query, '' marks an unknown term."""

    subject: str
    relation: str
    object: str


@dataclass(frozen=True)
class MemWrite:
    """A write call found in text; `start:end` is its span there."""

    triples: tuple[Triple, ...]
    start: int
    end: int


@dataclass(frozen=True)
class MemRead:
    """A read call; `results` is None while the memory has not answered yet (generation paused)."""

    queries: tuple[Triple, ...]
    results: tuple | None  # RET-LLM: tuple[Triple, ...]; MemLLM: tuple[str, ...]
    start: int
    end: int


@dataclass(frozen=True)
class ApiError:
    """A malformed call: logged by the caller, never executed."""

    message: str
    start: int
    end: int
    text: str


Call = Union[MemWrite, MemRead, ApiError]


class ApiFormatError(ValueError):
    """Raised when a call cannot be formatted (e.g. a write with an empty term)."""


# ----------------------------------------------------------------------------------------- helpers
def _parse_triple(body: str, where: str) -> Triple | str:
    """A Triple, or an error message."""
    terms = _split_unescaped(body, SEP)
    if len(terms) != 3:
        return f"{where}: expected 3 terms separated by '>>', got {len(terms)} in {body!r}"
    return Triple(*(_unescape(t) for t in terms))


def query_shape(q: Triple) -> tuple[bool, bool, bool]:
    """Which of (subject, relation, object) a query fixes: RET-LLM's six query shapes are six of these."""
    return (bool(q.subject), bool(q.relation), bool(q.object))


def is_memllm_query(q: Sequence[str]) -> bool:
    """MemLLM §3.1 asks (s, t, ?) or (?, t, o): the relation and exactly one entity, never both or neither."""
    s, r, o = (str(x).strip() for x in q)
    return bool(r) and bool(s) != bool(o)


# ----------------------------------------------------------------------------------------- RET-LLM
def _retllm_triple(t: Sequence[str], *, allow_empty: bool) -> str:
    if len(t) != 3:
        raise ApiFormatError(f"a triple needs 3 terms, got {len(t)}: {t!r}")
    terms = [escape(x, _RETLLM_SPECIAL) for x in t]
    if not allow_empty and not all(terms):
        raise ApiFormatError(f"empty term in {tuple(t)!r}: every term of a stored triple must be non-empty")
    if allow_empty and not any(terms):
        raise ApiFormatError(f"query {tuple(t)!r} has no known term")
    return "{" + SEP.join(terms) + "}"


def format_retllm_write(triples: Sequence[Sequence[str]]) -> str:
    """One `[MEM_WRITE{..}]` per triple, in a row."""
    return "".join("[MEM_WRITE" + _retllm_triple(t, allow_empty=False) + "]" for t in triples)


def format_retllm_read_query(query: Sequence[str]) -> str:
    """The part the model generates: `[MEM_READ{a>>rel>>}:`; '' for unknown terms."""
    return "[MEM_READ" + _retllm_triple(query, allow_empty=True) + ":"


def format_retllm_read_reply(results: Sequence[Sequence[str]]) -> str:
    """The part the memory appends: `{..};{..}]` (just `]` when nothing matched)."""
    return ";".join(_retllm_triple(t, allow_empty=False) for t in results) + "]"


def format_retllm_read(query: Sequence[str], results: Sequence[Sequence[str]]) -> str:
    return format_retllm_read_query(query) + format_retllm_read_reply(results)


def parse_retllm(text: str) -> list[Call]:
    """Every RET-LLM call in `text`, in order; malformed ones as `ApiError`. Never raises."""
    calls: list[Call] = []
    i = 0
    while True:
        start = text.find("[MEM_", i)
        if start < 0:
            return calls
        if text.startswith(RETLLM_WRITE_OPEN, start):
            call, i = _parse_retllm_call(text, start, len(RETLLM_WRITE_OPEN), write=True)
        elif text.startswith(RETLLM_READ_OPEN, start):
            call, i = _parse_retllm_call(text, start, len(RETLLM_READ_OPEN), write=False)
        elif len(text) - start < len("[MEM_WRITE") and (
            "[MEM_WRITE".startswith(text[start:]) or "[MEM_READ".startswith(text[start:])
        ):
            return calls  # an opener cut off at the end of the text: not a call (yet)
        else:
            nxt = text.find("[MEM_", start + 1)
            end = len(text) if nxt < 0 else nxt
            call, i = (
                ApiError(f"unknown or malformed call {text[start : start + 20]!r}", start, end, text[start:end]),
                end,
            )
        calls.append(call)


def _err(msg: str, text: str, start: int, end: int) -> tuple[ApiError, int]:
    """An error spanning text[start:end], at least one character and never past the text's end."""
    end = min(max(end, start + 1), len(text))
    return ApiError(msg, start, end, text[start:end]), end


def _parse_retllm_call(text: str, start: int, skip: int, *, write: bool) -> tuple[Call, int]:
    name = "MEM_WRITE" if write else "MEM_READ"
    body_start = start + skip
    close = _find_unescaped(text, "{}[]", body_start)
    if close < 0 or text[close] != "}":
        # A ']' closes the broken call and a '[' may open the next; after a nested '{' it runs to the next call,
        # so degenerate output such as '[MEM_WRITE{MEM_WRITE{MEM_WRITE{…' is one error, never shown as an answer.
        nxt = text.find("[MEM_", start + 1)
        if close >= 0 and text[close] in "[]":
            end = close + (text[close] == "]")
        else:
            end = len(text) if nxt < 0 else nxt
        return _err(f"{name}: unbalanced braces (no '}}' closing the triple)", text, start, end)
    parsed = _parse_triple(text[body_start:close], name)
    if isinstance(parsed, str):  # a write's closing ']' belongs to the bad call, not to the text after it
        return _err(parsed, text, start, close + (2 if write and text[close + 1 : close + 2] == "]" else 1))
    after = close + 1
    if write:
        if not all(parsed):
            return _err(
                f"MEM_WRITE: empty term in {tuple(parsed)!r}", text, start, after + (text[after : after + 1] == "]")
            )
        if text[after : after + 1] != "]":  # the character after the triple is the text's, not the call's
            return _err("MEM_WRITE: expected ']' after the triple", text, start, after)
        return MemWrite((parsed,), start, after + 1), after + 1
    if not any(parsed):
        return _err("MEM_READ: all three terms are empty", text, start, after)
    if text[after : after + 1] != ":":
        return _err("MEM_READ: expected ':' after the query", text, start, after)
    pos = after + 1
    if pos == len(text):
        return MemRead((parsed,), None, start, pos), pos  # paused: the memory has not replied
    results: list[Triple] = []
    while True:
        if text[pos : pos + 1] == "]":
            return MemRead((parsed,), tuple(results), start, pos + 1), pos + 1
        if text[pos : pos + 1] != "{":
            if pos == len(text):
                return _err("MEM_READ: reply not closed with ']'", text, start, pos)
            return _err("MEM_READ: stray text in the memory's reply", text, start, pos + 1)
        close = _find_unescaped(text, "{}[]", pos + 1)
        if close < 0 or text[close] != "}":
            return _err("MEM_READ: unbalanced braces in the reply", text, start, len(text) if close < 0 else close)
        t = _parse_triple(text[pos + 1 : close], "MEM_READ reply")
        if isinstance(t, str):
            return _err(t, text, start, close + 1)
        results.append(t)
        pos = close + 1
        if text[pos : pos + 1] == ";":
            pos += 1


def strip_retllm_calls(text: str) -> str:
    """The text a user should see: every (well-formed or not) call removed."""
    return cut_spans(text, parse_retllm(text))


# ----------------------------------------------------------------------------------------- MemLLM
def _memllm_terms(t: Sequence[str]) -> list[str]:
    if len(t) != 3:
        raise ApiFormatError(f"a triple needs 3 terms, got {len(t)}: {t!r}")
    return [escape(x, _MEMLLM_SPECIAL) for x in t]


def format_memllm_write(triples: Sequence[Sequence[str]]) -> str:
    """`({MEM_WRITE-->s>>t>>o;s>>t>>o})`; no triple gives `({MEM_WRITE-->})`."""
    parts = []
    for t in triples:
        terms = _memllm_terms(t)
        if not all(terms):
            raise ApiFormatError(f"empty term in {tuple(t)!r}: every term of a stored triple must be non-empty")
        parts.append(SEP.join(terms))
    return MEMLLM_WRITE_OPEN + ";".join(parts) + MEMLLM_CLOSE


def format_memllm_read_query(queries: Sequence[Sequence[str]]) -> str:
    """The part the model generates: `({MEM_READ(s>>t>>;>>t>>o)-->`."""
    if not queries:
        raise ApiFormatError("a MEM_READ needs at least one query")
    parts = []
    for q in queries:
        s, r, o = _memllm_terms(q)
        if not is_memllm_query((s, r, o)):
            raise ApiFormatError(f"query {tuple(q)!r} must fix the relation and exactly one of subject/object")
        parts.append(SEP.join((s, r, o)))
    return MEMLLM_READ_OPEN + ";".join(parts) + MEMLLM_READ_SEP


def format_memllm_read_reply(results: Sequence[str]) -> str:
    """The part the memory appends: `e1, e2})`."""
    return ", ".join(escape(e, _MEMLLM_SPECIAL) for e in results) + MEMLLM_CLOSE


def format_memllm_read(queries: Sequence[Sequence[str]], results: Sequence[str]) -> str:
    return format_memllm_read_query(queries) + format_memllm_read_reply(results)


def parse_memllm(text: str) -> list[Call]:
    """Every MemLLM call in `text`, in order; malformed ones as `ApiError`. Never raises."""
    calls: list[Call] = []
    i = 0
    w, r = text.find(MEMLLM_WRITE_OPEN), text.find(MEMLLM_READ_OPEN)
    while True:
        # each opener is searched again only once passed: a text with one kind only is scanned once, not per call
        if 0 <= w < i:
            w = text.find(MEMLLM_WRITE_OPEN, i)
        if 0 <= r < i:
            r = text.find(MEMLLM_READ_OPEN, i)
        cands = [x for x in (w, r) if x >= 0]
        if not cands:
            return calls
        start = min(cands)
        call, i = (_parse_memllm_write if start == w else _parse_memllm_read)(text, start)
        calls.append(call)


def _parse_memllm_write(text: str, start: int) -> tuple[Call, int]:
    body_start = start + len(MEMLLM_WRITE_OPEN)
    close = _find_unescaped(text, "{}()", body_start)
    if close < 0 or not text.startswith(MEMLLM_CLOSE, close):
        return _err("MEM_WRITE: not closed with '})'", text, start, len(text) if close < 0 else close + 1)
    body = text[body_start:close]
    triples = []
    if body.strip():
        for part in _split_unescaped(body, ";"):
            t = _parse_triple(part, "MEM_WRITE")
            if isinstance(t, str):
                return _err(t, text, start, close + 2)
            if not all(t):
                return _err(f"MEM_WRITE: empty term in {tuple(t)!r}", text, start, close + 2)
            triples.append(t)
    return MemWrite(tuple(triples), start, close + 2), close + 2


def _parse_memllm_read(text: str, start: int) -> tuple[Call, int]:
    body_start = start + len(MEMLLM_READ_OPEN)
    close = _find_unescaped(text, "{}()", body_start)
    if close < 0 or not text.startswith(MEMLLM_READ_SEP, close):
        return _err("MEM_READ: queries not closed with ')-->'", text, start, len(text) if close < 0 else close + 1)
    queries = []
    for part in _split_unescaped(text[body_start:close], ";"):
        q = _parse_triple(part, "MEM_READ")
        if isinstance(q, str):
            return _err(q, text, start, close + len(MEMLLM_READ_SEP))
        if not is_memllm_query(q):
            return _err(
                f"MEM_READ: query {tuple(q)!r} must fix the relation and exactly one of subject/object",
                text,
                start,
                close + len(MEMLLM_READ_SEP),
            )
        queries.append(q)
    pos = close + len(MEMLLM_READ_SEP)
    if pos == len(text):
        return MemRead(tuple(queries), None, start, pos), pos  # paused: the memory has not replied
    end = _find_unescaped(text, "{}()", pos)
    if end < 0 or not text.startswith(MEMLLM_CLOSE, end):
        return _err("MEM_READ: results not closed with '})'", text, start, len(text) if end < 0 else end + 1)
    body = text[pos:end]
    results = tuple(_unescape(e) for e in _split_unescaped(body, ",")) if body.strip() else ()
    if any(not e for e in results):
        return _err("MEM_READ: empty entity in the results", text, start, end + 2)
    return MemRead(tuple(queries), results, start, end + 2), end + 2


def read_query_end(text: str, read: MemRead) -> int:
    """Where a parsed read's query part ends in `text` (just after `}:` or `)-->`): the memory's reply goes there.

    Found from the call's own parse, so a separator escaped inside a term (`a\\}:b`, `a\\)-->b`) is never taken
    for the end of the query.
    """
    if text.startswith(RETLLM_READ_OPEN, read.start):
        close = _find_unescaped(text, "{}[]", read.start + len(RETLLM_READ_OPEN))
        return close + 2
    close = _find_unescaped(text, "{}()", read.start + len(MEMLLM_READ_OPEN))
    return close + len(MEMLLM_READ_SEP)


def memllm_query_closed(text: str) -> bool:
    """True when `text` ends with the `)-->` that closes its last `({MEM_READ(` call's queries: where a query decoder
    stops. A term ending in an escaped parenthesis (`a\\)-->`, the term `a)` before `>>`) does not close it."""
    start = text.rfind(MEMLLM_READ_OPEN)
    if start < 0 or not text.endswith(MEMLLM_READ_SEP):
        return False
    return _find_unescaped(text, "{}()", start + len(MEMLLM_READ_OPEN)) == len(text) - len(MEMLLM_READ_SEP)


def strip_memllm_calls(text: str) -> str:
    """Text with every MemLLM call removed (as the paper removes answered calls from the context)."""
    return cut_spans(text, parse_memllm(text))
