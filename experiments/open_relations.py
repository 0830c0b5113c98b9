"""Relations never trained on: does mixing simple statements over other relations, said in the user's words, into
the wide training teach RET-LLM to write and read relations it never saw? (RET-LLM §1, §3: a general write-read
memory.) This experiment decided that notebook 02 trains on the mix (`RetLLMConfig.open_rows`).

Trains an adapter on the wide build's rows without their open-relation rows plus `--open-n` rows of
`retllm.open_relations` (simple statements and questions over 22 relations whose stored name is the predicate as
said: "Ann grew up in Lyon" -> (Ann, grew up in, Lyon); the people of `wide.open_people`), notebook 02's
whole-sequence recipe (cpu profile), and scores it beside `--committed` on:

- open relations held out (`open_relations.HELD_OUT`, 8 relations, never in a training row; test-pool people):
  statements (the write call exact; each statement then read back by its relation's question in the same memory)
  and questions over a scene of facts (the read call exact, the answer naming the stored object);
- open relations trained on (the same, test-pool people too);
- notebook 03's test and paraphrase splits (what the new rows cost the five people–company relations) and Re-DocRED's
  held-out relations (`new_relations`). Both adapters decode on xllamacpp with the adapter merged, as notebook 09
  chats (fast on 2 cores; it decoded 12 of 336 test examples differently from transformers fp32 with the adapter merged:
  experiments/results/chat_accuracy_xllamacpp_drafting.json), so compare the two adapters here with each other,
  not with results/03_retllm.json.

`--open-n 360` at seed 0 gave exactly notebook 02's whole-sequence adapter while it trained at 1e-3 (the same rows;
the weights byte-identical); with `--lr 2e-3` it gives notebook 02's current one (byte-identical too). `--open-n 0`
leaves the open rows out: the recipe notebook 02 trained before, whose adapter is the saved JSONs' pass "committed
(notebook 02)" (experiments/README.md, Reproduce; open_relations_ntrain2100.json's pass of that name is notebook 02's
open-row adapter at 1e-3).
`--train-seed S` trains on the same rows with another seed (LoRA initialisation, dropout and batch order).
`--seeds-table` prints experiments/README.md's table of both recipes over three training seeds (SEED_RUNS) from the
saved JSONs. `--more-relations` trains on 48 relations instead of 22 (`open_relations.MORE_RELATIONS` added; the
same number of rows, the same held-out relations); `--more-table` prints 22 against 48 over two seeds (MORE_RUNS).
`--copy-relations` decodes a write's relation as one of the five relations' or Re-DocRED's names or the user's words
(`--five-relations`: the five only, the build's vocabulary; `--copy-read-relations`: a read's relation held too;
`--read-relations-stored`: a read's relation held to a stored relation or the names, not the user's words;
`--read-relation-words`: a read's relation decoded free, then the stored one sharing its content words is read).
`--n-train N` builds the wide rows with N training rows (synthetic and Re-DocRED) instead of the cpu profile's (in
memory; the evaluation splits do not depend on it); `--free-answers` also scores the test and paraphrase splits with
answers the model writes itself (notebook 03's free-answer passes, here on the whole splits); `--scale-table` prints
notebook 02's rows against 2,100 rows with 360 and 500 open rows (SCALE_RUNS) from the saved JSONs.
`--train-questions balanced` builds the training questions with each relation's verbs balanced (`wide.VerbBalance`;
the evaluation splits unchanged); `--notebook-03` decodes as notebook 03's RET-LLM rows do; `--balance-table` prints
drawn against balanced verbs over two seeds (BALANCE_RUNS). The test and paraphrase passes save their missed
questions (`read_misses`; the balanced runs' JSONs predate it). `--train-write-frac F` sets the share of statements
among the synthetic training rows (e.g. `--n-train 1860 --train-write-frac 0.3226`: the 2,100-row build's 1,134
questions, the 1,500-row build's 540 statements); `--questions-table` prints
builds with more training questions (QUESTION_RUNS); `--facts-in-order` has an answer state the reply's facts in the
reply's order, none skipped (the model chooses where to stop); `--order-table` prints it against the model's order
(ORDER_RUNS). `--coordinated-writes` writes a name listed with a written one as the list's written names are, as
notebooks 03 and 09 do (the test and paraphrase passes also save `stored_exact_by_phrasing`, the turn's writes with the
rule's, without the flag the calls' own); `--named-writes` then writes a name the statement says and no write holds as
its likeliest call with one of `relation_names` (the five with `--notebook-03` or `--five-relations`; without
`--copy-relations` it never writes) and a written term, as notebooks 03 and 09 do (the test and paraphrase passes save
`rule_write_list`: each write either rule added, the rule, and whether it is gold); `--epochs N` trains N epochs over
the same rows; `--epochs-table` prints two epochs against one epoch of notebook 02's recipe at training seeds 0 and 1
(EPOCHS_RUNS; seed 0's one epoch is notebook 02's adapter); `--neftune ALPHA` trains with NEFTune's noise on the input
embeddings, `--neftune-table` prints it against notebook 02's recipe without (NEFTUNE_RUNS); `--lora-r R` trains LoRA of
rank R (alpha 2R, as notebook 02's 16 and 32), `--rank-table` prints rank 64 against notebook 02's 16 (RANK_RUNS);
`--lr LR` trains with that peak learning rate, cosine-decayed to 0 (default 1e-3: every lever here was measured at
notebook 02's former rate; the cpu profile trains at 2e-3 since), `--lr-table` prints 2e-3 against 1e-3 at three
training seeds (LR_RUNS).
`--multi-weight N` gives each trained multi-fact statement shape N turns in the training statements' cycle
(`RetLLMConfig.multi_weight`), `--multi-table` prints two turns against notebook 02's one (MULTI_RUNS). `--soup A B ...`
trains nothing: the adapter at `--adapter-out` is the mean of the adapters' weight updates (`make_soup`), scored as a
trained one; `--soup-table` prints the soups against their members (SOUP_RUNS); `--named-table` prints notebook 02's
adapter with and without `--named-writes` (NAMED_RUNS). `--paper-loss-mask` trains with the paper's loss mask (loss
on the calls and answers only), the recipe of notebook 02's masked adapter (`--open-n 360` at seed 0 reuses it where
`--adapter-out` holds a copy of it, and trains it again anywhere else); `--mask-table` prints it against the
whole-sequence adapter, both with notebook 03's rules (MASK_RUNS), `--mask-seeds-table` both losses at three training
seeds, each loss's three-seed soup and the soup of one adapter per loss (MASK_SEED_RUNS), `--mask-lr-table` both
losses at 2e-3, three training seeds each (MASK_LR_RUNS).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def _scores(df: Any) -> dict[str, Any]:
    """One pass per query type: call exact, answers naming the gold names (reads), write P/R, invented, stand-ins."""
    from retllm_utils.retllm.evaluation import summarize

    t = summarize(df)
    keep = [
        "n",
        "api_em",
        "answer_acc",
        "facts_acc",
        "write_precision",
        "write_recall",
        "invented_rate",
        "false_sub_rate",
    ]
    return {
        q: {k: (None if v != v else float(v)) for k, v in r.items() if k in keep}
        for q, r in t.round(6).to_dict(orient="index").items()
    }


def make_soup(members: list[Path], out: Path, base: Any = None) -> dict[str, Any]:
    """The members' mean weight update as one LoRA (peft's `add_weighted_adapter`, "cat": its rank the sum of
    theirs), so one model decodes the mean of several training seeds' updates at one model's cost; their records
    beside.
    `base`: the model the members adapt (default: the bundled SmolLM2)."""
    from peft import PeftModel

    from retllm_utils.models import load_model
    from retllm_utils.paths import ROOT

    if not (out / "adapter_model.safetensors").is_file():
        base = base if base is not None else load_model()[0]
        names = [f"seed_member_{i}" for i in range(len(members))]
        model = PeftModel.from_pretrained(base, str(members[0]), adapter_name=names[0])
        for name, member in zip(names[1:], members[1:]):
            model.load_adapter(str(member), adapter_name=name)
        model.add_weighted_adapter(names, [1 / len(names)] * len(names), "soup", combination_type="cat")
        for name in names:
            model.delete_adapter(name)
        model.save_pretrained(str(out), selected_adapters=["soup"])  # a named adapter lands in out/soup
        for f in (out / "soup").iterdir():
            f.replace(out / f.name)
        (out / "soup").rmdir()
    metas = [json.loads((m / "train_meta.json").read_text()) for m in members]
    return {
        "soup": [str(m.relative_to(ROOT)) if m.is_relative_to(ROOT) else str(m) for m in members],
        "train_seconds": sum(m["train_seconds"] for m in metas),
        "steps": sum(m["steps"] for m in metas),
        "tokens_per_epoch": metas[0].get("tokens_per_epoch"),
        "examples": metas[0].get("examples"),
        "members": [
            {k: m.get(k) for k in ("seed", "loss", "train_seconds", "steps", "tokens_per_epoch")} for m in metas
        ],
    }


def markdown(result: dict[str, Any]) -> str:
    """The comparison table experiments/README.md shows, from the saved JSON."""
    p = result["passes"]
    names = list(p)

    def cell(path: list[str]) -> str:
        vals = []
        for n in names:
            v: Any = p[n]
            for k in path:
                v = v.get(k) if isinstance(v, dict) else None
            vals.append("–" if v is None else f"{v:.3f}")
        return " | ".join(vals)

    back, sc = "per_relation_write_read_back", "scores"
    rows = [
        (
            "held-out open relations, statements: first fact written exactly",
            ["held-out relations", back, "all", "write_exact"],
        ),
        ("  every fact of the statement written exactly", ["held-out relations", back, "all", "writes_all"]),
        (
            "  names exact, relation matched by meaning",
            ["held-out relations", back, "all", "write_names_relation_fuzzy"],
        ),
        ("  read back: the answer names the object", ["held-out relations", back, "all", "answer_ok"]),
        ("held-out open relations, questions: read call exact", ["held-out relations", sc, "per_rel", "api_em"]),
        ("  the answer names the stored object", ["held-out relations", sc, "per_rel", "answer_acc"]),
        ("trained open relations: first fact written exactly", ["trained relations", back, "all", "write_exact"]),
        ("  questions: read call exact", ["trained relations", sc, "per_rel", "api_em"]),
        ("  questions: the answer names the stored object", ["trained relations", sc, "per_rel", "answer_acc"]),
        ("test split: calls exact", ["test", sc, "all", "api_em"]),
        ("  answers (facts)", ["test", sc, "all", "facts_acc"]),
        ("  statements written exactly", ["test", sc, "write", "api_em"]),
        ("paraphrase split: calls exact", ["paraphrase", sc, "all", "api_em"]),
        ("  answers (facts)", ["paraphrase", sc, "all", "facts_acc"]),
        ("  statements written exactly", ["paraphrase", sc, "write", "api_em"]),
        (
            "Re-DocRED held-out relations: names exact",
            ["Re-DocRED held-out relations", "per_relation", "all", "names_exact"],
        ),
        (
            "  names exact, relation matched by meaning",
            ["Re-DocRED held-out relations", "per_relation", "all", "write_names_relation_fuzzy"],
        ),
        (
            "  read back: the answer names the object",
            ["Re-DocRED held-out relations", "per_relation", "all", "answer_ok"],
        ),
    ]
    out = [f"| pass (xllamacpp) | {' | '.join(names)} |", "| --- |" + " --- |" * len(names)]
    out += [f"| {label.replace('  ', '… ')} | {cell(path)} |" for label, path in rows]
    return "\n".join(out)


def _synthetic_statements(
    res: dict[str, Any], split: str, key: str = "writes_exact_by_phrasing"
) -> tuple[float, int] | None:
    """The split's statements of the five relations written exactly (`key`: by calls, or "stored_exact_by_phrasing":
    the turn's writes, rule writes included), and how many there are (Re-DocRED's left out)."""
    by = res.get(split, {}).get(key) or {}
    n = sum(v["size"] for p, v in by.items() if p != "redocred")
    return (sum(v["sum"] for p, v in by.items() if p != "redocred"), n) if n else None


SPREAD_ROWS = (
    (
        "held-out open statements: first fact exact",
        ["held-out relations", "per_relation_write_read_back", "all", "write_exact"],
    ),
    (
        "held-out open statements: read back, the answer names the object",
        ["held-out relations", "per_relation_write_read_back", "all", "answer_ok"],
    ),
    ("held-out open questions: read call exact", ["held-out relations", "scores", "per_rel", "api_em"]),
    ("held-out open questions: answer names the object", ["held-out relations", "scores", "per_rel", "answer_acc"]),
    ("test split: calls exact", ["test", "scores", "all", "api_em"]),
    ("test split: answers (facts)", ["test", "scores", "all", "facts_acc"]),
    ("paraphrase split: calls exact", ["paraphrase", "scores", "all", "api_em"]),
    ("paraphrase split: answers (facts)", ["paraphrase", "scores", "all", "facts_acc"]),
)
# the seeds table's columns: label -> (results file, pass); "wide": notebook 02's earlier whole-sequence recipe, the
# wide build without the open rows, "+360 open": the same with --open-n 360; seed: the training seed (LoRA init,
# dropout, batch order)
SEED_RUNS = {
    "wide, seed 0": ("open_relations", "committed (notebook 02)"),
    "wide, seed 1": ("wide_seed1", "wide build only"),
    "wide, seed 2": ("wide_seed2", "wide build only"),
    "+360 open, seed 0": ("open_relations", "with open relations"),
    "+360 open, seed 1": ("open_relations_seed1", "with open relations"),
    "+360 open, seed 2": ("open_relations_seed2", "with open relations"),
}


MORE_RUNS = {  # the same 360 open rows over 22 relations, or over 48 (--more-relations), two training seeds each
    "22 relations, seed 0": ("open_relations", "with open relations"),
    "22 relations, seed 1": ("open_relations_seed1", "with open relations"),
    "48 relations, seed 0": ("open_relations_48", "with open relations"),
    "48 relations, seed 1": ("open_relations_48_seed1", "with open relations"),
}


MORE_ROWS = (  # SPREAD_ROWS with the held-out statements' every fact and relation by meaning
    SPREAD_ROWS[0],
    (
        "held-out open statements: every fact exact",
        ["held-out relations", "per_relation_write_read_back", "all", "writes_all"],
    ),
    (
        "held-out open statements: names exact, relation matched by meaning",
        ["held-out relations", "per_relation_write_read_back", "all", "write_names_relation_fuzzy"],
    ),
    *SPREAD_ROWS[1:],
)


SCALE_RUNS = {  # notebook 02's rows (1,500 wide + 360 open), 2,100 wide rows, and 2,100 + 500 open; seed 0
    "1,500 + 360 open (notebook 02)": ("open_relations_ntrain2100", "committed (notebook 02)"),
    "2,100 + 360 open": ("open_relations_ntrain2100", "with open relations"),
    "2,100 + 500 open": ("open_relations_ntrain2100_open500", "with open relations"),
}


SCALE_ROWS = (  # MORE_ROWS with the test split's read calls per type, Re-DocRED's read back and the free answers
    *MORE_ROWS,
    *(
        (f"test split: read call exact, ({q})", ["test", "scores", q, "api_em"])
        for q in ("per", "per_org", "per_rel", "org", "rel", "org_rel")
    ),
    ("Re-DocRED held-out relations: read back", ["Re-DocRED held-out relations", "per_relation", "all", "answer_ok"]),
    ("test split, free answers: answers (facts)", ["test, free answer", "scores", "all", "facts_acc"]),
    ("test split, free answers: invented", ["test, free answer", "scores", "all", "invented_rate"]),
    ("paraphrase split, free answers: answers (facts)", ["paraphrase, free answer", "scores", "all", "facts_acc"]),
    ("paraphrase split, free answers: invented", ["paraphrase, free answer", "scores", "all", "invented_rate"]),
)


# training questions' verbs drawn with their templates (notebook 02's build) or balanced per (type, relation)
# (--train-questions balanced), two training seeds each; every pass decoded as notebook 03 (--notebook-03)
BALANCE_RUNS = {
    "drawn, seed 0 (notebook 02)": ("open_relations_balanced", "committed (notebook 02)"),
    "drawn, seed 1": ("open_relations_drawn_seed1", "with open relations"),
    "balanced, seed 0": ("open_relations_balanced", "with open relations"),
    "balanced, seed 1": ("open_relations_balanced_seed1", "with open relations"),
}


BALANCE_ROWS = (  # MORE_ROWS with the test split's read calls and answers of the relation-dependent types and
    # (org), and Re-DocRED's held-out relations read back
    *MORE_ROWS,
    *(
        (f"test split: {what}, ({q})", ["test", "scores", q, key])
        for q in ("per_rel", "rel", "org_rel", "org")
        for what, key in (("read call exact", "api_em"), ("answers (facts)", "facts_acc"))
    ),
    ("Re-DocRED held-out relations: read back", ["Re-DocRED held-out relations", "per_relation", "all", "answer_ok"]),
)


def spread_markdown(
    runs: dict[str, tuple[dict[str, Any], str]],
    means: dict[str, list[str]] | None = None,
    rows=SPREAD_ROWS,
    stored: bool = True,
) -> str:
    """A table with one column per run (label -> (result, pass name)) and, per `means` entry, the mean over its
    columns; statements as "k/n" (a mean: k averaged); `stored=False` leaves out the rows with rule writes."""
    cols, means = list(runs), means or {}
    values: list[tuple[str, list[Any]]] = []
    for label, path in rows:
        row = []
        for res, name in runs.values():
            v: Any = res["passes"][name]
            for k in path:
                v = v.get(k) if isinstance(v, dict) else None
            row.append((v["sum"], v["size"]) if isinstance(v, dict) and set(v) == {"sum", "size"} else v)
        values.append((label, row))
    for split in ("test", "paraphrase"):
        row = [_synthetic_statements(res["passes"][name], split) for res, name in runs.values()]
        values.append((f"{split} split: statements of the five relations exact", row))
        stored_row = [
            _synthetic_statements(res["passes"][name], split, "stored_exact_by_phrasing") for res, name in runs.values()
        ]
        if stored and any(stored_row):  # runs since the coordinated-writes rule save the turn's writes too
            values.append((f"{split} split: the same, the turn's writes (rule writes included) exact", stored_row))

    def fmt(v: Any, count: int | None = None) -> str:
        if v is None:
            return "–"
        if isinstance(v, tuple):
            return f"{v[0]:.{0 if count is None else 1}f}/{v[1]}"
        return f"{v:.3f}"

    head = cols + [f"mean, {m}" for m in means]
    out = [f"| pass (xllamacpp) | {' | '.join(head)} |", "| --- |" + " --- |" * len(head)]
    for label, row in values:
        cells = [fmt(v) for v in row]
        for members in means.values():
            got = [row[cols.index(c)] for c in members if row[cols.index(c)] is not None]
            if not got:
                cells.append("–")
            elif isinstance(got[0], tuple):
                cells.append(fmt((sum(k for k, _ in got) / len(got), got[0][1]), count=1))
            else:
                cells.append(fmt(sum(got) / len(got)))
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def _saved(spec: dict[str, tuple[str, str]]) -> dict[str, tuple[dict[str, Any], str]]:
    """A table's columns from their committed JSONs: label -> (result, pass name)."""
    return {label: (json.loads((RESULTS / f"{file}.json").read_text()), name) for label, (file, name) in spec.items()}


