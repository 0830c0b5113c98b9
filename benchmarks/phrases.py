"""Seeded generator of realistic triples for the memory benchmarks (no data files needed).

Entities look like people, organisations, places and works ("Lena Okafor", "Brightwater Analytics Ltd",
"Port Ederly", "The Silent Harbor"); relations are DocRED's 96 relation names plus RET-LLM's five phrases.
Fuzzy queries are made by perturbing stored phrases the way users do: dropping a token, changing case,
abbreviating, a typo.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
_SYL = [
    "ka",
    "lo",
    "mi",
    "ra",
    "ten",
    "bor",
    "vel",
    "an",
    "is",
    "or",
    "da",
    "ne",
    "sha",
    "ul",
    "fen",
    "tor",
    "li",
    "mar",
    "zo",
    "en",
    "gri",
    "pa",
    "ho",
    "ly",
    "qu",
    "sto",
    "wi",
    "ber",
    "ca",
    "dun",
]
_ORG = [
    "Analytics",
    "Holdings",
    "Pharma",
    "Systems",
    "Capital",
    "Motors",
    "Foods",
    "Energy",
    "Labs",
    "Media",
    "Logistics",
    "Bank",
    "Airlines",
    "Robotics",
    "Foundation",
    "University",
    "Institute",
    "Studios",
]
_SUFFIX = ["Ltd", "Inc", "Group", "AG", "SA", "Co", "GmbH", "plc", ""]
_PLACE = ["Port", "New", "Lake", "Mount", "San", "North", "East", "Fort", ""]
_WORK = ["The Silent", "A Distant", "Songs of the", "Return to", "The Last", "Beyond the", "Letters from"]
_NOUN = ["Harbor", "Winter", "River", "Garden", "Empire", "Machine", "Valley", "Storm", "Orchard", "Signal"]
RETLLM_RELATIONS = ["employed by", "manager of", "investor in", "founder of", "customer of"]


def _word(rng: random.Random, lo: int = 2, hi: int = 3) -> str:
    return "".join(rng.choice(_SYL) for _ in range(rng.randint(lo, hi))).capitalize()


def entity(rng: random.Random) -> str:
    kind = rng.random()
    if kind < 0.45:
        return f"{_word(rng)} {_word(rng)}"
    if kind < 0.75:
        return " ".join(x for x in (_word(rng), rng.choice(_ORG), rng.choice(_SUFFIX)) if x)
    if kind < 0.9:
        return " ".join(x for x in (rng.choice(_PLACE), _word(rng)) if x)
    return f"{rng.choice(_WORK)} {rng.choice(_NOUN)} {_word(rng, 1, 2)}"


def relations() -> list[str]:
    rel_info = ROOT / "data" / "redocred" / "rel_info.json"
    names = list(json.loads(rel_info.read_text()).values()) if rel_info.exists() else []
    return names + RETLLM_RELATIONS if names else RETLLM_RELATIONS + [f"related to {i}" for i in range(91)]


def make_triples(n: int, seed: int = 0, entities_per_triple: float = 0.4) -> list[tuple[str, str, str]]:
    """`n` distinct triples over about n*entities_per_triple distinct entities (so entities recur)."""
    rng = random.Random(seed)
    rels = relations()
    ents = list(dict.fromkeys(entity(rng) for _ in range(max(2, int(n * entities_per_triple)))))
    out, seen = [], set()
    while len(out) < n:
        t = (rng.choice(ents), rng.choice(rels), rng.choice(ents))
        if t[0] != t[2] and t not in seen:
            seen.add(t)
            out.append(t)
    return out


def perturb(phrase: str, rng: random.Random) -> str:
    """A near-miss of a stored phrase, as a fuzzy query would carry."""
    toks = phrase.split()
    choice = rng.random()
    if choice < 0.3 and len(toks) > 2:
        toks.pop(rng.randrange(len(toks)))
        return " ".join(toks)
    if choice < 0.5:
        return phrase.lower()
    if choice < 0.75 and len(phrase) > 4:
        i = rng.randrange(1, len(phrase) - 1)
        return phrase[:i] + phrase[i + 1 :]  # a dropped letter
    i = rng.randrange(1, len(phrase) - 1) if len(phrase) > 2 else 0
    return phrase[:i] + phrase[i : i + 2][::-1] + phrase[i + 2 :]  # swapped letters
