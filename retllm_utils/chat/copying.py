"""Names copied exactly: RET-LLM calls whose entity terms can only be what the user wrote (or, for reads, what the
memory stores). An extension beyond the paper (notebook 03 reports it beside unconstrained decoding).

A 135M model copying a name sometimes respells it ("Pasquale Ballif" -> "Pascule Ballif"): the memory then holds a
person who does not exist, or a read asks about one. `CopyTerms` is a transformers `LogitsProcessor`: while the
model is inside the subject or object of a `[MEM_WRITE{..}]` / `[MEM_READ{..}:` call, only tokens that keep the
term a prefix of an allowed phrase (followed by the term's closing delimiter) may be chosen. Relations stay free.
Greedy decoding with it picks the model's best *allowed* token. Outside a call it also keeps the model from writing a
memory reply of its own (`{a>>r>>b}]` with no read before it): only the controller answers a read, and a reply the
model makes up names whoever it likes.

`invented_terms` measures the same thing after the fact, for any model: the call terms that are not allowed.

`StateFacts` does the same for the answer after a read: each sentence must be one of the memory reply's facts in the
data set's words (one sentence per fact, as training states them), each fact at most once; which facts, in which
order, and when to stop stay the model's choice (with `in_order=True` the facts come in the reply's order, as
training answers state them, none skipped: the model chooses only where to stop). A 135M model otherwise drifts while
copying a long reply ("... is employed by SAP" for a fact about Uber), repeats one fact in a loop, or splices two
names.

`CopyAnswerNames` holds a free answer (no `StateFacts`: the answer in the model's own words) to names it was given:
every run of capitalised words must be one of the reply's subjects and objects or the user's words ("I" aside), so
an answer cannot respell "Kenji Mensah" as "Kuno Mensah" or add a person no one named. The words between names stay
free; a name that begins in lower case may be said from its first capitalised word on ("Chicago Cubs" for "the Chicago
Cubs"), and a token that is one byte of a character is judged with the bytes before it. Given the reply's (subject,
object) pairs, the reply's names one sentence says must go together: "Mikael Borges is employed by Amazon." is refused
when the reply pairs Mikael Borges with AMD only (a 135M model listing a long reply puts people at another of its
companies).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence

import torch
from transformers import LogitsProcessor

from .. import api
from ..api import RETLLM_READ_OPEN, RETLLM_WRITE_OPEN, MemRead, MemWrite

__all__ = [
    "AllowedTerms",
    "CopyTerms",
    "StateFacts",
    "CopyAnswerNames",
    "answer_continuations",
    "answer_names_ok",
    "said_whole",
    "user_spans",
    "allowed_terms",
    "recased",
    "known_near",
    "slips_of_known",
    "invented_terms",
    "STORED_CAP",
]

# a read may use stored phrases only from a memory this small: listing a large one per turn is slow
STORED_CAP = 5000
_EDGE = "\"'“”‘’()[]{}.,;:!?"
_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class AllowedTerms:
    """The phrases a write's and a read's subject/object may be (a read may also leave a term empty), and a write's
    relation (empty: free words)."""

    write: frozenset[str]
    read: frozenset[str]
    relations: frozenset[str] = frozenset()
    read_relations: frozenset[str] = frozenset()  # a read's relation (empty: free words)
    # the statement's names a writing turn must write (`coordination.EveryName`; None: the model may end or skip)
    every_name: Any = None


def user_spans(text: str, max_words: int = 6) -> set[str]:
    """Every run of up to `max_words` consecutive words of `text`, edge punctuation and a possessive 's cut off."""
    words = []
    for m in _WORD.finditer(text):
        start, end = m.start(), m.end()
        while start < end and text[start] in _EDGE:
            start += 1
        while end > start and text[end - 1] in _EDGE:
            end -= 1
        if start < end:
            words.append((start, end))
    spans = set()
    for i in range(len(words)):
        for j in range(i, min(i + max_words, len(words))):
            span = text[words[i][0] : words[j][1]]
            spans.add(span)
            if span.endswith(("'s", "’s")):
                spans.add(span[:-2])
    return spans


def recased(span: str) -> str:
    """The span with each word's first letter capitalised: a name the user typed in lower case, as stored."""
    return " ".join(w[:1].upper() + w[1:] for w in span.split(" "))


