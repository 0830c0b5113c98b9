"""MemLLM memory-write quality (Table 4, appendices A and F): run the write model per focus sentence, score triples.

Generation is greedy from ``pretext({USER_ST})sentence({USER_END})`` + the forced opener ``({MEM_WRITE-->``,
the opener tokenized as a piece of its own, as `training.tokenize_with_spans` cuts the training example there.
Late stopping (appendix A, official `LateStoppingProcessor`, K = 5): whenever "})" (the closing token) is the top
token, the cut point is recorded with score (log-prob so far + log p("})")) / sequence length, "})" is
suppressed and the second-best token taken, until the best cut point is K cut points old; the text is then cut
at the best one. Greedy decoding is K = 0: stop at the first "})".

Two rules of ours keep a small model's degenerate calls from costing every triple (the 135M write model often
loops, e.g. "X>>date of death>>2002;X>>date of death>>2002;..." until the token limit): generation stops when a
finished triple repeats an earlier one of the same call (`stop_on_repeat`), and a call that is not closed when
generation ends keeps its complete triples (the text up to its last ";"). Pass a `collections.Counter` as
`stats` to count how each call ended ("closed", "late stop", "repeat", "limit").

Precision and recall per document, micro-averaged: exact (the same three strings) and embedding-matched
(appendix F: a generated triple matches a gold one when subject and object reach cosine `tau_entity` and the
relation `tau_relation` under the memory's phrase encoder). A generated triple counts as correct if it matches
any gold triple of its document; a gold triple counts as found if any generated triple matches it.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Iterable, Mapping, Sequence

import numpy as np
import torch

from ..metrics import PRF
from ..api import MEMLLM_CLOSE, MEMLLM_WRITE_OPEN, MemWrite, Triple, parse_memllm

__all__ = ["generate_write", "write_document", "PRF", "score_exact", "score_embedded", "PAPER_TABLE4"]

# MemLLM Table 4 (Mistral-7B write model on Re-DocRED dev): not transcribed here (no copy of the paper in this
# kit's sandbox). Fill in as {setting: (precision, recall)} to print them beside ours; missing prints "n/a".
PAPER_TABLE4: dict[str, tuple[float, float]] = {}


@torch.no_grad()
def generate_write(model: Any, tokenizer: Any, head: str, *, late_stopping: int = 0, max_new_tokens: int = 128,
                   stop_on_repeat: bool = True, stats: Counter | None = None) -> str:
    """The write call the model produces after `head` (pretext + tagged sentence): "({MEM_WRITE-->...})"."""
    from ..prompts import end_token

    close_id = tokenizer(MEMLLM_CLOSE, add_special_tokens=False)["input_ids"]
    if len(close_id) != 1:
        raise ValueError(f"{MEMLLM_CLOSE!r} is not one token in this tokenizer: late stopping needs it to be")
    close_id, end_id = close_id[0], tokenizer.convert_tokens_to_ids(end_token(tokenizer))
    opener = tokenizer(MEMLLM_WRITE_OPEN, add_special_tokens=False)["input_ids"]
    prompt = tokenizer(head, add_special_tokens=False)["input_ids"] + opener
    out = model(input_ids=torch.tensor([prompt], device=model.device), use_cache=True, logits_to_keep=1)
    logits, cache = out.logits[0, -1].float(), out.past_key_values
    gen: list[int] = []
    cum, cuts = 0.0, {}  # cut position in `gen` -> mean log-prob score
    closed, repeat_body, n_done = False, None, 0
    for _ in range(max_new_tokens):
        logp = torch.log_softmax(logits, -1)
        top2 = torch.topk(logits, 2).indices.tolist()
        nxt = top2[0]
        if late_stopping and nxt == close_id:
            scores = list(cuts.values())
            best = int(np.argmax(scores)) if scores else 0
            if len(cuts) < late_stopping or best > len(cuts) - late_stopping:
                cuts[len(gen)] = (cum + float(logp[close_id])) / (len(prompt) + len(gen))
                nxt = top2[1]
        cum += float(logp[nxt])
        if nxt == close_id:
            closed = True
            break
        if nxt == end_id:
            break
        gen.append(nxt)
        if stop_on_repeat:
            done = [p.strip() for p in tokenizer.decode(gen).split(";")[:-1]]
            if len(done) > n_done:
                n_done = len(done)
                if done[-1] in done[:-1]:
                    repeat_body = ";".join(done[:-1])
                    break
        out = model(input_ids=torch.tensor([[nxt]], device=model.device), past_key_values=cache, use_cache=True)
        logits, cache = out.logits[0, -1].float(), out.past_key_values
    if cuts:
        reason, body = "late stop", tokenizer.decode(gen[:max(cuts, key=lambda k: cuts[k])])
    elif repeat_body is not None:
        reason, body = "repeat", repeat_body
    elif closed:
        reason, body = "closed", tokenizer.decode(gen)
    else:  # token limit or end of text inside the call: keep its complete triples
        text = tokenizer.decode(gen)
        reason, body = "limit", text[:max(text.rfind(";"), 0)]
    if stats is not None:
        stats[reason] += 1
    return MEMLLM_WRITE_OPEN + body + MEMLLM_CLOSE


def write_document(model: Any, tokenizer: Any, write_rows: Sequence[Mapping[str, Any]], **kw: Any
                   ) -> tuple[list[Triple], list[str]]:
    """Triples the write model extracts from one document's write rows (`docred.write_examples`), and raw calls."""
    triples, raw = [], []
    for row in write_rows:
        call = generate_write(model, tokenizer, row["text"][:row["spans"][0][0]], **kw)
        raw.append(call)
        for c in parse_memllm(call):
            if isinstance(c, MemWrite):
                triples += [t for t in c.triples if t not in triples]
    return triples, raw


def _clean(triples: Iterable[Sequence[str]]) -> list[Triple]:
    return list(dict.fromkeys(Triple(*(str(x).strip() for x in t)) for t in triples))


def score_exact(pred: Iterable[Sequence[str]], gold: Iterable[Sequence[str]]) -> PRF:
    """One document: a triple is right when all three strings equal a gold triple's."""
    p, g = _clean(pred), _clean(gold)
    gs, ps = set(g), set(p)
    return PRF(sum(t in gs for t in p), len(p), sum(t in ps for t in g), len(g))


def score_embedded(pred: Iterable[Sequence[str]], gold: Iterable[Sequence[str]], embedder: Any, *,
                   tau_entity: float, tau_relation: float) -> PRF:
    """One document, appendix F: match when cos(subject), cos(object) >= tau_entity and cos(relation) >= tau_relation."""
    p, g = _clean(pred), _clean(gold)
    if not p or not g:
        return PRF(0, len(p), 0, len(g))
    phrases = sorted({x for t in p + g for x in t})
    vec = dict(zip(phrases, embedder.encode(phrases)))

    def cos(a: list[str], b: list[str]) -> np.ndarray:
        return np.stack([vec[x] for x in a]) @ np.stack([vec[x] for x in b]).T

    ok = ((cos([t.subject for t in p], [t.subject for t in g]) >= tau_entity - 1e-6)
          & (cos([t.object for t in p], [t.object for t in g]) >= tau_entity - 1e-6)
          & (cos([t.relation for t in p], [t.relation for t in g]) >= tau_relation - 1e-6))
    return PRF(int(ok.any(1).sum()), len(p), int(ok.any(0).sum()), len(g))
