"""The MemLLM data set as notebook 04 builds and saves it and notebooks 05–06 load it (MemLLM §3.3, §4.1).

The MemLLM data modules: `docred` reads Re-DocRED; `examples` builds the write and read rows (MemLLM §3.2–3.3,
App. B–D) and the dev documents scored in §4.1; `dataset` (this one) turns them into the DatasetDict
(`make_dataset`: write_train, read_train, write_dev, read_dev, docs_dev; training replies from a simulated
write-model memory unless one is given, dev read points as the official eval builder makes them), renders a row for
training (`render`), says where a profile's copy lives and rebuilds it with notebook 04's defaults when it is missing
or stale (`load_or_build`, about two minutes on 2 cores: the simulated memory is encoded by MiniLM), so notebooks 05
and 06 run even when 04 has not run on that profile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..paths import DATA, ROOT, check_profile, run_dir
from .config import MemLLMConfig
from .docred import DocView, GoldMemory, Lookup, load_docred, relation_names, simulated_memory, triple_memory_lookup
from .examples import build_write_rows
from .reads import MAX_RESULTS, build_read_rows, eval_doc_row

__all__ = ["render", "features", "make_dataset", "dataset_dir", "read_rows_current", "load_or_build", "training_rows"]


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
    """True if saved read rows are current: App. C copies (`copy`), the read word's space after the call."""
    columns = getattr(ds, "column_names", None) or (list(ds[0]) if len(ds) else ["copy"])
    if "copy" not in columns:
        return False
    for row in ds:
        if row["read_word"] > 0:
            text = row["text"]
            c0 = text.index("})", text.index(")-->")) + 2  # the continuation starts after the reply
            return text[c0 : c0 + 1] == " "
    return True


def load_or_build(profile: str, seed: int = 0) -> tuple[Any, str]:
    """The profile's DatasetDict as notebook 04 saved it, or built here from the profile's config if it is missing or
    stale.

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
    dd, _ = make_dataset(
        load_docred(red / "test_revised.json"),
        load_docred(red / "dev_revised.json"),
        relation_names(red / "rel_info.json"),
        MemLLMConfig.for_profile(profile, seed=seed),
    )
    return dd, f"built here with notebook 04's defaults ({why}; run notebook 04 to save it)"


def training_rows(dd: Any, kind: str, config: MemLLMConfig) -> Any:
    """The rows an adapter trains on: notebook 04's `{kind}_train` split ("write" or "read"), the first
    `config.train_rows` of it if that is set (notebook 05, tools/train_accelerate.py)."""
    rows = dd[f"{kind}_train"]
    return rows.select(range(min(config.train_rows, len(rows)))) if config.train_rows else rows


# ----------------------------------------------------------------------------------------------- the data set
def render(tokenizer: Any, row: Mapping[str, Any]) -> tuple[str, list[tuple[int, int]]]:
    """(text, spans) for `training.tokenize_with_spans`: a write row gets the end token inside its last span.

    The end token is `prompts.end_token(tokenizer)` (what the controller stops on); a string may stand in for the
    tokenizer in tests.
    """
    from ..prompts import end_token

    text, spans = row["text"], [tuple(s) for s in row["spans"]]
    if row["add_eos"]:
        eos = tokenizer if isinstance(tokenizer, str) else end_token(tokenizer)
        if spans[-1][1] != len(text):
            raise ValueError(f"row {row.get('id')!r}: the end token must extend a span that ends the text")
        text += eos
        spans[-1] = (spans[-1][0], len(text))
    return text, spans


def features(kind: str) -> Any:
    """Column types per split kind ("write", "read", "docs"): explicit, so empty lists keep their types."""
    from datasets import Features, List, Value

    s, i = Value("string"), Value("int64")
    base = {"id": s, "doc_idx": i, "title": s, "text": s, "spans": List(List(i)), "add_eos": Value("bool")}
    if kind == "write":
        return Features({**base, "sent_id": i, "triples": List(List(s)), "n_triples": i, "pretext_start_word": i})
    if kind == "read":
        return Features(
            {
                **base,
                "queries": List(List(s)),
                "n_results": List(i),
                "results": List(s),
                "results_source": s,
                "copy": s,
                "pretext_loss": Value("bool"),
                "targets": List(s),
                "target_span": List(i),
                "target_spans": List(List(i)),
                "target_words": List(List(i)),
                "entity_spans": List(List(i)),
                "read_word": i,
                "target_word": List(i),
                "shift": i,
                "read_char": i,
                "pretext_start_word": i,
                "eot": Value("bool"),
            }
        )
    if kind == "docs":
        return Features(
            {
                "doc_idx": i,
                "title": s,
                "text": s,
                "sent_chars": List(i),
                "entity_names": List(s),
                "mention_spans": List(List(i)),
                "triples": List(List(s)),
                "read_chars": List(i),
                "read_target_spans": List(List(i)),
                "read_target_spans_all": List(List(List(i))),
                "read_targets": List(List(s)),
                "read_queries": List(List(List(s))),
            }
        )
    raise ValueError(f"unknown kind {kind!r}: write, read or docs")


def _dataset(rows: Sequence[Mapping[str, Any]], kind: str) -> Any:
    """A Dataset with the kind's columns, in that order; an empty split keeps them too."""
    from datasets import Dataset

    feats = features(kind)
    return Dataset.from_dict({k: [r[k] for r in rows] for k in feats}, features=feats)