def seeds_table() -> str:
    """experiments/README.md's seeds table, from the committed JSONs (SEED_RUNS)."""
    runs = _saved(SEED_RUNS)
    groups = {g: [c for c in runs if c.startswith(g)] for g in ("wide", "+360 open")}
    return spread_markdown(runs, groups)


def more_table() -> str:
    """experiments/README.md's table of 22 against 48 trained-on relations, from the committed JSONs (MORE_RUNS)."""
    runs = _saved(MORE_RUNS)
    groups = {g: [c for c in runs if c.startswith(g)] for g in ("22 relations", "48 relations")}
    return spread_markdown(runs, groups, MORE_ROWS)


def scale_table() -> str:
    """experiments/README.md's table of more synthetic (and open) training rows, from the committed JSONs."""
    runs = _saved(SCALE_RUNS)
    return spread_markdown(runs, rows=SCALE_ROWS)


def balance_table() -> str:
    """experiments/README.md's table of drawn against balanced training-question verbs, from the committed JSONs."""
    runs = _saved(BALANCE_RUNS)
    groups = {g: [c for c in runs if c.startswith(g)] for g in ("drawn", "balanced")}
    return spread_markdown(runs, groups, BALANCE_ROWS)


# more training questions: the 2,100-row build (its 1,134 synthetic questions and 756 synthetic statements) and a build
# with its question count and the 1,500-row build's 540 synthetic statements (--n-train 1860 --train-write-frac 0.3226)
QUESTION_RUNS = {
    "1,500 rows, seed 0 (notebook 02)": ("open_relations_balanced", "committed (notebook 02)"),
    "1,500 rows, seed 1": ("open_relations_drawn_seed1", "with open relations"),
    "2,100 rows, seed 1": ("open_relations_ntrain2100_seed1", "with open relations"),
    "more questions, seed 0": ("open_relations_questions1134", "with open relations"),
}


