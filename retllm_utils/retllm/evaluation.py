"""RET-LLM evaluation on held-out people: API-call exact match, answer accuracy, write precision/recall.

Notebook 02 (validation ablation) and notebook 03 (held-out test split beside zero-shot, RET-LLM §4, Figures 3–5).

The paper shows RET-LLM only qualitatively; these numbers go past it. Each example runs the real path: a fresh
memory holding the example's scene, the controller (pause on `[MEM_READ{..}:`, memory reply, resume), and
the user-facing answer. The zero-shot baseline gets the same facts as plain statements in its context.

- API exact match compares *calls*, parsed and re-formatted, with the gold calls: a read's query must be the
  gold `[MEM_READ{..}:`, a write's calls the gold `[MEM_WRITE{..}]` sequence, in order.
- An answer is right (`answer_ok`) when the set of names/organisations it mentions equals the gold answer's
  (matched as whole words among the scene's entities and the question's terms); a no-match question needs an
  answer that names none of them. Stricter, `facts_ok`: the (person, relation, organisation) facts the answer
  states (`synthetic.stated_facts`) are exactly the gold results, so naming the right people under the wrong
  relation or organisation counts as wrong.
- Invented names: call terms (subjects and objects written or queried) that are neither words of the user's
  message nor, for reads, phrases stored in the memory (`copying.invented_terms`), and answer facts naming
  someone or something the memory's reply and the message never named.
- Intervals: 95% percentile bootstrap over examples, per query type (`with_intervals`).
- Notebook 03's figure, per query type with those intervals: `plot_by_query_type`, drawn from the notebook's tables
  or from the scores it saves (`plotted_scores(json.load(results/03_retllm.json))`).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from .. import api
from ..api import MemRead, MemWrite
from ..chat.copying import allowed_terms, invented_terms
from ..controller import HFGenerator, RetLLMController, neutralize
from ..memory import TripleMemory
from ..metrics import PRF, whole_word
from ..prompts import chat_prompt, end_token
from .stand_ins import false_substitutions
from .synthetic import NO_ANSWER, QUERY_TYPES, RELATIONS, answer_sentence, fact_sentence, stated_facts

__all__ = [
    "mentioned",
    "answer_correct",
    "facts_correct",
    "with_intervals",
    "false_substitutions",
    "predicted_api",
    "scene_memory",
    "evaluate_retllm",
    "evaluate_zero_shot",
    "summarize",
    "plot_by_query_type",
    "plotted_scores",
    "generate_batch",
    "zero_shot_qa_prompt",
    "ZERO_SHOT_QA",
    "ZERO_SHOT_API",
]

# The zero-shot baselines' instructions: RET-LLM §4 gives the base model an instruction, the statements and the
# question (Figure 3); the API instruction is ours, to measure whether a base model can write calls unaided.
ZERO_SHOT_QA = (  # RET-LLM Figure 3's instruction, verbatim
    "You will be presented with one or a series of sentences about some people and their relationship with a "
    "company. After that, for any given question you should be capable of answering that based on the previous "
    "sentences.\n{facts}\nQuestion: {question}\nAnswer:"
)
ZERO_SHOT_API = (
    "You control a memory through API calls. For a statement, write one call per fact, e.g. "
    "[MEM_WRITE{Ann Lee>>employed by>>Pfizer}]. For a question, write a query with '' for unknown terms and "
    "stop after the colon, e.g. [MEM_READ{>>employed by>>Pfizer}:. Relations: "
    + ", ".join(RELATIONS.values())
    + ".\n\n{user}"
)


def mentioned(text: str, vocab: Iterable[str]) -> frozenset[str]:
    """The entities of `vocab` that `text` names (whole words); a name inside a longer one is not counted."""
    hits = {v for v in vocab if v and whole_word(v, text)}
    return frozenset(h for h in hits if not any(h != o and whole_word(h, o) and whole_word(o, text) for o in hits))


def _vocab(row: Mapping[str, Any]) -> set[str]:
    terms = {x for t in row["memory"] for x in (t[0], t[2])} | {x for t in row["triples"] for x in (t[0], t[2])}
    return terms | {q for i, q in enumerate(row.get("query") or []) if q and i != 1}


def answer_correct(answer: str, row: Mapping[str, Any]) -> bool:
    """Same names/organisations as the gold answer (a no-match question needs a non-empty answer naming none)."""
    vocab = _vocab(row)
    got, want = mentioned(answer, vocab), mentioned(row["answer"], vocab)
    return got == want and (bool(want) or bool(answer.strip()))


def facts_correct(answer: str, row: Mapping[str, Any]) -> bool:
    """The answer states exactly the gold facts (a no-match question: `answer_correct`'s rule)."""
    if not row["triples"]:
        return answer_correct(answer, row)
    return stated_facts(answer) == {tuple(t) for t in row["triples"]}


def predicted_api(model_text: str) -> str:
    """The calls in a model turn, re-formatted: writes in order, or the first read's query (what the model chose)."""
    calls = api.parse_retllm(model_text)
    read = next((c for c in calls if isinstance(c, MemRead)), None)
    if read is not None:
        return api.format_retllm_read_query(read.queries[0])
    return api.format_retllm_write([t for c in calls if isinstance(c, MemWrite) for t in c.triples])


def scene_memory(row: Mapping[str, Any], embedder: Any, index: str = "flat", **kw: Any) -> TripleMemory:
    """A fresh in-memory store holding exactly the facts the example's memory holds."""
    memory = TripleMemory(embedder=embedder, index=index, **kw)
    memory.write_many(row["memory"])
    return memory


def _record(
    row: Mapping[str, Any],
    pred_api: str,
    answer: str,
    written: Sequence[Sequence[str]],
    model_text: str,
    known: Sequence[str] = (),
) -> dict:
    allowed = allowed_terms(neutralize(row["user"]), row["memory"], known=known)
    bad, n_terms = invented_terms(model_text, allowed)
    named = {x for t in row["memory"] for x in (t[0], t[2])} | allowed.write
    bad += [x for f in stated_facts(answer) for x in (f[0], f[2]) if x not in named]
    rec = {
        "id": row["id"],
        "kind": row["kind"],
        "query_type": row["query_type"],
        "relation": row["relation"],
        "phrasing": row.get("phrasing", "template"),
        "gold_api": row["api"],
        "pred_api": pred_api,
        "api_em": pred_api == row["api"],
        "answer": answer,
        "invented": bad,
        "n_terms": n_terms,
    }
    # every score in every record (None where it does not apply): a pass of only statements still has the columns
    rec.update(answer_ok=None, facts_ok=None, write_precision=None, write_recall=None, stored_exact=None)
    if row["kind"] == "read":
        rec["answer_ok"] = answer_correct(answer, row)
        rec["facts_ok"] = facts_correct(answer, row)
    else:
        prf = PRF.of_sets(map(tuple, written), map(tuple, row["triples"]))
        rec["write_precision"], rec["write_recall"] = prf.precision, prf.recall
        # the turn's writes as a set: the model's and any a controller rule added
        rec["stored_exact"] = set(map(tuple, written)) == set(map(tuple, row["triples"]))
    return rec


def evaluate_retllm(
    model: Any,
    tokenizer: Any,
    rows: Iterable[Mapping[str, Any]],
    embedder: Any,
    *,
    max_new_tokens: int = 128,
    index: str = "flat",
    desc: str = "RET-LLM",
    copy_names: bool = False,
    state_facts: bool = False,
    memory_kw: Mapping[str, Any] | None = None,
    generator: Any = None,
    known_names: Sequence[str] = (),
    relation_names: Sequence[str] | None = None,
    read_relations: bool | str = False,
    answer_names: bool = False,
    answer_pairs: bool = True,
    either_order: bool = False,
    either_role: bool = False,
    read_names_from_user: bool = False,
    facts_in_order: bool = False,
    coordinated_writes: bool = False,
    named_writes: bool = False,
    write_every_name: bool = False,
) -> pd.DataFrame:
    """Every example through the controller with its scene in memory; one record per example.

    `copy_names`: call terms copy the user's words or stored phrases (`copying`); `state_facts`: an answer states
    only the reply's facts, each once (`copying.StateFacts`); `memory_kw`: TripleMemory options (e.g. fuzzy
    thresholds); `generator`: another decoding path for the model (e.g. `llamacpp.LlamaCppGenerator`); `known_names`:
    names a call may copy when the user lower-cases or misspells them (`copying.allowed_terms`); `relation_names`:
    with `copy_names`, a write's relation is one of them or the user's words (None: free); `read_relations`: a read's
    too (`RetLLMController`); `answer_names`: with `copy_names`, a free answer's names copy the reply's or the user's,
    and it ends at a sentence it already said (`copying.CopyAnswerNames`, `controller.repeated_sentence`);
    `answer_pairs`: with it, the reply's names one sentence says go together as the reply pairs them; with
    `state_facts` an empty reply is answered "I don't know." (`NO_ANSWER`, the data set's words); `either_order`: a
    read of two names and no relation that finds nothing reads them the other way round too; `either_role`: a read of
    one name, found nothing, asks for it in the role the memory holds it in; `read_names_from_user`: with
    `copy_names`, a read's names copy the user's words or a known name, no other stored name; `facts_in_order`: with
    `state_facts`, the facts in the reply's order, none skipped, as training states them (the model says where to
    stop); `coordinated_writes`: a listed name no write holds is written as the list's written names are;
    `named_writes`: then a name of the statement no write holds is written as its likeliest call;
    `write_every_name`: with `copy_names` and `relation_names`, after a write the next call writes the statement's
    first unwritten name, the model choosing its relation and object (`coordination.EveryName`)."""
    rows = list(rows)
    gen = generator or HFGenerator(model, tokenizer, max_new_tokens=max_new_tokens)
    out = []
    for row in tqdm(rows, desc=desc, leave=False):
        memory = scene_memory(row, embedder, index, **(memory_kw or {}))
        form = fact_sentence if state_facts else None
        ctl = RetLLMController(
            gen,
            memory,
            lambda u: chat_prompt(tokenizer, u),
            copy_names=copy_names,
            known_names=known_names,
            relation_names=relation_names,
            read_relations=read_relations,
            answer_form=form,
            answer_names=answer_names,
            answer_pairs=answer_pairs,
            stop_repeated_sentences=answer_names,
            no_answer=NO_ANSWER if state_facts else None,
            either_order=either_order,
            either_role=either_role,
            read_names_from_user=read_names_from_user,
            facts_in_order=facts_in_order,
            coordinated_writes=coordinated_writes,
            named_writes=named_writes,
            write_every_name=write_every_name,
        )
        turn = ctl.chat(row["user"])
        written = [e["triple"] for e in turn.trace if e["event"] == "write"]
        subs = [s for e in turn.trace if e["event"] == "read" for s in e["substitutions"]]
        rec = _record(row, predicted_api(turn.model_text), turn.answer, written, turn.model_text, known_names)
        by_rule = [e for e in turn.trace if e["event"] == "write" and e.get("rule")]  # not the model's
        rec.update(
            substitutions=subs,
            false_substitutions=false_substitutions(subs, row),
            rule_writes=[tuple(e["triple"]) for e in by_rule],
            rules=[e["rule"] for e in by_rule],  # which rule added each
        )
        out.append(rec)
    return pd.DataFrame(out)


def generate_batch(
    model: Any,
    tokenizer: Any,
    prompts: Sequence[str],
    *,
    max_new_tokens: int = 64,
    batch_size: int = 16,
    desc: str = "generate",
) -> list[str]:
    """Greedy continuations of many prompts at once (left padding): the no-memory baseline needs no pauses."""
    import torch

    end_id = tokenizer.convert_tokens_to_ids(end_token(tokenizer))
    side, tokenizer.padding_side = tokenizer.padding_side, "left"
    out = []
    try:
        for i in tqdm(range(0, len(prompts), batch_size), desc=desc, leave=False):
            enc = tokenizer(
                list(prompts[i : i + batch_size]), return_tensors="pt", padding=True, add_special_tokens=False
            ).to(model.device)
            with torch.no_grad():
                ids = model.generate(
                    **enc,
                    max_new_tokens=max_new_tokens,
                    do_sample=False,
                    eos_token_id=end_id,
                    pad_token_id=tokenizer.pad_token_id,
                )
            out += [
                t.strip() for t in tokenizer.batch_decode(ids[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            ]
    finally:
        tokenizer.padding_side = side
    return out


def zero_shot_qa_prompt(row: Mapping[str, Any]) -> str:
    """RET-LLM Figure 3's zero-shot input: the instruction, every statement of the scene, the question."""
    return ZERO_SHOT_QA.format(facts=answer_sentence(row["memory"], grouped=True), question=row["user"])


def evaluate_zero_shot(
    model: Any, tokenizer: Any, rows: Iterable[Mapping[str, Any]], *, max_new_tokens: int = 64, batch_size: int = 16
) -> pd.DataFrame:
    """The base model without memory: questions answered from the facts in context; API calls from an instruction."""
    rows = list(rows)
    api_texts = generate_batch(
        model,
        tokenizer,
        [chat_prompt(tokenizer, ZERO_SHOT_API.replace("{user}", r["user"])) for r in rows],
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        desc="zero-shot API",
    )
    reads = [r for r in rows if r["kind"] == "read"]
    answers = dict(
        zip(
            [r["id"] for r in reads],
            generate_batch(
                model,
                tokenizer,
                [chat_prompt(tokenizer, zero_shot_qa_prompt(r)) for r in reads],
                max_new_tokens=max_new_tokens,
                batch_size=batch_size,
                desc="zero-shot QA",
            ),
        )
    )
    out = []
    for row, api_text in zip(rows, api_texts):
        written = [t for c in api.parse_retllm(api_text) if isinstance(c, MemWrite) for t in c.triples]
        out.append(_record(row, predicted_api(api_text), answers.get(row["id"], ""), written, api_text))
    return pd.DataFrame(out)


def summarize(df: pd.DataFrame) -> pd.DataFrame:
    """Per query type (and writes): n, API exact match, answer accuracy (names; facts), write precision/recall,
    and the share of examples with an invented name or a false stand-in."""
    order = [q for q in (*QUERY_TYPES, "write") if q in set(df["query_type"])]
    df = df.assign(**{c: df[c].astype(float) for c in ("answer_ok", "facts_ok") if c in df})
    if "invented" in df:
        df = df.assign(invented_rate=df["invented"].map(bool).astype(float))
    if "false_substitutions" in df:
        df = df.assign(false_sub_rate=df["false_substitutions"].map(bool).astype(float))
    g = df.groupby("query_type")
    table = pd.DataFrame({"n": g.size(), "api_em": g["api_em"].mean()})
    for col, name in (("answer_ok", "answer_acc"), ("facts_ok", "facts_acc")):
        if col in df:
            table[name] = g[col].mean()
    if "write_precision" in df:
        table["write_precision"] = g["write_precision"].mean()
        table["write_recall"] = g["write_recall"].mean()
    for col in ("invented_rate", "false_sub_rate"):
        if col in df:
            table[col] = g[col].mean()
    table = table.reindex(order)
    total = {"n": len(df), "api_em": df["api_em"].mean()}
    for col, name in (("answer_ok", "answer_acc"), ("facts_ok", "facts_acc")):
        if col in df:
            total[name] = df[col].dropna().mean()
    for col in ("invented_rate", "false_sub_rate"):
        if col in df:
            total[col] = df[col].mean()
    table.loc["all"] = pd.Series(total)
    return table


_METRIC_COLUMN = {"api_em": "api_em", "answer_acc": "answer_ok", "facts_acc": "facts_ok"}


def with_intervals(
    df: pd.DataFrame,
    metrics: Sequence[str] = ("api_em", "answer_acc", "facts_acc"),
    *,
    n_boot: int = 1000,
    seed: int = 0,
) -> pd.DataFrame:
    """Per query type: each metric with its 95% percentile-bootstrap interval over examples (lo, hi columns)."""
    rng = np.random.default_rng(seed)
    rows = {}
    for qtype, part in [*df.groupby("query_type", sort=False), ("all", df)]:
        rec = {"n": len(part)}
        for m in metrics:
            col = _METRIC_COLUMN[m]
            if col not in part:
                continue
            x = part[col].dropna().astype(float).to_numpy()
            if not len(x):
                continue
            boots = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(axis=1)
            rec[m], rec[f"{m}_lo"], rec[f"{m}_hi"] = x.mean(), *np.percentile(boots, [2.5, 97.5])
        rows[qtype] = rec
    order = [q for q in (*QUERY_TYPES, "write", "all") if q in rows]
    return pd.DataFrame.from_dict(rows, orient="index").loc[order]


# ---------------------------------------------------------------------------------------------- notebook 03's figure
PLOTTED = (("api_em", "API-call exact match"), ("facts_acc", "answer (facts)"))
COMPARED = ("RET-LLM, whole-sequence loss", "RET-LLM, paper's loss mask")  # notebook 03's two adapters' passes


def plot_by_query_type(
    scores: Mapping[str, Any],
    *,
    title: str = "",
    metrics: Sequence[tuple[str, str]] = PLOTTED,
    colors: Sequence[str] = ("tab:gray", "tab:blue", "tab:orange", "tab:green"),
):
    """One panel per metric: each pass's score per query type as a bar, its 95% interval as the error bar.

    `scores`: pass name -> per query type the metric with its `_lo` / `_hi` bounds, either `with_intervals`' table
    or the same as notebook 03 saves it ({query type: {metric: value}}; `plotted_scores`). Query types in the first
    pass's order, "all" left out; the legend sits below the panels, clear of the bars. Returns the figure.
    """
    import matplotlib.pyplot as plt

    tables = {
        name: (t if isinstance(t, pd.DataFrame) else pd.DataFrame.from_dict(t, orient="index")).astype(float)
        for name, t in scores.items()
    }
    qtypes = [q for q in next(iter(tables.values())).index if q != "all"]
    fig, axes = plt.subplots(1, len(metrics), figsize=(10, 3.9), dpi=100, sharey=True, layout="constrained")
    width = 0.8 / len(tables)
    for ax, (metric, label) in zip(axes, metrics):
        for k, (name, table) in enumerate(tables.items()):
            t = table.reindex(qtypes)
            if metric not in t:
                continue
            x = [i + (k - (len(tables) - 1) / 2) * width for i in range(len(qtypes))]
            err = [t[metric] - t[f"{metric}_lo"], t[f"{metric}_hi"] - t[metric]]
            ax.bar(x, t[metric], width=width, color=colors[k], label=name, yerr=err, capsize=2)
        ax.set(title=label, ylim=(0, 1.05), xticks=range(len(qtypes)))
        ax.set_xticklabels(qtypes, rotation=40)
    axes[0].set_ylabel("share of examples (95% interval)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=9)
    return fig


def plotted_scores(results: Mapping[str, Any]) -> dict[str, Any]:
    """The passes notebook 03's figure shows, as its saved results hold them (results/03_retllm.json): the
    zero-shot base, RET-LLM on the test and paraphrase splits, and the other adapter on the test split if it ran."""
    shown = {
        "zero-shot base": results["baselines"]["zero-shot base"],
        "RET-LLM, test": results["test"],
        "RET-LLM, paraphrase": results["paraphrase"],
    }
    for name in COMPARED:
        if name in results["baselines"]:
            shown[f"{name}, test"] = results["baselines"][name]
    return shown
