"""Relations the model was never trained on: Re-DocRED sentences over held-out relations (`wide`'s `new_relations`
split), each written through the controller into an empty memory (by default) and then read back with a question.

A general memory should store "Betley died in Warsaw" although the five people–company relations do not include
it. The model may name the relation in its own words ("died in" for Re-DocRED's "place of death"), so a write is
scored twice: exactly (the gold triple), and with the names exact and the relation matched by meaning (the encoder's
cosine at least its `tau_relation`, the threshold MemLLM's memory merges relations at). The read-back asks (by
default) `QUESTION` with Re-DocRED's relation name in the same memory; it is right when the answer names the gold
object.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from ..controller import HFGenerator, RetLLMController
from ..memory import TripleMemory
from ..metrics import whole_word
from ..prompts import chat_prompt
from .evaluation import scene_memory

__all__ = ["QUESTION", "relation_matches", "evaluate_new_relations", "summarize_new_relations"]

QUESTION = "What is the {relation} of {subject}?"  # one wording for every relation: the read must bridge the words


def relation_matches(embedder: Any, said: Sequence[str], gold: Sequence[str]) -> list[bool]:
    """Pairwise: whether a written relation means the gold one (equal, or cosine >= the encoder's tau_relation)."""
    if not said:
        return []
    a, b = embedder.encode(list(said)), embedder.encode(list(gold))
    cos = np.sum(a * b, axis=1)
    tau = float(embedder.thresholds["tau_relation"])
    return [s == g or c >= tau for s, g, c in zip(said, gold, cos)]


def evaluate_new_relations(
    model: Any,
    tokenizer: Any,
    rows: Sequence[Mapping[str, Any]],
    embedder: Any,
    *,
    index: str = "flat",
    max_new_tokens: int = 128,
    copy_names: bool = True,
    known_names: Sequence[str] = (),
    relation_names: Sequence[str] | None = None,
    read_relations: bool | str = False,
    desc: str = "new relations",
    generator: Any = None,
    prompt_fn: Any = None,
    question_of: Callable[[Sequence[str]], str] | None = None,
    prefill: bool = False,
    answer_names: bool = False,
) -> pd.DataFrame:
    """One record per statement: what the model wrote, whether it is the gold triple (exactly; names exact and the
    relation matched by meaning; `writes_all`: every gold triple of the row written exactly), and the answer to the
    read-back question in the same memory. `generator` and `prompt_fn`: another decoding path and prompt (tests use a
    scripted one); `question_of`: the read-back question of the first gold triple (default `QUESTION` in Re-DocRED's
    relation words); `prefill`: the row's `memory` facts are stored before the statement, as other facts would be;
    `relation_names`, `read_relations`: a write's (and a read's) relation copies one of them or the user's words;
    `answer_names`: the read-back answer ends at a sentence it already said and, with `copy_names`, its capitalised
    words copy the reply's names or the user's (`RetLLMController`)."""
    gen = generator or HFGenerator(model, tokenizer, max_new_tokens=max_new_tokens)
    prompt_fn = prompt_fn or (lambda u: chat_prompt(tokenizer, u))
    out = []
    for row in tqdm(rows, desc=desc, leave=False):
        (s, r, o) = row["triples"][0]
        memory = scene_memory(row, embedder, index) if prefill else TripleMemory(embedder=embedder, index=index)
        ctl = RetLLMController(
            gen,
            memory,
            prompt_fn,
            copy_names=copy_names,
            known_names=known_names,
            relation_names=relation_names,
            read_relations=read_relations,
            answer_names=answer_names,
            stop_repeated_sentences=answer_names,
        )
        turn = ctl.chat(row["user"])
        written = [tuple(e["triple"]) for e in turn.trace if e["event"] == "write"]
        named = [t for t in written if t[0] == s and t[2] == o]
        fuzzy = any(relation_matches(embedder, [t[1] for t in named], [r] * len(named)))
        question = question_of((s, r, o)) if question_of else QUESTION.format(relation=r, subject=s)
        answer = ctl.chat(question).answer
        out.append(
            {
                "id": row["id"],
                "relation": r,
                "user": row["user"],
                "gold": (s, r, o),
                "written": written,
                "write_exact": (s, r, o) in written,
                "writes_all": all(tuple(t) in written for t in row["triples"]),
                "write_names_relation_fuzzy": fuzzy,
                "names_exact": bool(named),
                "question": question,
                "answer": answer,
                "answer_ok": whole_word(o.lower(), answer.lower()),
            }
        )
    return pd.DataFrame(out)


def summarize_new_relations(df: pd.DataFrame) -> pd.DataFrame:
    """Per relation and overall: n and the share of each score."""
    cols = ["write_exact", "names_exact", "write_names_relation_fuzzy", "answer_ok"]
    cols += ["writes_all"] if "writes_all" in df else []
    g = df.groupby("relation")[cols]
    table = g.mean().join(g.size().rename("n"))[["n", *cols]]
    table.loc["all"] = [len(df), *df[cols].mean()]
    return table.astype({"n": int})