# an answer's facts in the reply's order, none skipped (--facts-in-order), against the model's choice of order: three
# adapters, the answers' rows (the read calls are the same in both; the read-back passes do not use the option), and
# the more-questions build's second training seed, scored in order only
ORDER_RUNS = {
    "1,500 rows (notebook 02)": ("open_relations_balanced", "committed (notebook 02)"),
    "1,500 rows, in order": ("open_relations_facts_in_order", "committed (notebook 02)"),
    "2,100 rows, seed 1": ("open_relations_ntrain2100_seed1", "with open relations"),
    "2,100 rows, seed 1, in order": ("open_relations_facts_in_order", "with open relations"),
    "more questions": ("open_relations_questions1134", "with open relations"),
    "more questions, in order": ("open_relations_questions1134_in_order", "with open relations"),
    "more questions, seed 1, in order": ("open_relations_questions1134_seed1_in_order", "with open relations"),
}
ORDER_ROWS = (
    ("held-out open questions: answer names the object", ["held-out relations", "scores", "per_rel", "answer_acc"]),
    ("test split: answers (facts)", ["test", "scores", "all", "facts_acc"]),
    *(
        (f"test split: answers (facts), ({q})", ["test", "scores", q, "facts_acc"])
        for q in ("per", "per_org", "per_rel", "org", "rel", "org_rel")
    ),
    ("paraphrase split: answers (facts)", ["paraphrase", "scores", "all", "facts_acc"]),
)


