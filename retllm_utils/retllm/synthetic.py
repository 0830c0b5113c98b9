"""RET-LLM's synthetic people–company data set (§3.3, Tables 1–2), seeded and byte-reproducible (notebook 01).

The data set as a whole: its splits and columns (`features`), `make_dataset` from a `RetLLMConfig` (sizes, shares,
scene size, seed), saving (`save_dataset`: Arrow and JSON lines, byte-identical for the same config) and loading a
profile's copy (`load_synthetic`). How each example is drawn: `generator`; how facts are said: `phrasings`, `answers`.

`config.phrasings` picks the build: "paper" (the default; the committed data/retllm_synthetic, byte for byte) as
below, or "wide" (`wide.make_rows`: many more shapes, Re-DocRED relations, a new_relations split; each row's
`phrasing` its shape's name; for an adapter still to be trained on it, saved under runs/ only).

Splits: train, validation and test say everything with the `phrasings` training tables (FORMS, QUESTIONS);
paraphrase is a held-out test split in words the generator never trains on: new verbs, the passive
voice, several facts in one statement (different relations or organisations; the gold write is every triple in
sentence order), and questions of every type in new words, some with a typo outside the names. Its gold `api`,
`reply`, `answer`, `query`, `triples` and `memory` are made as the test split's are, so it is scored the same way.

A row (one `datasets.Dataset` row per example)::

    user      the user's message (a statement for writes, a question for reads)
    api       what the model generates: write calls, or a read query ending in ':'
    reply     what the memory appends to a read (`{..};{..}]`, or `]`); '' for writes
    answer    the answer sentence for reads ("I don't know." when nothing matched); '' for writes
    id, kind ("read"/"write"), query_type (QUERY_TYPES or "write"),
    relation  a RELATIONS key: the relation asked about, written (a multi-fact statement's first clause's), or
              (for per/org reads) of the target fact
    phrasing  how the user's message is said (PHRASINGS): "template" in train/validation/test; in paraphrase,
              writes "new_verb", "passive" or "multi_fact", reads "new_question" or "typo"
    query     [subject, relation, object] with '' for unknown terms; [] for writes
    triples   reads: the memory's results; writes: the gold triples written
    memory    the memory before the example, in insertion order (the scene; for a write, without the
              triples it writes); a read's `triples` are its exact matches in that order
    scene     the scene's number within its split (one scene per example)
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any, Sequence

from ..paths import DATA, atomic_dir, check_profile, run_dir
from .answers import NO_ANSWER, answer_sentence, fact_sentence, join_names, lookup, stated_facts
from .config import DATA_FIELDS, WIDE_FIELDS, RetLLMConfig
from .generator import QUERY_TYPES, example, load_names, name_pools, shapes, slots
from .phrasings import RELATIONS

__all__ = [
    "RELATIONS",
    "QUERY_TYPES",
    "SPLITS",
    "PHRASINGS",
    "NO_ANSWER",
    "features",
    "load_names",
    "company_names",
    "relation_vocabulary",
    "join_names",
    "lookup",
    "answer_sentence",
    "fact_sentence",
    "stated_facts",
    "make_dataset",
    "save_dataset",
    "dataset_dir",
    "dataset_meta",
    "load_synthetic",
]

SPLITS = ("train", "validation", "test", "paraphrase")
# The `phrasing` column's values: the training tables' words, then the paraphrase split's shapes (writes, reads).
PHRASINGS = ("template", "new_verb", "passive", "multi_fact", "new_question", "typo")
_name_pools = name_pools  # the name `fuzzy.stress` imports


# Column order of every split; the training notebook and the controller read these names.
_COLUMNS = (
    "id",
    "kind",
    "query_type",
    "relation",
    "phrasing",
    "user",
    "api",
    "reply",
    "answer",
    "query",
    "triples",
    "memory",
    "scene",
)


def company_names() -> list[str]:
    """The data set's organisations (data/companies.txt): names a call may copy when the user misspells them."""
    return sorted(load_names(DATA / "companies.txt"))


def relation_vocabulary(redocred: bool = False) -> list[str]:
    """The relation names a write may store besides the user's own words (`RetLLMController(relation_names=...)`):
    the five relations'. `redocred` adds all of Re-DocRED's (rel_info.json); the model then stores "lives in" as
    "located in the administrative territorial entity" (experiments/README.md), so the build leaves them out."""
    if not redocred:
        return list(RELATIONS.values())
    from ..memllm.docred import relation_names
    from .docred_mix import REL_INFO

    return list(RELATIONS.values()) + sorted(set(relation_names(REL_INFO).values()) - set(RELATIONS.values()))


def features():
    """The column types (explicit, so empty lists and empty splits keep their types)."""
    from datasets import Features, List, Value

    triples = List(List(Value("string")))
    types = {"query": List(Value("string")), "triples": triples, "memory": triples, "scene": Value("int64")}
    return Features({c: types.get(c, Value("string")) for c in _COLUMNS})