def known_near(spans: Iterable[str], known: Iterable[str], max_slips: int = 1) -> set[str]:
    """The known names (e.g. the company list) that a span types with other case or a slip or two: a swap of two
    neighbours, a letter dropped or doubled (optimal string alignment distance <= `max_slips`, case folded; a slip
    only in spans of 5 letters or more)."""
    return {k for names in slips_of_known(spans, known, max_slips).values() for k in names}


def slips_of_known(spans: Iterable[str], known: Iterable[str], max_slips: int = 1) -> dict[str, set[str]]:
    """Each span that types a known name with other case or a slip (`known_near`'s rule) -> those known names."""
    from rapidfuzz.distance import OSA

    by_fold = {k.lower(): k for k in known}
    out: dict[str, set[str]] = {}
    for span in spans:
        s = span.lower()
        if s in by_fold and len(s) >= 2:  # "lg" for LG: case alone
            out[span] = {by_fold[s]}
        elif len(s) >= 5:  # a slip only in a longer word: "Snoy" is not a slip of Sony
            near = {
                k for f, k in by_fold.items() if abs(len(f) - len(s)) <= max_slips and OSA.distance(s, f) <= max_slips
            }
            if near:
                out[span] = near
    return out


def allowed_terms(
    user_text: str,
    memory: Any = None,
    cap: int = STORED_CAP,
    known: Iterable[str] = (),
    prefer_known: bool = False,
    relations: Iterable[str] | None = None,
    read_relations: bool | str = False,
    read_stored_names: bool = True,
) -> AllowedTerms:
    """Writes copy the user's words, re-cased as stored names are, or a `known` name the user typed with a slip;
    reads may also name any stored subject or object (memories up to `cap`; `read_stored_names=False`: not, as every
    data set question names its entities in the user's words, a misspelt company as the company list spells it).
    `prefer_known`: a span that types a known name otherwise ("lg", "Mersk") is not allowed itself, only the known
    name ("LG", "Maersk"), so the memory stores and asks for the one spelling (the controller's rule; the invented-name
    measure keeps both); a known name typed exactly keeps its re-cased form ("EBay"), which the controller runs as the
    known name.
    `relations` (a relation vocabulary, e.g. the data set's relation names): a write's relation is then one of them
    or the user's own words, so a relation never trained on is stored as said, not respelt ("lives in", not "is
    living in"); None leaves relations free. `read_relations`: a read's relation too is one of them, a stored relation
    or the user's words (or empty), so a question asks for what the memory holds ("lives in", not "is living in");
    `read_relations="stored"`: one of `relations` or a stored relation (or empty), not the user's words, whose spans
    let a read's relation run on into a name; a memory over `cap` leaves it free; `read_relations="words"` or
    `"likely"`: free (`RetLLMController` then asks for the stored relation that shares its content words,
    `stored_relation_by_words`, and with "likely", after a read that found nothing with a relation stored nowhere
    and not one of `relations`, for the likeliest of the relations stored for its subject or object, or none)."""
    raw = user_spans(user_text)
    slips = slips_of_known(raw, known)
    spans = raw | {recased(s) for s in raw} | {k for names in slips.values() for k in names}
    if prefer_known:  # a known name typed exactly may be re-cased as a call capitalises it ("EBay" for eBay)
        spans -= {v for s, names in slips.items() for v in (s, recased(s)) if v not in names and s not in names}
    stored: set[str] = set()
    stored_rels: set[str] = set()
    if memory is not None and len(memory) <= cap:
        for s, r, o in memory:
            stored.update((s, o))
            stored_rels.add(r)
    rels = frozenset(raw | set(relations)) if relations is not None else frozenset()
    if read_relations in ("words", "likely"):  # decoded free; the controller maps the read's relation afterwards
        read_rels = frozenset()
    elif read_relations == "stored":
        known_memory = memory is None or len(memory) <= cap
        read_rels = frozenset(set(relations or ()) | stored_rels | {""}) if known_memory else frozenset()
    else:
        read_rels = rels | stored_rels | {""} if rels and read_relations else frozenset()
    return AllowedTerms(
        write=frozenset(spans),
        read=frozenset(spans | stored if read_stored_names else spans),
        relations=rels,
        read_relations=read_rels,
    )


# words a relation phrase shares without saying which relation it is: auxiliaries, articles, prepositions
_FUNCTION_WORDS = frozenset(
    "a an the is was are were be been being am has have had do does did of in on at to for with by from as into".split()
)


_SUFFIXES = (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("er", ""), ("or", ""), ("s", ""))