# three training seeds of the more-questions build with the facts in order, and two read rules (--either-role: a
# one-name read in the wrong role asked in the other; --read-names-from-user: a read's names the user's words) for
# notebook 02's adapter and the third seed; the read-back passes do not use the rules
ROLE_RUNS = {
    "1,500 rows (notebook 02), in order": ("open_relations_facts_in_order", "committed (notebook 02)"),
    "1,500 rows, in order, two read rules": ("open_relations_either_role", "committed (notebook 02)"),
    "more questions, in order": ("open_relations_questions1134_in_order", "with open relations"),
    "more questions, seed 1, in order": ("open_relations_questions1134_seed1_in_order", "with open relations"),
    "more questions, seed 2, in order": ("open_relations_questions1134_seed2_in_order", "with open relations"),
    "more questions, seed 2, in order, two read rules": ("open_relations_either_role", "with open relations"),
}
ROLE_ROWS = (
    *ORDER_ROWS,
    *(
        (f"{split} split: read call exact, ({q})", [split, "scores", q, "api_em"])
        for split in ("test", "paraphrase")
        for q in ("per_rel", "rel")
    ),
    *(
        (f"paraphrase split: answers (facts), ({q})", ["paraphrase", "scores", q, "facts_acc"])
        for q in ("per", "per_org", "per_rel", "org", "rel", "org_rel")
    ),
    *MORE_ROWS[:5],
    BALANCE_ROWS[-1],
)


# two epochs over notebook 02's rows (--epochs 2) against its one, both decoded as notebook 03 decodes (with
# --either-role, --read-names-from-user and --coordinated-writes), each seed's pair scored in one run (seed 1's
# one-epoch adapter trained by --train-seed 1 --train-only and passed as --committed)
EPOCHS_RUNS = {
    "1 epoch, seed 0 (notebook 02)": ("open_relations_epochs2", "committed (notebook 02)"),
    "1 epoch, seed 1": ("open_relations_epochs2_seed1", "committed (notebook 02)"),
    "2 epochs, seed 0": ("open_relations_epochs2", "with open relations"),
    "2 epochs, seed 1": ("open_relations_epochs2_seed1", "with open relations"),
}
EPOCHS_MEANS = {"1 epoch": list(EPOCHS_RUNS)[:2], "2 epochs": list(EPOCHS_RUNS)[2:]}


EPOCHS_ROWS = (  # SCALE_ROWS with the test answers and the paraphrase split's read calls and answers per type
    *SCALE_ROWS,
    *(
        (f"{split} split: {what}, ({q})", [split, "scores", q, key])
        for split, whats in (
            ("test", (("answers (facts)", "facts_acc"),)),
            ("paraphrase", (("read call exact", "api_em"), ("answers (facts)", "facts_acc"))),
        )
        for what, key in whats
        for q in ("per", "per_org", "per_rel", "org", "rel", "org_rel")
    ),
)


# NEFTune (--neftune 5: noise on the input embeddings while training) against notebook 02's recipe without it, one
# epoch each, decoded as notebook 03 decodes; seed 0 with the model's fact order and with the facts in order
# (--facts-in-order), seed 1 in order only (its one-epoch adapter trained by --train-seed 1 --train-only)
NEFTUNE_RUNS = {
    "seed 0 (notebook 02)": ("open_relations_epochs2", "committed (notebook 02)"),
    "NEFTune, seed 0": ("open_relations_neftune5", "with open relations"),
    "seed 0 (notebook 02), in order": ("open_relations_neftune5_in_order", "committed (notebook 02)"),
    "NEFTune, seed 0, in order": ("open_relations_neftune5_in_order", "with open relations"),
    "seed 1, in order": ("open_relations_neftune5_seed1_in_order", "committed (notebook 02)"),
    "NEFTune, seed 1, in order": ("open_relations_neftune5_seed1_in_order", "with open relations"),
}
NEFTUNE_MEANS = {
    "without, in order": ["seed 0 (notebook 02), in order", "seed 1, in order"],
    "NEFTune, in order": ["NEFTune, seed 0, in order", "NEFTune, seed 1, in order"],
}


# LoRA of rank 64 (--lora-r 64, alpha 128) against notebook 02's rank 16 (alpha 32), one epoch each, decoded as notebook
# 03 decodes with the facts in order, at training seeds 0, 1 and 2; rank 16's passes at seeds 0 and 1 are the NEFTune
# runs' adapters without NEFTune (notebook 02's and the seed-1 one-epoch adapter), scored in the same code; at seed 2
# its one-epoch adapter (--train-seed 2 --train-only) is scored beside rank 64 as --committed
RANK_RUNS = {
    "rank 16 (notebook 02), seed 0": ("open_relations_neftune5_in_order", "committed (notebook 02)"),
    "rank 64, seed 0": ("open_relations_rank64_in_order", "with open relations"),
    "rank 16, seed 1": ("open_relations_neftune5_seed1_in_order", "committed (notebook 02)"),
    "rank 64, seed 1": ("open_relations_rank64_seed1_in_order", "with open relations"),
    "rank 16, seed 2": ("open_relations_rank64_seed2_in_order", "committed (notebook 02)"),
    "rank 64, seed 2": ("open_relations_rank64_seed2_in_order", "with open relations"),
}
RANK_MEANS = {
    "rank 16": ["rank 16 (notebook 02), seed 0", "rank 16, seed 1", "rank 16, seed 2"],
    "rank 64": ["rank 64, seed 0", "rank 64, seed 1", "rank 64, seed 2"],
}
RANK_ROWS = tuple(row for row in EPOCHS_ROWS if "free answers" not in row[0])  # these runs score no free answers


# the multi-fact statement shapes given two turns each in the training statements' cycle (--multi-weight 2) against
# notebook 02's one, one epoch each, decoded with notebook 03's controller rules on xllamacpp; the one-turn passes at
# seeds 0 and 1 are the two-epoch runs' one-epoch passes (notebook 02's adapter and the seed-1 one-epoch adapter),
# scored with the same flags before the organisations' spelling check changed twice and its threshold from 0.77 to
# 0.78 (notebook 03's passes scored the same after each change)
MULTI_RUNS = {
    "one turn (notebook 02), seed 0": ("open_relations_epochs2", "committed (notebook 02)"),
    "one turn, seed 1": ("open_relations_epochs2_seed1", "committed (notebook 02)"),
    "two turns, seed 0": ("open_relations_multi2", "with open relations"),
    "two turns, seed 1": ("open_relations_multi2_seed1", "with open relations"),
}
MULTI_MEANS = {"one turn": list(MULTI_RUNS)[:2], "two turns": list(MULTI_RUNS)[2:]}
MULTI_ROWS = (
    *EPOCHS_ROWS,
    *(
        (f"{split} split: {shape} statements, the turn's writes exact", [split, "stored_exact_by_phrasing", shape])
        for split, shape in (
            ("test", "coordinated"),
            ("test", "gapping"),
            ("test", "relative_two"),
            ("paraphrase", "respectively"),
        )
    ),
)


def multi_table() -> str:
    """experiments/README.md's table of two turns per multi-fact shape against notebook 02's one over two seeds."""
    return spread_markdown(_saved(MULTI_RUNS), MULTI_MEANS, MULTI_ROWS)


# training seeds' weight updates averaged into one adapter (--soup) against each seed alone: two seeds of notebook 02's
# recipe and of two turns per multi-fact shape, and three of notebook 02's recipe, decoded with notebook 03's controller
# rules on xllamacpp; every pass scored with the memory's current spelling check (the two-turn seeds' passes after its
# last change, the others since)
SOUP_RUNS = {
    "one turn (notebook 02), seed 0": ("open_relations_soup", "committed (notebook 02)"),
    "one turn, seed 1": ("open_relations_soup_seed1", "with open relations"),
    "one turn, soup of seeds 0 and 1": ("open_relations_soup", "with open relations"),
    "two turns, seed 0": ("open_relations_multi2", "with open relations"),
    "two turns, seed 1": ("open_relations_multi2_seed1", "with open relations"),
    "two turns, soup of seeds 0 and 1": ("open_relations_multi2_soup", "with open relations"),
    "one turn, seed 2": ("open_relations_soup_seed2", "with open relations"),
    "one turn, soup of seeds 0, 1 and 2": ("open_relations_soup3", "with open relations"),
}
SOUP_MEANS = {
    "one turn, seeds 0 and 1": list(SOUP_RUNS)[:2],
    "two turns, seeds 0 and 1": list(SOUP_RUNS)[3:5],
    "one turn, seeds 0, 1 and 2": [*list(SOUP_RUNS)[:2], "one turn, seed 2"],
}


