"""Coordinated names written alike: "Ann Lee and Bo Chen work at BMW" says one fact of each listed name. A 135M
model writing such a list sometimes stops a name short (`[MEM_WRITE{Ann Lee>>employed by>>BMW}]` and no call for Bo
Chen). `coordinated_writes` gives the facts the list implies and the turn did not write: each unwritten name of a
list takes the one (role, relation, other term) that the list's written names share. An extension beyond the paper
(`RetLLMController(coordinated_writes=True)`), off by default; notebook 03 scores a statement's writes with the rule's
(`stored exact`) beside the model's own calls.

`unwritten_names` finds the names of two or more capitalised words that a statement says and no write of the turn
holds, in any sentence shape ("Cisco, which Ann Lee runs, has Bo Wu as a shareholder" → Bo Wu): the controller's
`named_writes` rule then asks the model for each one's likeliest write (`RetLLMController(named_writes=True)`).
Both act after the turn. `EveryName` acts while the model writes (`RetLLMController(write_every_name=True)`): after a
write, the next call is another write whose subject is the first such name, so the model neither ends the turn nor
skips a name while one is left, and chooses only the relation and the object.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from ..api import MemRead, MemWrite, Triple, parse_retllm
from .copying import known_near

__all__ = ["name_lists", "coordinated_writes", "unwritten_names", "EveryName"]

# a capitalised word ("Kapoor-Shah", "O'Neil", "eBay"), and the lower-case particles a name may hold between two
_CAP = r"(?:[A-Z]|[a-z]+[A-Z])\w*(?:[-'’]\w+)*"
_PARTICLES = r"(?:&|van|von|der|den|de|da|del|du|di|la|le)"
_NAME = re.compile(rf"{_CAP}(?:\s+(?:{_PARTICLES}\s+)*{_CAP})*")
# what stands before a sentence's first word: nothing, or a sentence's end (quotes and brackets may follow either)
_SENTENCE_START = re.compile(r"(?:^|[.!?…]\s+)[\"'“‘(\[]*\s*$")
# capitalised words that begin a sentence without beginning a name: articles, determiners, pronouns, prepositions,
# conjunctions, question words, sentence adverbs and a few imperatives ("Among Roche's bosses ...", "Yesterday Ann
# Lee ...", "Note that ..."); no given name of the kit's data sets is among them
_NOT_NAME_START = frozenset(
    """A An The This That These Those Each Every Some Any Many Most Much Several Few All Both Either Neither No None
    Another Other Such Its Their His Her Our My Your He She It They We You One Among In On At For From With Without By
    Of To Into Onto After Before Since During Under Over Between Like Unlike Besides Beside Despite Through Throughout
    Across Along Within Until Till As About Against Behind Beyond Near Via And But Or Nor So Yet If When While
    Whereas Although Though Because Once Unless Whether Who Whom Whose What Which Where Why How Then Now Today Yesterday
    Tomorrow Tonight Also However Meanwhile Later Earlier Recently Lately Currently Formerly Previously Last Next Still
    Only Even Just Here There Moreover Furthermore Finally Thus Therefore Indeed Instead Otherwise Please Note Remember
    Apparently Actually Sadly Luckily Fortunately Unfortunately Interestingly Surprisingly Back Ever Never
    Sometimes Often Usually Again""".split()
)
# what stands between two names of one list: a comma, "and", or both
_JOIN = re.compile(r"\s*,\s*(?:and\s+)?|\s+and\s+")


def name_lists(text: str) -> list[list[str]]:
    """Every list of two or more capitalised names joined by commas and "and" (an "and" at least once: "Paris,
    France" is no list), in text order."""
    runs = list(_NAME.finditer(text))
    lists, cur, joined_by_and = [], [], False
    for prev, run in zip([None, *runs], runs):
        gap = text[prev.end() : run.start()] if prev is not None else None
        if gap is not None and _JOIN.fullmatch(gap):
            cur.append(run.group())
            joined_by_and |= "and" in gap
            continue
        if len(cur) >= 2 and joined_by_and:
            lists.append(cur)
        cur, joined_by_and = [run.group()], False
    if len(cur) >= 2 and joined_by_and:
        lists.append(cur)
    return lists


def coordinated_writes(text: str, written: Sequence[Sequence[str]]) -> list[Triple]:
    """The facts a list of names in `text` implies and `written` lacks: a name no write holds takes the list's
    written names' one shared (role, relation, other term); a list whose written names differ in it (e.g. "A and B
    manage X and Y, respectively") or have none gives nothing."""
    named = {_key(x) for t in written for x in (t[0], t[2])}
    out: list[Triple] = []
    for names in name_lists(text):
        keys = {_key(n) for n in names}
        have = {_key(n) for n in names if _key(n) in named}
        missing = [n for n in names if _key(n) not in named]
        if not have or not missing:
            continue
        shared = {
            (role, t[1], t[2 - role])
            for t in written
            for role in (0, 2)
            if _key(t[role]) in have and _key(t[2 - role]) not in keys
        }
        if len(shared) != 1:
            continue
        role, rel, other = shared.pop()
        for n in missing:
            t = Triple(n, rel, other) if role == 0 else Triple(other, rel, n)
            if t not in out:
                out.append(t)
    return out


def unwritten_names(text: str, written: Sequence[Sequence[str]]) -> list[str]:
    """The names of two or more capitalised words in `text` that no written term holds, contains or is part of ("Prime
    Minister Ivan Kostov" is written as "Ivan Kostov"; "Nestle's Bo Wu" holds a written "Nestle", the possessive
    dropped, so Bo Wu there is not looked for), in text order, each once. A name that types a written term with a slip
    (`copying.known_near`) counts as written only when the statement never says that term itself: the write corrected
    the statement's spelling ("Johnsoon & Johnson pays ..." written as "Johnson & Johnson"), whereas "Bo Xu and Bo Wu"
    are two people. A sentence's first word is capitalised anyway: it is left out of a name when it is a word that
    begins sentences, not names (`_NOT_NAME_START`: "The East" is no name, though "In May Ann Lee ..." gives "May Ann
    Lee"), and kept otherwise ("Bo Wu invests in it." says Bo Wu; "Goldman Sachs Group hired Ann Lee." holds a written
    "Goldman Sachs"), so a capitalised noun that begins a sentence joins the name after it ("Shareholders Ann Lee"); the
    pronoun "I" ends a run."""
    terms = [_bare(x) for t in written for x in (t[0], t[2])]
    said = _plain(_bare(text))
    unsaid = [t for t in terms if not _words_in(_plain(t), said)]  # written terms the statement spells otherwise
    out: list[str] = []
    for run in _NAME.finditer(text):
        found = run.group()
        first, _, rest = found.partition(" ")
        if _SENTENCE_START.search(text[: run.start()]) and _bare(first).title() in _NOT_NAME_START:
            found = rest  # a sentence's first word, capitalised only for that
        for name in re.split(r"(?:^|\s+)I(?:\s+|$)", found):  # "Yesterday I met ...": the pronoun ends a run
            if len(re.findall(_CAP, name)) < 2 or name in out:
                continue
            k = _bare(name)
            if not any(_words_in(k, t) or _words_in(t, k) for t in terms) and not known_near([k], unsaid):
                out.append(name)
    return out


@dataclass(frozen=True)
class EveryName:
    """A statement's names written in its order, none left out: while every write of the turn so far has one of
    `relations` (the people–company relations, whose subject is always a person), the next write's subject is the
    first name of two or more capitalised words that the statement says and no write holds (`unwritten_names`; a
    `known` name, e.g. a company of the list, is never a subject). The model chose the first write itself, and
    chooses each write's relation and object."""

    statement: str
    relations: frozenset[str]
    known: tuple[str, ...] = ()

    def subjects(self, generated: str) -> list[str]:
        """The phrases the next write's subject may be: the first unwritten name and its endings of two or more
        capitalised words ("Ann Lee" for "Shareholders Ann Lee"). Empty when the turn has no write yet, has a read,
        has a write with another relation, or every name the statement says is written or a known one."""
        calls = parse_retllm(generated)
        written = [t for c in calls if isinstance(c, MemWrite) for t in c.triples]
        read = any(isinstance(c, MemRead) for c in calls)
        if not written or read or any(t[1] not in self.relations for t in written):
            return []
        known = [_key(k) for k in self.known]
        for name in unwritten_names(self.statement, written):
            if any(_words_in(k, _key(name)) for k in known) or known_near([name], self.known):
                continue
            words = name.split()
            ends = (" ".join(words[i:]) for i in range(len(words)))
            return [e for e in ends if len(re.findall(_CAP, e)) >= 2]
        return []


def _bare(name: str) -> str:
    """`_key` with each word's possessive dropped: "Nestle's Bo Wu" holds the written "Nestle"."""
    return re.sub(r"['’]s\b", "", _key(name))


def _plain(text: str) -> str:
    """Words without the punctuation around them: "BMW." is the word "bmw" of a sentence."""
    return " ".join(re.findall(r"[\w&'’-]+", text))


def _words_in(part: str, whole: str) -> bool:
    """`part`'s words are a run of `whole`'s."""
    p, w = part.split(), whole.split()
    return bool(p) and any(w[i : i + len(p)] == p for i in range(len(w) - len(p) + 1))


def _key(name: str) -> str:
    """A name as a list and a call may both say it: case folded, a leading "the" dropped ("the NFL", "NFL")."""
    n = name.casefold().strip()
    return n[4:] if n.startswith("the ") else n