def _stem(word: str) -> str:
    """A word without its inflection or agent ending ("live", "lives", "living" -> "liv"; "studied" -> "study";
    "founder", "founded" -> "found")."""
    w = word.lower()
    for end, repl in _SUFFIXES:
        if w.endswith(end) and len(w) - len(end) >= 3:
            w = w[: -len(end)] + repl
            break
    return w[:-1] if w.endswith("e") and len(w) > 3 else w


def content_stems(relation: str) -> frozenset[str]:
    """The stems of a relation phrase's content words: what two wordings of one relation share."""
    return frozenset(_stem(w) for w in re.findall(r"[A-Za-z]+", relation) if w.lower() not in _FUNCTION_WORDS)


def stored_relation_by_words(relation: str, stored: Iterable[str]) -> str | None:
    """The one stored relation that shares a content word with a read's `relation` ("is living in" -> "lives in",
    "play with" -> "plays for"), or None: the relation is stored as asked, shares no content word, or shares one with
    several stored relations (no guess)."""
    stored = set(stored)
    mine = content_stems(relation)
    if not mine or relation in stored:
        return None
    hits = [r for r in stored if content_stems(r) & mine]
    return hits[0] if len(hits) == 1 else None


_OPENERS = (RETLLM_WRITE_OPEN, RETLLM_READ_OPEN)


def _made_up_reply(generated: str, piece: str) -> bool:
    """True when `piece` would begin a memory reply in the model's own text: a "{" that opens no call, or the "]" of
    an empty reply right after a ":" (a read the controller answers pauses at its ":", so the model never goes on)."""
    text = generated + piece
    for i in range(len(generated), len(text)):
        if text[i] == "{" and not text[: i + 1].endswith(_OPENERS) or text[i] == "]" and text[i - 1 : i] == ":":
            return True
    return False


def _open_parts(generated: str) -> tuple[list[str], bool] | None:
    """(the terms so far, is a read) when `generated` ends inside a call's braces."""
    w, r = generated.rfind(RETLLM_WRITE_OPEN), generated.rfind(RETLLM_READ_OPEN)
    start, read = (w + len(RETLLM_WRITE_OPEN), False) if w > r else (r + len(RETLLM_READ_OPEN), True)
    if max(w, r) < 0 or "}" in generated[start:]:
        return None
    return generated[start:].split(">>"), read


def _open_term(generated: str) -> tuple[str, str, bool] | None:
    """(partial term, closing delimiter, is a read) when `generated` ends inside a call's subject or object."""
    state = _open_parts(generated)
    if state is None:
        return None
    parts, read = state
    if len(parts) == 1:
        return parts[0], ">>", read
    if len(parts) == 3:
        return parts[2], "}", read
    return None  # the relation (free), or a malformed call the parser will refuse


def _in_relation(generated: str) -> bool:
    """True when `generated` ends inside a call's relation: free words, but it ends with ">>", never a brace."""
    state = _open_parts(generated)
    return state is not None and len(state[0]) == 2


_TOKEN_TEXTS: dict[tuple[str, int], dict[int, str]] = {}  # per tokenizer (name, size): token id -> its text


def _token_texts(tokenizer: Any) -> dict[int, str]:
    """A cache of single-token texts shared by every processor on the same tokenizer (keyed by name and size, not
    by id(), which Python reuses once a tokenizer is freed)."""
    return _TOKEN_TEXTS.setdefault((getattr(tokenizer, "name_or_path", ""), len(tokenizer)), {})


