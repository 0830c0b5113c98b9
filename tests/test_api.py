"""Both API dialects: exact round-trips, the six RET-LLM query shapes, malformed output never raising."""

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from retllm_utils.api import (
    ApiError,
    ApiFormatError,
    MemRead,
    MemWrite,
    Triple,
    format_memllm_read,
    format_memllm_read_query,
    format_memllm_write,
    format_retllm_read,
    format_retllm_read_query,
    format_retllm_write,
    memllm_query_closed,
    parse_memllm,
    parse_retllm,
    query_shape,
    strip_memllm_calls,
    strip_retllm_calls,
)

# Terms with every delimiter of both dialects in them, plus plain ones.
terms = (
    st.text(alphabet=st.sampled_from(list("abcXY Z019.,;:>-{}[]()\\'é")), min_size=1, max_size=12)
    .map(str.strip)
    .filter(bool)
)
triples = st.tuples(terms, terms, terms).map(lambda t: Triple(*t))


def test_retllm_write_several_in_a_row():
    s = format_retllm_write([("Ann Lee", "employed by", "Pfizer"), ("Bob Wu", "employed by", "Pfizer")])
    assert s == "[MEM_WRITE{Ann Lee>>employed by>>Pfizer}][MEM_WRITE{Bob Wu>>employed by>>Pfizer}]"
    calls = parse_retllm(s)
    assert [c.triples for c in calls] == [
        (("Ann Lee", "employed by", "Pfizer"),),
        (("Bob Wu", "employed by", "Pfizer"),),
    ]


@pytest.mark.parametrize("shape", [s for s in itertools.product([0, 1], repeat=3) if 0 < sum(s) < 3])
def test_retllm_read_query_shapes(shape):
    full = ("Ann Lee", "investor in", "BMW")
    q = Triple(*(t if keep else "" for t, keep in zip(full, shape)))
    results = [Triple("Ann Lee", "investor in", "BMW"), Triple("Bo Kim", "investor in", "BMW")]
    text = format_retllm_read(q, results)
    [call] = parse_retllm(text)
    assert isinstance(call, MemRead) and call.queries == (q,) and call.results == tuple(results)
    assert query_shape(q) == tuple(map(bool, shape))
    assert format_retllm_read(call.queries[0], call.results) == text


def test_retllm_paper_examples_verbatim():
    q = "[MEM_READ{>>employed by>>Pfizer}:"
    [call] = parse_retllm(q)
    assert call.results is None and call.queries == (Triple("", "employed by", "Pfizer"),)
    [call] = parse_retllm(q + "{Jason Smith>>employed by>>Pfizer};{Ana Gomez>>employed by>>Pfizer}]")
    assert [r.subject for r in call.results] == ["Jason Smith", "Ana Gomez"]
    [call] = parse_retllm("[MEM_READ{Obama>>president of>>}:]")
    assert call.results == ()


@given(st.lists(triples, min_size=1, max_size=4))
def test_retllm_write_round_trip(ts):
    text = format_retllm_write(ts)
    calls = parse_retllm(text)
    assert [c.triples[0] for c in calls] == ts
    assert format_retllm_write([c.triples[0] for c in calls]) == text


@given(triples, st.lists(triples, max_size=4), st.sampled_from([(1, 0, 0), (0, 1, 1), (1, 1, 0), (0, 0, 1)]))
def test_retllm_read_round_trip(t, results, shape):
    q = Triple(*(x if k else "" for x, k in zip(t, shape)))
    text = format_retllm_read(q, results)
    [call] = parse_retllm(text)
    assert call.queries == (q,) and call.results == tuple(results)


@given(st.lists(triples, max_size=4))
def test_memllm_write_round_trip(ts):
    text = format_memllm_write(ts)
    [call] = parse_memllm(text)
    assert isinstance(call, MemWrite) and list(call.triples) == ts
    assert format_memllm_write(call.triples) == text


@given(st.lists(st.tuples(terms, terms, st.booleans()), min_size=1, max_size=3), st.lists(terms, max_size=5))
def test_memllm_read_round_trip(qs, results):
    queries = [Triple(a, r, "") if subj else Triple("", r, a) for a, r, subj in qs]
    text = format_memllm_read(queries, results)
    [call] = parse_memllm(text)
    assert isinstance(call, MemRead) and list(call.queries) == queries and list(call.results) == results