def soup_table() -> str:
    """experiments/README.md's table of seeds' updates averaged against each seed alone (SOUP_RUNS)."""
    return spread_markdown(_saved(SOUP_RUNS), SOUP_MEANS, MULTI_ROWS)


# notebook 02's adapter decoded with notebook 03's controller rules on xllamacpp, without and with the named-writes rule
# (a name the statement says that no write holds written as its likeliest call; --named-writes), then with the rule
# as it is now (a sentence's first word kept in a name unless it begins sentences, not names; a slip of a written term
# counted as written only when the statement never says the term)
NAMED_RUNS = {
    "notebook 03's rules": ("open_relations_soup", "committed (notebook 02)"),
    "with named writes": ("open_relations_named", "with open relations"),
    "with named writes, the sentence-start and slip rules": ("open_relations_named_first_word", "with open relations"),
}
NAMED_ROWS = (  # the read rows unchanged by a write rule once, not per query type
    *MORE_ROWS,
    *(row for row in SCALE_ROWS if row[0].startswith(("Re-DocRED", "test split, free", "paraphrase split, free"))),
    *MULTI_ROWS[len(EPOCHS_ROWS) :],
    *(
        (f"{label}: the turn's writes, {what}", [split, "scores", "write", f"write_{what}"])
        for label, split in (
            ("test split (110 statements)", "test"),
            ("paraphrase split", "paraphrase"),
            ("held-out open statements", "held-out relations"),
        )
        for what in ("precision", "recall")
    ),
)


def named_table() -> str:
    """experiments/README.md's table of notebook 02's adapter with and without the named-writes rule."""
    return spread_markdown(_saved(NAMED_RUNS), None, NAMED_ROWS)


# notebook 02's two adapters, both with notebook 03's rules and named writes on xllamacpp: the whole-sequence loss
# (notebook 02's default) against the paper's loss mask (the calls and answers only; --paper-loss-mask)
MASK_RUNS = {
    "whole sequence (notebook 02's default)": ("open_relations_named", "with open relations"),
    "the paper's loss mask": ("open_relations_masked", "with open relations"),
}


def mask_table() -> str:
    """experiments/README.md's table of notebook 02's masked adapter against its whole-sequence one."""
    return spread_markdown(_saved(MASK_RUNS), None, NAMED_ROWS)


# three training seeds of each loss (--train-seed), decoded with notebook 03's rules on xllamacpp, each loss's soup of
# its three seeds, and the mean of notebook 02's two adapters' weight updates (--soup, one per loss): the
# whole-sequence runs are the soup section's (without named writes), the others ran with named writes, so the table
# holds only rows that a write rule cannot change (the model's own calls, first facts, reads and answers)
MASK_SEED_RUNS = {
    "whole sequence, seed 0 (notebook 02)": ("open_relations_soup", "committed (notebook 02)"),
    "whole sequence, seed 1": ("open_relations_soup_seed1", "with open relations"),
    "whole sequence, seed 2": ("open_relations_soup_seed2", "with open relations"),
    "loss mask, seed 0 (notebook 02)": ("open_relations_masked", "with open relations"),
    "loss mask, seed 1": ("open_relations_masked_seed1", "with open relations"),
    "loss mask, seed 2": ("open_relations_masked_seed2", "with open relations"),
    "whole sequence, soup of seeds 0, 1 and 2": ("open_relations_soup3", "with open relations"),
    "loss mask, soup of seeds 0, 1 and 2": ("open_relations_masked_soup3", "with open relations"),
    "soup of the two seed-0 adapters": ("open_relations_soup_losses", "with open relations"),
}
MASK_SEED_MEANS = {"whole sequence": list(MASK_SEED_RUNS)[:3], "loss mask": list(MASK_SEED_RUNS)[3:6]}
MASK_SEED_ROWS = (  # EPOCHS_ROWS with the model's own writes per statement shape (calls, no rule writes)
    *EPOCHS_ROWS,
    *(
        (f"{split} split: {shape} statements exact by calls", [split, "writes_exact_by_phrasing", shape])
        for split, shapes in (
            ("test", ("verb", "passive", "org_active", "gapping", "coordinated", "relative_two")),
            ("paraphrase", ("cleft", "get_passive", "inversion", "new_verb", "respectively")),
        )
        for shape in shapes
    ),
)


def mask_seeds_table() -> str:
    """experiments/README.md's table of the paper's loss mask against the whole-sequence loss over three seeds, each
    loss's three-seed soup, and the two losses' soup."""
    return spread_markdown(_saved(MASK_SEED_RUNS), MASK_SEED_MEANS, MASK_SEED_ROWS, stored=False)


# a peak learning rate twice notebook 02's (--lr 2e-3, the same cosine decay to 0 over the same 233 steps) at training
# seeds 0, 1 and 2, against notebook 02's recipe at the same seeds (the soup section's runs, without named writes; the
# new runs ran with them), each decoded with notebook 03's rules on xllamacpp: only rows a write rule cannot change
LR_RUNS = {
    "lr 1e-3, seed 0 (notebook 02)": ("open_relations_soup", "committed (notebook 02)"),
    "lr 1e-3, seed 1": ("open_relations_soup_seed1", "with open relations"),
    "lr 1e-3, seed 2": ("open_relations_soup_seed2", "with open relations"),
    "lr 2e-3, seed 0": ("open_relations_lr2e-3", "with open relations"),
    "lr 2e-3, seed 1": ("open_relations_lr2e-3_seed1", "with open relations"),
    "lr 2e-3, seed 2": ("open_relations_lr2e-3_seed2", "with open relations"),
}
LR_MEANS = {"lr 1e-3": list(LR_RUNS)[:3], "lr 2e-3": list(LR_RUNS)[3:]}


def lr_table() -> str:
    """experiments/README.md's table of a learning rate of 2e-3 against notebook 02's 1e-3 at three seeds."""
    return spread_markdown(_saved(LR_RUNS), LR_MEANS, MASK_SEED_ROWS, stored=False)


# notebook 02's two losses at its current peak learning rate (2e-3), three training seeds each, both with notebook 03's
# rules and named writes on xllamacpp (the whole-sequence runs are the section above's; loss mask seed 0 is notebook
# 02's masked adapter, reused): every run here wrote with the rules, so the turn's writes are rows too
MASK_LR_RUNS = {
    "whole sequence, seed 0 (notebook 02)": ("open_relations_lr2e-3", "with open relations"),
    "whole sequence, seed 1": ("open_relations_lr2e-3_seed1", "with open relations"),
    "whole sequence, seed 2": ("open_relations_lr2e-3_seed2", "with open relations"),
    "loss mask, seed 0 (notebook 02)": ("open_relations_masked_lr2e-3", "with open relations"),
    "loss mask, seed 1": ("open_relations_masked_lr2e-3_seed1", "with open relations"),
    "loss mask, seed 2": ("open_relations_masked_lr2e-3_seed2", "with open relations"),
}
MASK_LR_MEANS = {"whole sequence": list(MASK_LR_RUNS)[:3], "loss mask": list(MASK_LR_RUNS)[3:]}