class _Choose(LogitsProcessor):
    """Greedy decoding's best *allowed* token: subclasses say which texts may follow."""

    def __init__(self, tokenizer: Any, prompt_len: int):
        self.tokenizer, self.prompt_len, self.cache = tokenizer, prompt_len, _token_texts(tokenizer)

    def _text(self, i: int) -> str:
        t = self.cache.get(i)
        if t is None:
            t = self.cache[i] = self.tokenizer.decode([i])
        return t

    def _generated(self, input_ids: torch.LongTensor) -> str:
        if input_ids.shape[0] != 1:
            raise ValueError(f"{type(self).__name__} decodes one sequence at a time (batch size 1)")
        return self.tokenizer.decode(input_ids[0, self.prompt_len :], skip_special_tokens=False)

    @staticmethod
    def _ranked(scores: torch.FloatTensor, first: int = 64) -> Iterator[int]:
        """Token ids, best first: the top `first` cheaply (the allowed one is almost always among them), then the
        rest from a full sort, which costs milliseconds per generated token on CPU."""
        top = torch.topk(scores[0], min(first, scores.shape[-1])).indices.tolist()
        yield from top
        seen = set(top)
        yield from (i for i in torch.argsort(scores[0], descending=True).tolist() if i not in seen)

    @staticmethod
    def _only(scores: torch.FloatTensor, i: int) -> torch.FloatTensor:
        out = torch.full_like(scores, -float("inf"))
        out[0, i] = scores[0, i]
        return out

    def _best(self, scores: torch.FloatTensor, ok: Callable[[str], bool]) -> torch.FloatTensor:
        """The best token whose text is `ok`: almost always the top one, and then `scores` unchanged."""
        return self._best_id(scores, lambda i: ok(self._text(i)))

    def _best_id(self, scores: torch.FloatTensor, ok: Callable[[int], bool]) -> torch.FloatTensor:
        """`_best` for a test that needs the token id, not only its text."""
        for k, i in enumerate(self._ranked(scores)):
            if ok(i):
                return scores if k == 0 else self._only(scores, i)
        return scores


class CopyTerms(_Choose):
    """Keeps every call's subject and object a copy of an allowed phrase (see the module docstring)."""

    def __init__(self, tokenizer: Any, prompt_len: int, allowed: AllowedTerms):
        super().__init__(tokenizer, prompt_len)
        self.allowed = allowed

    def _ok(self, piece: str, targets: Sequence[str]) -> bool:
        if "\ufffd" in piece:  # part of a multi-byte character: allowed where a target goes on with non-ASCII
            return any(not t.isascii() for t in targets)
        # a piece may run past the term's close (e.g. "}:"), but not into a longer separator: ">>>" is no ">>"
        return any(t.startswith(piece) or piece.startswith(t) and piece[len(t) : len(t) + 1] != ">" for t in targets)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generated = self._generated(input_ids)
        state = _open_term(generated)
        if self.allowed.every_name is not None:
            held = self._next_name(scores, generated, state)
            if held is not None:
                return held
        parts = _open_parts(generated) if self.allowed.relations else None
        if parts is not None and len(parts[0]) == 2:  # a relation: copied too where asked
            phrases = self.allowed.read_relations if parts[1] else self.allowed.relations
            if phrases:
                return self._copy(scores, (parts[0][1], ">>", parts[1]), phrases)
        if state is None:
            # a two-term call is malformed: nothing would read, the model would go on
            if _in_relation(generated):
                return self._best(scores, lambda piece: not any(c in piece for c in "{}[]"))
            return self._best(
                scores, lambda piece: not (("{" in piece or "]" in piece) and _made_up_reply(generated, piece))
            )
        # a read may leave the term unknown
        return self._copy(scores, state, self.allowed.read | {""} if state[2] else self.allowed.write)

    def _next_name(
        self, scores: torch.FloatTensor, generated: str, state: tuple[str, str, bool] | None
    ) -> torch.FloatTensor | None:
        """Between calls right after a write, and at a write's subject: the next write begins with the statement's
        first unwritten name (`AllowedTerms.every_name`); None where that rule does not apply."""
        if state is None:  # between calls: nothing since the last "]" but spaces and the start of a write's opener
            end = generated.rfind("]")
            tail = generated[end + 1 :]
            if end < 0 or _in_relation(generated) or not RETLLM_WRITE_OPEN.startswith(tail.lstrip()):
                return None
            names = self.allowed.every_name.subjects(generated[: end + 1])
            return self._copy(scores, (tail, ">>", False), [RETLLM_WRITE_OPEN + n for n in names]) if names else None
        start = generated.rfind(RETLLM_WRITE_OPEN)
        if state[2] or state[1] != ">>" or start < 0:  # a read, or a write's object
            return None
        names = self.allowed.every_name.subjects(generated[:start])
        return self._copy(scores, state, names) if names else None

    def _copy(
        self, scores: torch.FloatTensor, state: tuple[str, str, bool], phrases: Iterable[str]
    ) -> torch.FloatTensor:
        """The best token that keeps the open term (`state`: partial text, its close, is a read) a prefix of one of
        `phrases` followed by the close."""
        partial, close, _ = state
        head = partial.lstrip()  # the parser strips terms: spaces before the first character are harmless
        # the rest of every allowed phrase and its close that `head` begins (it may end in part of the close: ">")
        targets = [f[len(head) :] for f in (p + close for p in phrases) if f.startswith(head) and len(f) > len(head)]
        if not targets:
            return scores  # no allowed phrase at all (e.g. an empty message): nothing to copy from
        for i in self._ranked(scores):  # the best allowed token
            piece = self._text(i)
            if self._ok(piece if head else piece.lstrip() or piece, targets):
                return self._only(scores, i)
        return scores