def test_memllm_format_matches_official_code():
    assert format_memllm_write([]) == "({MEM_WRITE-->})"
    assert (
        format_memllm_write([("A", "country", "B"), ("C", "founded by", "D")])
        == "({MEM_WRITE-->A>>country>>B;C>>founded by>>D})"
    )
    assert (
        format_memllm_read_query([("A", "country", ""), ("", "founded by", "D")])
        == "({MEM_READ(A>>country>>;>>founded by>>D)-->"
    )
    assert format_memllm_read([("A", "r", "")], ["x", "y"]) == "({MEM_READ(A>>r>>)-->x, y})"


def test_delimiters_inside_terms_are_escaped_not_split():
    text = format_memllm_write([("Washington, D.C.", "country", "United States (USA)")])
    [call] = parse_memllm(text)
    assert call.triples == (("Washington, D.C.", "country", "United States (USA)"),)
    text = format_retllm_write([("a>>b", "r", "{c}")])
    [call] = parse_retllm(text)
    assert call.triples == (("a>>b", "r", "{c}"),)


@pytest.mark.parametrize(
    "bad",
    [
        [("", "r", "o")],
        [("s", " ", "o")],
        [("s", "r")],
    ],
)
def test_format_refuses_bad_writes(bad):
    with pytest.raises(ApiFormatError):
        format_retllm_write(bad)
    with pytest.raises(ApiFormatError):
        format_memllm_write(bad)


def test_format_refuses_bad_queries():
    with pytest.raises(ApiFormatError, match="no known term"):
        format_retllm_read_query(("", "", ""))
    with pytest.raises(ApiFormatError, match="exactly one"):
        format_memllm_read_query([("a", "r", "b")])


@pytest.mark.parametrize(
    "text, what",
    [
        ("[MEM_WRITE{a>>b>>c]", "unbalanced"),
        ("[MEM_WRITE{a>>b>>c>>d}]", "3 terms"),
        ("[MEM_WRITE{a>>b}]", "3 terms"),
        ("[MEM_READ{>>>>}:]", "all three terms are empty"),
        ("[MEM_WRITE{a>>b>>c} oops]", "expected ']'"),
        ("[MEM_READ{a>>b>>}:{x>>y>>z} junk]", "stray text"),
        ("[MEM_WRITE{a>>>>c}]", "empty term"),
        ("[MEM_DELETE{a>>b>>c}]", "unknown"),
    ],
)
def test_retllm_malformed_gives_structured_error(text, what):
    calls = parse_retllm("Sure! " + text + " thanks")
    assert len(calls) == 1 and isinstance(calls[0], ApiError) and what in calls[0].message
    assert calls[0].text.startswith("[MEM_")


@pytest.mark.parametrize(
    "text, what",
    [
        ("({MEM_WRITE-->a>>b>>c", "not closed"),
        ("({MEM_WRITE-->a>>b})", "3 terms"),
        ("({MEM_READ(a>>b>>c)-->x})", "exactly one"),
        ("({MEM_READ(a>>b>>)-->x, y", "not closed"),
        ("({MEM_READ(a>>b>>", "not closed"),
    ],
)
def test_memllm_malformed_gives_structured_error(text, what):
    [call] = parse_memllm("text " + text)
    assert isinstance(call, ApiError) and what in call.message


def test_strip_calls_leaves_only_user_facing_text():
    s = "[MEM_READ{>>employed by>>Pfizer}:{Ann>>employed by>>Pfizer}]Ann is employed by Pfizer."
    assert strip_retllm_calls(s) == "Ann is employed by Pfizer."
    assert strip_memllm_calls("He was born in ({MEM_READ(Ann>>born in>>)-->Paris})Paris.") == "He was born in Paris."


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from(list("[]{}()>:;,-\\ab MEM_WRITEADUSR")), max_size=60))
def test_parsers_never_raise_on_random_text(text):
    for parse in (parse_retllm, parse_memllm):
        for c in parse(text):
            assert isinstance(c, (MemWrite, MemRead, ApiError))
            assert 0 <= c.start < c.end <= len(text)


@settings(max_examples=200)
@given(
    st.lists(
        st.sampled_from(
            [
                "[MEM_WRITE{",
                "[MEM_READ{",
                "({MEM_WRITE-->",
                "({MEM_READ(",
                ")-->",
                "})",
                "}]",
                "}:",
                "{",
                "}",
                ">>",
                ";",
                "a",
                "b c",
                "]",
                "\\",
            ]
        ),
        max_size=12,
    )
)
def test_parsers_never_raise_on_api_shaped_fragments(parts):
    text = "".join(parts)
    assert all(isinstance(c, (MemWrite, MemRead, ApiError)) for c in parse_retllm(text) + parse_memllm(text))