def make_dataset(
    train_docs: Sequence[Mapping[str, Any]],
    dev_docs: Sequence[Mapping[str, Any]],
    rel_names: Mapping[str, str],
    config: MemLLMConfig,
    *,
    embedder: Any = None,
    train_lookup: Lookup | None = None,
    results_source: str | None = None,
) -> tuple[Any, dict[str, dict]]:
    """DatasetDict write_train, read_train, write_dev, read_dev, docs_dev from the first documents of each file, as
    `config` says (a `MemLLMConfig`: documents, the paper's rules, the simulated memory, seed), and the counts per
    split (plus "memory": what the simulated memory kept, dropped and added).

    The write rows come from the first `n_train_write` training documents, the read rows from the first `n_train`
    (write examples are shorter, so the same CPU minutes cover more documents); None: every document of the file.

    Training reads take results from `train_lookup` when given (a `triple_memory_lookup` over the write model's memory:
    `results_source="memory"`); else `train_memory="simulated"` builds `docred.simulated_memory` over every document
    of the training file (MemLLM's fuzzy lookup; `memory_drop` of the gold triples left out, `memory_wrong` wrong
    ones added; `embedder` None: the bundled MiniLM), or "gold" an exact `GoldMemory` (every reply holds the target).
    Dev reads are the evaluation's reference, built as the official eval builder: gold read points (no shift), gold
    triples of the dev file, no Q_thr at build time, results cut to 30, same-query points merged, and no query dropped
    for the pretext budget (the evaluation reads whole documents).
    """
    from datasets import DatasetDict

    def first(docs: Sequence[Any], n: int | None) -> range:
        return range(len(docs) if n is None else min(n, len(docs)))

    c = config
    train_ids, write_ids, dev_ids = (
        first(train_docs, c.n_train),
        first(train_docs, c.n_train_write),
        first(dev_docs, c.n_dev),
    )
    counts, splits = {}, {}
    if train_lookup is None and c.train_memory == "simulated":
        memory, counts["memory"] = simulated_memory(
            train_docs, rel_names, drop=c.memory_drop, wrong=c.memory_wrong, seed=c.seed, embedder=embedder
        )
        views = (DocView.of(train_docs[d]) for d in train_ids)
        # the queries' names
        memory.embedder.prime(v.words_text(a, b) for v in views for a, b, _, _ in v.mentions)
        train_lookup, results_source = triple_memory_lookup(memory), results_source or "simulated"
    elif train_lookup is None:  # train_memory "gold" (the config allows no other)
        train_lookup = GoldMemory.from_docs(train_docs, rel_names)
    results_source = results_source or "gold"
    wkw = c.as_dict(("seed", "drop_empty", "max_pretext_chars", "empty_evidence", "max_triples"))
    rkw = c.as_dict(
        ("seed", "max_pretext_chars", "max_queries", "first_mention_filter", "query_names", "pretext_loss_first")
    )
    rkw["fill_empty_with_target"] = c.fill_empty_with_target
    jobs = (
        (
            "train",
            train_docs,
            (write_ids, train_ids),
            train_lookup,
            dict(early_shift=c.early_shift, q_thr=c.q_thr),
            results_source,
        ),
        (
            "dev",
            dev_docs,
            (dev_ids, dev_ids),
            GoldMemory.from_docs(dev_docs, rel_names),
            dict(early_shift=0.0, q_thr=None, max_results=MAX_RESULTS, eval_points=True, drop_cut_queries=False),
            "gold",
        ),
    )
    for name, docs, (w_ids, ids), lookup, kw, source in jobs:
        w, nw = build_write_rows(docs, rel_names, w_ids, split=name, **wkw)
        r, nr = build_read_rows(docs, rel_names, ids, lookup, split=name, results_source=source, **rkw, **kw)
        splits[f"write_{name}"] = _dataset(w, "write")
        splits[f"read_{name}"] = _dataset(r, "read")
        counts[f"write_{name}"], counts[f"read_{name}"] = dict(nw), dict(nr)
        if name == "dev":
            splits["docs_dev"] = _dataset([eval_doc_row(docs[d], rel_names, r, d) for d in ids], "docs")
    return DatasetDict(splits), counts