def answer_continuations(text: str, sentences: Sequence[str], in_order: bool = False) -> tuple[set[str], bool] | None:
    """What may follow `text` in an answer made of distinct `sentences` joined by spaces (`in_order`: in their order,
    none skipped): (the rest of every sentence it may be inside or begin next, whether it may end here); None when
    `text` is no such answer's prefix."""
    rests: set[str] = set()
    complete = False
    found = False

    def walk(r: str, left: tuple[str, ...], first: bool) -> None:
        nonlocal complete, found
        options = left[:1] if in_order else left
        if not r:
            found = True
            complete = complete or not first
            rests.update(s if first else " " + s for s in options)
            return
        for k, s in enumerate(options):
            full = s if first else " " + s
            rest = left[:k] + left[k + 1 :]
            if r.startswith(full):
                walk(r[len(full) :], rest, False)
            elif full.startswith(r):
                found = True
                rests.add(full[len(r) :])

    walk(text, tuple(dict.fromkeys(sentences)), True)
    return (rests, complete) if found else None


class StateFacts(_Choose):
    """Keeps the answer after a read to the reply's facts, each stated once in `sentences`' words (module docstring)."""

    def __init__(self, tokenizer: Any, prompt_len: int, sentences: Sequence[str], end_id: int, in_order: bool = False):
        super().__init__(tokenizer, prompt_len)
        self.sentences, self.end_id, self.in_order = list(dict.fromkeys(sentences)), end_id, in_order

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        text = self._generated(input_ids)
        state = answer_continuations(text, self.sentences, self.in_order)
        if state is None or not self.sentences:
            return scores  # e.g. a non-ASCII character split over tokens went astray: the model is free again
        rests, complete = state
        for i in self._ranked(scores):
            if i == self.end_id:
                if complete:
                    return self._only(scores, i)
                continue
            piece = self._text(i)
            # part of a multi-byte character: allowed where a rest goes on with non-ASCII
            if "\ufffd" in piece:
                ok = any(r and not r[0].isascii() for r in rests)
            else:
                ok = bool(piece) and any(r.startswith(piece) for r in rests)
            if ok:
                return self._only(scores, i)
        return scores


# the capitalised words a training answer says that are no name ("I don't know.")
ANSWER_WORDS = frozenset({"I"})
_IN_NAME = "-&_"  # characters that join a word to the next ("Kapoor-Shah", "AT&T")


def _joined(text: str, i: int) -> bool:
    """True when the character at `i` continues the word before it."""
    return 0 <= i < len(text) and (text[i].isalnum() or text[i] in _IN_NAME)


def _runs_on(text: str, i: int) -> bool:
    """True when a capitalised word follows position `i` after one space: the run of names goes on."""
    return text[i : i + 1] == " " and text[i + 1 : i + 2].isupper()


def said_whole(names: Iterable[str]) -> set[str]:
    """`names` and, for one that begins in lower case, its part from the first capitalised word ("the Chicago
    Cubs" -> "Chicago Cubs") and its sentence-initial form ("The Chicago Cubs"): the capitalised words an answer
    says when it copies the name whole."""
    out = set(names)
    for n in names:
        if not n[:1].islower():
            continue
        words = n.split(" ")
        k = next((k for k, w in enumerate(words) if w[:1].isupper()), None)
        if k is not None:
            out.add(" ".join(words[k:]))
        if len(words) > 1 and words[0].isalpha():
            out.add(n[0].upper() + n[1:])
    return out


def _ends_inside(tail: str, names: Iterable[str]) -> bool:
    """True when `tail` stops inside one of `names`; a tail that stops in part of a character (U+FFFD, one byte of
    several) must stop where the name goes on with a character outside ASCII."""
    head = tail.rstrip("\ufffd")
    if len(head) == len(tail):
        return any(n.startswith(tail) for n in names)
    return any(n.startswith(head) and len(n) > len(head) and not n[len(head)].isascii() for n in names)