def make_dataset(
    config: RetLLMConfig,
    *,
    first_names: Sequence[str] | None = None,
    last_names: Sequence[str] | None = None,
    companies: Sequence[str] | None = None,
):
    """The data set of `config` (seed, split sizes, write_frac, no_match_frac, scene_size) as a `datasets.DatasetDict`
    (SPLITS); the same config gives the same rows.

    `write_frac` of each split are write examples; reads are split evenly over the six query types, and
    `no_match_frac` of each type's reads find nothing (reply ']', answer NO_ANSWER). The paraphrase split
    (`n_paraphrase` rows) is built like test, in the words of the PARAPHRASE_* tables (module docstring). Name lists
    default to data/first_names.txt, data/last_names.txt, data/companies.txt.
    """
    from datasets import Dataset, DatasetDict

    c = config
    sizes = {"train": c.n_train, "validation": c.n_val, "test": c.n_test, "paraphrase": c.n_paraphrase}
    first = list(first_names) if first_names is not None else load_names(DATA / "first_names.txt")
    last = list(last_names) if last_names is not None else load_names(DATA / "last_names.txt")
    companies = sorted(companies if companies is not None else load_names(DATA / "companies.txt"))
    if len(companies) < 4:
        raise ValueError(f"need at least 4 companies (a scene uses up to 3, plus one it lacks), got {len(companies)}")
    if c.phrasings == "wide":
        from .wide import make_rows

        rows_of = make_rows(c, first, last, companies)
        return DatasetDict(
            {
                s: Dataset.from_dict({k: [r[k] for r in rows] for k in _COLUMNS}, features=features())
                for s, rows in rows_of.items()
            }
        )
    pools = name_pools(c.seed, first, last, sizes, c.scene_size)
    out = {}
    for split in SPLITS:
        rng = random.Random(f"retllm-synthetic/{c.seed}/{split}")  # str seeds hash the same on every run
        names = iter(pools[split])
        split_slots = slots(rng, sizes[split], c.write_frac, c.no_match_frac)
        phrasings = shapes(rng, split_slots) if split == "paraphrase" else ["template"] * len(split_slots)
        rows = [
            example(rng, names, split, companies, i, slot, c.scene_size, phrasing)
            for i, (slot, phrasing) in enumerate(zip(split_slots, phrasings))
        ]
        # from_dict, not from_list, so an empty split (size 0) still has every column (from_list([]) has none)
        out[split] = Dataset.from_dict({k: [r[k] for r in rows] for k in _COLUMNS}, features=features())
    return DatasetDict(out)


# ------------------------------------------------------------------------------------------ saving, loading
def save_dataset(dd, out_dir: str | Path, meta: dict[str, Any] | None = None) -> Path:
    """`save_to_disk` plus one `{split}.jsonl` per split (byte-identical for the same rows), and `build.json`.

    Written to a temporary folder first and swapped in at the end: a failure leaves the old data set whole.
    """
    import datasets

    out_dir = Path(out_dir)
    bars = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()  # a bar per split would be left in every notebook output
    try:
        with atomic_dir(out_dir, replace=True) as tmp:
            dd.save_to_disk(str(tmp))
            for split, ds in dd.items():
                with open(tmp / f"{split}.jsonl", "w", encoding="utf-8", newline="\n") as f:
                    for row in ds:
                        f.write(json.dumps(row, ensure_ascii=False) + "\n")
            if meta is not None:
                (tmp / "build.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    finally:
        if bars:
            datasets.enable_progress_bars()
    return out_dir


def dataset_dir(profile: str = "cpu", phrasings: str = "paper") -> Path:
    """Where a profile's data set lives: data/retllm_synthetic/ for cpu (committed), else under runs/; a wide build
    always under runs/ (runs/retllm/<profile>/data_wide)."""
    if phrasings == "wide":
        return run_dir("retllm", check_profile(profile), "data_wide")
    return DATA / "retllm_synthetic" if check_profile(profile) == "cpu" else run_dir("retllm", profile, "data")


def dataset_meta(config: RetLLMConfig) -> dict[str, Any]:
    """The config's build settings (`config.DATA_FIELDS`, and WIDE_FIELDS for a wide build), JSON-ready: saved as
    build.json beside the data set."""
    return config.as_dict(DATA_FIELDS + (WIDE_FIELDS if config.phrasings == "wide" else ()))


def load_synthetic(profile: str = "cpu", seed: int = 0, phrasings: str = "paper"):
    """The profile's saved DatasetDict (its config, `seed`, `phrasings`); built and saved first if missing or built
    otherwise."""
    from datasets import load_from_disk

    config = RetLLMConfig.for_profile(profile, seed=seed, phrasings=phrasings)
    path = dataset_dir(profile) if phrasings == "paper" else dataset_dir(profile, phrasings)
    meta = dataset_meta(config)
    build = path / "build.json"
    if build.is_file() and json.loads(build.read_text(encoding="utf-8")) == meta:
        return load_from_disk(str(path))
    dd = make_dataset(config)
    save_dataset(dd, path, meta)
    return dd