def mask_lr_table() -> str:
    """experiments/README.md's table of the paper's loss mask against the whole-sequence loss at 2e-3, three seeds."""
    return spread_markdown(_saved(MASK_LR_RUNS), MASK_LR_MEANS, MASK_SEED_ROWS)


def rank_table() -> str:
    """experiments/README.md's table of LoRA rank 64 against notebook 02's 16 over three seeds, from the JSONs."""
    return spread_markdown(_saved(RANK_RUNS), RANK_MEANS, RANK_ROWS)


def neftune_table() -> str:
    """experiments/README.md's table of NEFTune against notebook 02's recipe over two seeds, from the JSONs."""
    return spread_markdown(_saved(NEFTUNE_RUNS), NEFTUNE_MEANS, EPOCHS_ROWS)


def epochs_table() -> str:
    """experiments/README.md's table of two training epochs against notebook 02's one over two seeds, from the JSONs."""
    return spread_markdown(_saved(EPOCHS_RUNS), EPOCHS_MEANS, EPOCHS_ROWS)


def order_table() -> str:
    """experiments/README.md's table of answers with the facts in the reply's order against in the model's."""
    runs = _saved(ORDER_RUNS)
    return spread_markdown(runs, None, ORDER_ROWS)


def role_table() -> str:
    """experiments/README.md's table of the more-questions build's three seeds in order, and the two read rules."""
    runs = _saved(ROLE_RUNS)
    seeds = [c for c in runs if c.startswith("more questions") and c.endswith("in order")]
    return spread_markdown(runs, {"more questions, in order": seeds}, ROLE_ROWS)