def test_degenerate_call_is_one_error_and_never_reaches_the_user():
    """Seen from a trained 135M model: a write that never closes and repeats its opener."""
    text = "[MEM_WRITE{Willian Banik>>customer of>>BMW}][MEM_WRITE{MEM_WRITE{MEM_WRITE{MEM_WRITE{"
    calls = parse_retllm(text)
    assert isinstance(calls[0], MemWrite) and isinstance(calls[1], ApiError) and len(calls) == 2
    assert strip_retllm_calls(text) == ""
    # an unclosed call still leaves a following well-formed call, and the text after a closing ']', alone
    calls = parse_retllm("[MEM_WRITE{a>>b[MEM_WRITE{x>>y>>z}]")
    assert isinstance(calls[0], ApiError) and calls[1] == MemWrite((Triple("x", "y", "z"),), 15, 35)
    assert strip_retllm_calls("[MEM_WRITE{a>>b>>c] ok") == " ok"


# ----------------------------------------------------- hostile input: linear work, calls closed at their own end
class Scanned(str):
    """A text that counts the characters the parsers scan or copy through it (str.find, slices)."""

    work = 0

    def find(self, sub, start=0, *end):
        found = str.find(self, sub, start, *end)
        Scanned.work += (len(self) if found < 0 else found) - start
        return found

    def __getitem__(self, key):
        part = str.__getitem__(self, key)
        Scanned.work += len(part)
        return part


@pytest.mark.parametrize(
    "unit",
    [
        "[MEM_X]",
        "({MEM_READ(",
        "({MEM_WRITE-->Ann>>employer>>Pfizer;Bo>>employer>>Pfizer}) and ",
        "({MEM_READ(Ann>>employer>>)-->Pfizer}) ",
        "[MEM_READ{a>>b>>}:{",
        "[MEM_WRITE{a>>b>>c}] ",
        "({MEM_WRITE-->a",
        "[MEM_WRITE{",
    ],
)
def test_parse_and_strip_do_linear_work(unit):
    """8x the text, 8x the work (was up to 64x: quadratic shapes took 5-10 s at 1 MB); not a timed test."""
    work = []
    for n in (2_000, 16_000):
        text = Scanned((unit * n)[:n])
        Scanned.work = 0
        for fn in (parse_retllm, strip_retllm_calls, parse_memllm, strip_memllm_calls):
            fn(text)
        work.append(Scanned.work)
    assert work[1] <= 10 * max(work[0], 1)


def test_an_error_ends_where_its_call_does():
    assert strip_retllm_calls("[MEM_WRITE{a>>b>>c}Paris") == "Paris"  # the "P" is the text's
    assert strip_retllm_calls("[MEM_READ{a>>b>>}Paris") == "Paris"
    for text in ("[MEM_WRITE{a>>b>>c}", "x[MEM_READ{a>>b>>}", "({MEM_WRITE-->a>>b>>c}", "[MEM_READ{a>>b>>}:{x>>y>>z}"):
        for c in parse_retllm(text) + parse_memllm(text):
            assert 0 <= c.start < c.end <= len(text) and c.text == text[c.start : c.end]


def test_a_memllm_query_is_closed_only_by_its_own_separator():
    """A term `a)` before `>>` escapes as `a\\)-->`; a query decoder must not stop there."""
    assert memllm_query_closed("x ({MEM_READ(Ann>>born in>>)-->")
    # closed, though not a valid query: the caller says so
    assert memllm_query_closed("({MEM_READ(a>>b>>c)-->")
    assert not memllm_query_closed(r"({MEM_READ(a\)-->")
    assert memllm_query_closed(r"({MEM_READ(a\)>>born in>>)-->")
    assert not memllm_query_closed("({MEM_READ(Ann>>born in>>)-->Paris})")
    assert not memllm_query_closed("no call )-->")
    text = format_memllm_read_query([("a)", "r", "")])
    assert text == r"({MEM_READ(a\)>>r>>)-->" and [
        i for i in range(len(text) + 1) if memllm_query_closed(text[:i])
    ] == [len(text)]