def _forms(names: Iterable[str]) -> dict[str, set[str]]:
    """Each capitalised form an answer may write (`said_whole`) -> the names it says."""
    out: dict[str, set[str]] = {}
    for n in names:
        for f in said_whole([n]):
            out.setdefault(f, set()).add(n)
    return out


def _goes_with(name: str, said: Sequence[str], pairs: set[tuple[str, str]]) -> bool:
    """True when `name` may share a sentence with the reply's names `said` before it: each pair is one of the reply's
    (subject, object) pairs, or two subjects, or two objects ("Ann and Bo are employed by SAP"). A name outside
    the reply's pairs (the user's words) goes with any."""
    subjects, objects = {s for s, _ in pairs}, {o for _, o in pairs}
    if name not in subjects and name not in objects:
        return True
    return all(
        m == name
        or (m, name) in pairs
        or (name, m) in pairs
        or (m in subjects and name in subjects)
        or (m in objects and name in objects)
        for m in said
    )


def answer_names_ok(text: str, names: Iterable[str], pairs: Iterable[tuple[str, str]] = ()) -> bool:
    """True when every capitalised word of `text` after its last call begins one of `names` (`said_whole`), each
    name ending on a word boundary (a possessive 's may follow) with no capitalised word right after it, and the
    text, if it stops inside a name, stops in one of them. With `pairs` (the reply's (subject, object) pairs), the
    reply's names that one sentence says must go together (`_goes_with`): a person is not put at another's company.
    Text inside a call is `CopyTerms`' to hold."""
    rest = text[text.rfind("]") + 1 :]
    if "[" in rest or "{" in rest:  # a call: not held
        return True
    forms, pairs = _forms(names), set(pairs)
    paired = {x for p in pairs for x in p}
    said: list[str] = []  # the reply's names this sentence has said

    def fits(form: str) -> str | None:
        """The name `form` says that goes with `said`, or None."""
        return next((n for n in sorted(forms[form]) if _goes_with(n, said, pairs)), None)

    i = 0
    while i < len(rest):
        if rest[i].isupper() and not _joined(rest, i - 1):
            tail = rest[i:]
            if _ends_inside(tail, forms):
                return any(fits(f) for f in forms if _ends_inside(tail, [f]))
            # a name ends on a word boundary, and not where a capitalised word follows: that would run two names
            # into one ("Iqbal Iqbal")
            ends = [f for f in forms if tail.startswith(f) and not _joined(tail, len(f)) and not _runs_on(tail, len(f))]
            fitting = [(len(f), n) for f in ends if (n := fits(f)) is not None]
            if not fitting:
                return False
            k, n = max(fitting)
            if n in paired:
                said.append(n)
            i += k
        else:
            if rest[i] == "\n" or rest[i] in ".!?;" and (i + 1 == len(rest) or rest[i + 1].isspace()):  # sentence ends
                said = []
            i += 1
    return True


class CopyAnswerNames(_Choose):
    """Keeps a free answer's names to `names` and `ANSWER_WORDS`, and the reply's names in one sentence to its
    `pairs` (module docstring); the words between them free."""

    def __init__(self, tokenizer: Any, prompt_len: int, names: Iterable[str], pairs: Iterable[tuple[str, str]] = ()):
        super().__init__(tokenizer, prompt_len)
        self.names = sorted({n for n in names if n} | ANSWER_WORDS)
        self.pairs = sorted(set(pairs))

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        text = self._generated(input_ids)
        ids = input_ids[0, self.prompt_len :].tolist()

        def ok(i: int) -> bool:
            piece = self._text(i)
            if "\ufffd" in piece or text.endswith("\ufffd"):  # one byte of a character: decode it with those before
                text_i = self.tokenizer.decode(ids + [i], skip_special_tokens=False)
            else:
                text_i = text + piece
            return answer_names_ok(text_i, self.names, self.pairs)

        return self._best_id(scores, ok)


def invented_terms(model_text: str, allowed: AllowedTerms) -> tuple[list[str], int]:
    """(terms of the model's calls that are not allowed, number of subject/object terms): the invented-name rate."""
    bad, n = [], 0
    for c in api.parse_retllm(model_text):
        if isinstance(c, MemWrite):
            terms, ok = [x for t in c.triples for x in (t[0], t[2])], allowed.write
        elif isinstance(c, MemRead):
            terms, ok = [x for q in c.queries for x in (q[0], q[2]) if x], allowed.read
        else:
            continue
        n += len(terms)
        bad += [x for x in terms if x not in ok]
    return bad, n