def questions_table() -> str:
    """experiments/README.md's table of notebook 02's build against builds with more training questions."""
    runs = _saved(QUESTION_RUNS)
    return spread_markdown(runs, {"1,500 rows": [c for c in runs if c.startswith("1,500")]}, BALANCE_ROWS)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--open-n", type=int, default=360, help="open-relation training rows (half statements)")
    ap.add_argument("--eval-n", type=int, default=96, help="held-out evaluation rows (half statements)")
    ap.add_argument("--seed", type=int, default=0, help="the data's seed: wide build, open rows, evaluation rows")
    ap.add_argument(
        "--train-seed", type=int, default=None, help="LoRA initialisation, dropout and batch order (default: --seed)"
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--adapter-out", default="runs/retllm/cpu/open_relations/adapter_nomask")
    ap.add_argument("--skip-splits", action="store_true", help="leave out the test, paraphrase and Re-DocRED passes")
    ap.add_argument("--skip-committed", action="store_true", help="score only the new adapter")
    ap.add_argument("--train-only", action="store_true", help="train the adapter (or find it trained) and stop")
    ap.add_argument(
        "--committed",
        default="runs/retllm/cpu/adapter_nomask",
        help="the adapter scored beside the new one, saved as the pass 'committed (notebook 02)' (default: notebook "
        "02's whole-sequence adapter; the saved JSONs' pass is the one trained before the open rows, --open-n 0, "
        "except in open_relations_ntrain2100 and open_relations_balanced)",
    )
    ap.add_argument(
        "--more-relations",
        action="store_true",
        help="train on the 22 relations and `open_relations.MORE_RELATIONS` (48): does seeing more predicates help?",
    )
    ap.add_argument(
        "--copy-relations",
        action="store_true",
        help="decode a write's relation as one of the data set's relation names (the five relations' and Re-DocRED's) "
        "or the user's own words (`RetLLMController(relation_names=...)`), the adapters unchanged",
    )
    ap.add_argument(
        "--copy-read-relations",
        action="store_true",
        help="with --copy-relations: a read's relation too (a vocabulary name, a stored relation or the user's words)",
    )
    ap.add_argument(
        "--five-relations",
        action="store_true",
        help="with --copy-relations: a write's relation is one of the five relations' names or the user's words "
        "(Re-DocRED's names left out: the build's vocabulary, `synthetic.relation_vocabulary()`)",
    )
    ap.add_argument(
        "--read-relations-stored",
        action="store_true",
        help="with --copy-relations: a read's relation is a stored one or one of the names (not the user's words)",
    )
    ap.add_argument(
        "--read-relation-words",
        action="store_true",
        help="with --copy-relations: a read's relation decoded free, then the stored one sharing its content words",
    )
    ap.add_argument(
        "--read-relation-likely",
        action="store_true",
        help="as --read-relation-words, then a read that finds nothing, its relation stored nowhere and not one of "
        "the names, is asked again with the likeliest whole call among its entity's stored relations and none "
        "(`RetLLMController(read_relations='likely')`)",
    )
    ap.add_argument(
        "--n-train",
        type=int,
        default=None,
        help="training rows of the wide build, synthetic and Re-DocRED (default: the profile's)",
    )
    ap.add_argument(
        "--free-answers", action="store_true", help="also score the test and paraphrase splits with free answers"
    )
    ap.add_argument(
        "--train-questions",
        choices=("drawn", "balanced"),
        default="drawn",
        help="how the wide build's training questions choose their verb (`RetLLMConfig.train_questions`); balanced: "
        "built in memory, the evaluation splits unchanged",
    )
    ap.add_argument(
        "--train-write-frac",
        type=float,
        default=None,
        help="share of statements among the wide build's synthetic training rows (`RetLLMConfig.train_write_frac`; "
        "default: the profile's 0.4); built in memory, the evaluation splits unchanged",
    )
    ap.add_argument(
        "--multi-weight",
        type=int,
        default=None,
        help="turns of each trained multi-fact shape in the wide build's cycle of training statement shapes "
        "(`RetLLMConfig.multi_weight`; default: the profile's 1); built in memory, the evaluation splits unchanged",
    )
    ap.add_argument(
        "--notebook-03",
        action="store_true",
        help="decode as notebook 03's RET-LLM rows do: a write's relation one of the five names or the user's words, "
        "a read's as --read-relation-likely, answer names copied, either_order (overrides the --copy flags); "
        "notebook 03's facts_in_order is --facts-in-order here",
    )
    ap.add_argument(
        "--facts-in-order",
        action="store_true",
        help="an answer states the reply's facts in the reply's order, none skipped, as training does "
        "(`RetLLMController(facts_in_order=True)`): the model chooses only where to stop",
    )
    ap.add_argument(
        "--either-role",
        action="store_true",
        help="a read of one name that finds nothing, the name stored only in the other role, asks for it in that role "
        "(`RetLLMController(either_role=True)`): the model's slot error, '(IKEA, , ?)' for '(?, , IKEA)'",
    )
    ap.add_argument(
        "--read-names-from-user",
        action="store_true",
        help="a read's names copy the user's words or a known company name, no other stored name "
        "(`RetLLMController(read_names_from_user=True)`): every data set question names its entity",
    )
    ap.add_argument(
        "--coordinated-writes",
        action="store_true",
        help="a name listed with a written one that no write of the turn holds is written as the list's written names "
        "are (`RetLLMController(coordinated_writes=True)`): notebooks 03 and 09 decode so",
    )
    ap.add_argument(
        "--named-writes",
        action="store_true",
        help="then, in a turn that wrote and read nothing, when every write has one of the relation names (the five "
        "with --notebook-03 or --five-relations; none without --copy-relations, so no write), a name of two or more "
        "capitalised words that the statement says and no write holds is written as its likeliest call with one of "
        "those names and one of the turn's written terms (`RetLLMController(named_writes=True)`): notebooks 03 and "
        "09 decode so",
    )
    ap.add_argument(
        "--paper-loss-mask",
        action="store_true",
        help="train with the paper's loss mask (API calls and answers only), as notebook 02's masked adapter (reused "
        "where --adapter-out holds a copy of it; else trained there, whatever the folder's name)",
    )
    ap.add_argument(
        "--epochs", type=int, default=None, help="training epochs over the same rows (default: the cpu profile's 1)"
    )
    ap.add_argument(
        "--neftune",
        type=float,
        default=None,
        help="NEFTune: uniform noise of this alpha on the input embeddings while training (TRL's "
        "neftune_noise_alpha; 5 as in Jain et al. 2023's Alpaca runs), a regulariser, tried here on phrasings "
        "training never showed",
    )
    ap.add_argument(
        "--lora-r",
        type=int,
        default=None,
        help="LoRA rank, its alpha twice the rank as in notebook 02's 16 and 32 (default: the cpu profile's 16)",
    )
    ap.add_argument(
        "--lr",
        type=float,
        default=1e-3,
        help="peak learning rate, cosine-decayed to 0 as in notebook 02 (default: 1e-3, the rate every lever here was "
        "measured at; the cpu profile trains at 2e-3 since)",
    )
    ap.add_argument(
        "--soup",
        nargs="+",
        default=None,
        help="no training: the adapter at --adapter-out is the mean weight update of these adapters (training seeds "
        "of one recipe), built once (`make_soup`)",
    )
    ap.add_argument("--out", default="open_relations")
    ap.add_argument("--seeds-table", action="store_true", help="print the seeds table from the saved JSONs, and stop")
    ap.add_argument("--more-table", action="store_true", help="print 22 against 48 relations from the JSONs, and stop")
    ap.add_argument("--scale-table", action="store_true", help="print the training-size table from the JSONs, and stop")
    ap.add_argument(
        "--balance-table", action="store_true", help="print drawn against balanced question verbs from the JSONs"
    )
    ap.add_argument(
        "--questions-table", action="store_true", help="print builds with more training questions from the JSONs"
    )
    ap.add_argument("--order-table", action="store_true", help="print answers with the facts in order from the JSONs")
    ap.add_argument(
        "--role-table", action="store_true", help="print three seeds in order and the two read rules from the JSONs"
    )
    ap.add_argument("--epochs-table", action="store_true", help="print two epochs against one from the JSONs")
    ap.add_argument("--neftune-table", action="store_true", help="print NEFTune against without from the JSONs")
    ap.add_argument("--rank-table", action="store_true", help="print LoRA rank 64 against 16 from the JSONs")
    ap.add_argument("--lr-table", action="store_true", help="print learning rate 2e-3 against 1e-3 from the JSONs")
    ap.add_argument("--multi-table", action="store_true", help="print two turns per multi-fact shape against one")
    ap.add_argument("--soup-table", action="store_true", help="print seeds' updates averaged against each seed alone")
    ap.add_argument(
        "--named-table", action="store_true", help="print notebook 02's adapter with and without named writes"
    )
    ap.add_argument(
        "--mask-table", action="store_true", help="print notebook 02's masked adapter against its whole-sequence one"
    )
    ap.add_argument(
        "--mask-seeds-table",
        action="store_true",
        help="print the loss mask against the whole sequence at three seeds, and their soups",
    )
    ap.add_argument(
        "--mask-lr-table",
        action="store_true",
        help="print the loss mask against the whole sequence at a learning rate of 2e-3, three seeds each",
    )
    a = ap.parse_args()
    tables = {
        "seeds_table": seeds_table,
        "more_table": more_table,
        "scale_table": scale_table,
        "balance_table": balance_table,
        "questions_table": questions_table,
        "order_table": order_table,
        "role_table": role_table,
        "epochs_table": epochs_table,
        "neftune_table": neftune_table,
        "rank_table": rank_table,
        "lr_table": lr_table,
        "multi_table": multi_table,
        "soup_table": soup_table,
        "named_table": named_table,
        "mask_table": mask_table,
        "mask_seeds_table": mask_seeds_table,
        "mask_lr_table": mask_lr_table,
    }
    for flag, table in tables.items():
        if getattr(a, flag):
            print(table())
            return

    import torch

    from benchmarks.common import machine, save_result
    from retllm_utils.chat.loading import cpp_generator
    from retllm_utils.models import load_embedder, load_model
    from retllm_utils.paths import ROOT
    from retllm_utils.prompts import retllm_example_text
    from retllm_utils.retllm import open_relations as op
    from retllm_utils.retllm.config import RetLLMConfig
    from retllm_utils.retllm.evaluation import evaluate_retllm
    from retllm_utils.retllm.new_relations import evaluate_new_relations, summarize_new_relations
    from retllm_utils.retllm.synthetic import company_names, load_synthetic, relation_vocabulary
    from retllm_utils.retllm.wide import open_people
    from retllm_utils.training import build_sft_dataset, train_or_reuse

    torch.set_num_threads(a.threads)
    train_seed = a.seed if a.train_seed is None else a.train_seed
    epochs = {} if a.epochs is None else {"epochs": a.epochs}
    rank = {} if a.lora_r is None else {"lora_r": a.lora_r, "lora_alpha": 2 * a.lora_r}  # in the recipe: retrains
    config = RetLLMConfig.for_profile(
        "cpu", seed=train_seed, phrasings="wide", lr=a.lr, **epochs, **rank
    )  # the rate is in the recipe too
    dd = load_synthetic("cpu", a.seed, "wide")
    if a.notebook_03:
        a.copy_relations, a.five_relations, a.read_relation_likely = True, True, True
    knobs = (("n_train", a.n_train), ("train_write_frac", a.train_write_frac), ("multi_weight", a.multi_weight))
    given = {k: v for k, v in knobs if v is not None}
    if given or a.train_questions != "drawn":  # other training rows; every evaluation split as built
        from retllm_utils.retllm.synthetic import make_dataset

        wider = RetLLMConfig.for_profile(
            "cpu", seed=a.seed, phrasings="wide", train_questions=a.train_questions, **given
        )
        dd, built = make_dataset(wider), dd
        for split in ("test", "paraphrase", "new_relations"):
            if dd[split].to_list() != built[split].to_list():
                raise SystemExit(f"the build changed the {split} split: this comparison would not be fair")
    people = open_people(RetLLMConfig.for_profile("cpu", seed=a.seed, phrasings="wide"))  # as the build's open rows
    open_train = op.rows(a.open_n, people["train"], held_out=False, seed=a.seed, split="train", more=a.more_relations)
    _, tok = load_model()
    # the wide build without any open-relation rows of its own (phrasing "open_..."), then this experiment's
    rows = [dict(r) for r in dd["train"] if not r["phrasing"].startswith("open_")] + open_train
    train_ds = build_sft_dataset(tok, rows, retllm_example_text, config.max_length, mask=a.paper_loss_mask)
    out_dir = ROOT / a.adapter_out
    info = {
        "experiment": "open_relations",
        "open_rows": a.open_n,
        "more_relations": a.more_relations,
        "wide_rows": dd["train"].num_rows,
        "data_seed": a.seed,
        "n_train": a.n_train,
        "train_questions": a.train_questions,
        "train_write_frac": a.train_write_frac,
        "multi_weight": a.multi_weight,
        **epochs,
        "neftune_noise_alpha": a.neftune,
    }
    # the recipe holds no NEFTune setting: an adapter saved with another one is trained again, not reused
    saved = out_dir / "train_meta.json"
    retrain = saved.is_file() and json.loads(saved.read_text()).get("neftune_noise_alpha") != a.neftune
    sft = {} if a.neftune is None else {"neftune_noise_alpha": a.neftune}
    if a.soup:
        meta = make_soup([ROOT / m for m in a.soup], out_dir)
    else:
        meta = train_or_reuse(
            out_dir,
            train_ds,
            config,
            model_id="smollm2-135m-instruct",
            tokenizer=tok,
            info=info,
            retrain=retrain,
            **sft,
        ).meta
    loss = "masked" if a.paper_loss_mask else "whole_sequence"
    if a.soup:  # its members' losses, in order ("whole_sequence+masked": one member of each)
        loss = "+".join(dict.fromkeys(m["loss"] for m in meta["members"]))
    made = f"a soup of {len(a.soup)} adapters, trained" if a.soup else "trained"
    print(f"{made} {meta['train_seconds'] / 60:.1f} min, {meta['steps']} steps, {meta.get('tokens_per_epoch')} tokens")
    if a.train_only:
        return

    embedder = load_embedder()
    evals = {
        "held-out relations": op.rows(a.eval_n, people["test"], held_out=True, seed=a.seed, split="open_test"),
        "trained relations": op.rows(
            a.eval_n // 2, people["test"], held_out=False, seed=a.seed, split="open_test", more=a.more_relations
        ),
    }
    new = "with open relations" if a.open_n else "wide build only"
    adapters = {"committed (notebook 02)": ROOT / a.committed, new: out_dir}
    if a.skip_committed:
        del adapters["committed (notebook 02)"]
    # a read's relation: held ("stored", or True: the names, stored or the user's words), matched by words, or free
    read_mode = (
        "stored"
        if a.read_relations_stored
        else "words"
        if a.read_relation_words
        else "likely"
        if a.read_relation_likely
        else a.copy_read_relations
    )
    result: dict[str, Any] = {
        "experiment": "open_relations",
        "decoding": "xllamacpp, adapter merged (Q8_0), names copied, answers state reply facts, lsh index",
        "open_rows": a.open_n,
        "more_relations": a.more_relations,
        "copy_relations": a.copy_relations,
        "copy_read_relations": read_mode,
        "five_relations": a.five_relations,
        "n_train": a.n_train,
        "train_questions": a.train_questions,
        "train_write_frac": a.train_write_frac,
        "multi_weight": a.multi_weight,
        "notebook_03": a.notebook_03,
        "facts_in_order": a.facts_in_order,
        "either_role": a.either_role,
        "read_names_from_user": a.read_names_from_user,
        "coordinated_writes": a.coordinated_writes,
        "named_writes": a.named_writes,
        "loss": loss,
        "epochs": config.epochs,
        "neftune_noise_alpha": a.neftune,
        "lora_r": config.lora_r,
        "lora_alpha": config.lora_alpha,
        "lr": config.lr,
        "data_seed": a.seed,
        "train_seed": train_seed,
        "held_out": list(op.HELD_OUT),
        "train": {
            k: meta.get(k) for k in ("train_seconds", "steps", "tokens_per_epoch", "examples", "soup", "members")
        },
        "passes": {},
    }
    save = lambda: save_result(a.out, {**result, "machine": machine()}, RESULTS)  # noqa: E731
    common: dict[str, Any] = dict(index="lsh", copy_names=True, known_names=company_names())
    if a.notebook_03:
        common["answer_names"] = True
    # evaluate_retllm's alone
    order = {
        "either_order": a.notebook_03,
        "facts_in_order": a.facts_in_order,
        "either_role": a.either_role,
        "read_names_from_user": a.read_names_from_user,
        "coordinated_writes": a.coordinated_writes,
        "named_writes": a.named_writes,
    }
    if a.copy_relations:  # the five relations' names and (without --five-relations) all of Re-DocRED's
        common["relation_names"] = relation_vocabulary(redocred=not a.five_relations)
        common["read_relations"] = read_mode
        result["relation_names"] = len(common["relation_names"])
    for label, adapter in adapters.items():
        gen = cpp_generator("xllamacpp", adapter, tok, None, a.threads, 128)
        res = result["passes"].setdefault(label, {})
        for name, ev in evals.items():
            t0, said = time.perf_counter(), {r["id"]: r["user"] for r in ev}
            df = evaluate_retllm(None, tok, ev, embedder, state_facts=True, generator=gen, desc=name, **common, **order)
            stmts = [r for r in ev if r["kind"] == "write"]
            back = evaluate_new_relations(
                None,
                tok,
                stmts,
                embedder,
                generator=gen,
                question_of=op.question,
                prefill=True,
                desc=f"{name}, read back",
                **common,
            )
            res[name] = {
                "seconds": time.perf_counter() - t0,
                "scores": _scores(df),
                "per_relation_write_read_back": summarize_new_relations(back).round(6).to_dict(orient="index"),
                "examples": [
                    {"user": r.user, "gold": r.gold, "written": r.written, "question": r.question, "answer": r.answer}
                    for r in back.head(8).itertuples()
                ],
                "read_examples": [
                    {"user": said[i], "gold": g, "got": p, "answer": s}
                    for i, g, p, s in df[df["kind"] == "read"][["id", "gold_api", "pred_api", "answer"]].head(8).values
                ],
            }
            print(label, name, json.dumps(res[name]["scores"].get("all")), flush=True)
            save()
        if not a.skip_splits:
            for split in ("test", "paraphrase"):
                t0 = time.perf_counter()
                df = evaluate_retllm(
                    None, tok, list(dd[split]), embedder, state_facts=True, generator=gen, desc=split, **common, **order
                )
                writes = df[df["kind"] == "write"]
                said = {r["id"]: (r["user"], r["answer"]) for r in dd[split]}
                rows_by_id = {r["id"]: r for r in dd[split]}
                missed = df[(df["kind"] == "read") & ~df["facts_ok"].astype(bool)]
                res[split] = {
                    "seconds": time.perf_counter() - t0,
                    "scores": _scores(df),
                    "writes_exact_by_phrasing": writes.groupby("phrasing")["api_em"]
                    .agg(["sum", "size"])
                    .to_dict("index"),
                    # the turn's writes as a set equal the gold facts, rule writes included (`stored_exact`)
                    "stored_exact_by_phrasing": writes.groupby("phrasing")["stored_exact"]
                    .agg(["sum", "size"])
                    .to_dict("index"),
                    "rule_writes": int(writes["rule_writes"].map(len).sum()),
                    # each write a controller rule added: which rule, the triple, whether it is a gold fact
                    "rule_write_list": [
                        {"id": i, "phrasing": p, "rule": r, "triple": list(t), "gold": list(t) in gold["triples"]}
                        for i, p, ts, rs in writes[["id", "phrasing", "rule_writes", "rules"]].values
                        for t, r in zip(ts, rs)
                        for gold in [rows_by_id[i]]
                    ],
                    "read_misses": [  # every question whose answer misses a gold fact or states another
                        {
                            "id": i,
                            "type": q,
                            "user": said[i][0],
                            "gold_api": g,
                            "got_api": p,
                            "gold": said[i][1],
                            "answer": a,
                        }
                        for i, q, g, p, a in missed[["id", "query_type", "gold_api", "pred_api", "answer"]].values
                    ],
                }
                print(label, split, json.dumps(res[split]["scores"].get("all")), flush=True)
                save()
                if a.free_answers:  # the same split, the answer in the model's own words (call terms still copied)
                    t0 = time.perf_counter()
                    df = evaluate_retllm(
                        None,
                        tok,
                        list(dd[split]),
                        embedder,
                        state_facts=False,
                        generator=gen,
                        desc=split,
                        **common,
                        **order,
                    )
                    res[f"{split}, free answer"] = {"seconds": time.perf_counter() - t0, "scores": _scores(df)}
                    print(label, split, "free", json.dumps(res[f"{split}, free answer"]["scores"].get("all")))
                    save()
            t0 = time.perf_counter()
            nr = evaluate_new_relations(None, tok, list(dd["new_relations"]), embedder, generator=gen, **common)
            res["Re-DocRED held-out relations"] = {
                "seconds": time.perf_counter() - t0,
                "per_relation": summarize_new_relations(nr).round(6).to_dict(orient="index"),
            }
            save()
    print(
        json.dumps(
            {k: {n: v["scores"]["all"] for n, v in p.items() if "scores" in v} for k, p in result["passes"].items()},
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
