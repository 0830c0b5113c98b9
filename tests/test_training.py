"""Loss masks: the supervised tokens are exactly the API call and the answer (+ end token), nothing else."""

import pytest

from retllm_utils.api import format_retllm_read_query, format_retllm_read_reply, format_retllm_write
from retllm_utils.prompts import end_token, retllm_example_text
from retllm_utils.training import IGNORE, build_sft_dataset, supervised_text, tokenize_with_spans

READ = dict(
    user="Who is employed by Pfizer?",
    api=format_retllm_read_query(("", "employed by", "Pfizer")),
    reply=format_retllm_read_reply([("Ann Lee", "employed by", "Pfizer"), ("Bo Wu", "employed by", "Pfizer")]),
    answer="Ann Lee and Bo Wu are employed by Pfizer.",
)
WRITE = dict(
    user="Ann Lee and Bo Wu work for Pfizer.",
    reply="",
    answer="",
    api=format_retllm_write([("Ann Lee", "employed by", "Pfizer"), ("Bo Wu", "employed by", "Pfizer")]),
)
EMPTY = dict(
    user="Who founded Tesla?",
    api=format_retllm_read_query(("", "founder of", "Tesla")),
    reply=format_retllm_read_reply([]),
    answer="I don't know.",
)


@pytest.fixture(scope="module")
def tok(smol):
    return smol[1]


@pytest.mark.parametrize("ex", [READ, WRITE, EMPTY], ids=["read", "write", "read-empty"])
def test_supervised_tokens_are_exactly_the_intended_spans(tok, ex):
    text, spans = retllm_example_text(tok, ex)
    enc = tokenize_with_spans(tok, text, spans, max_length=512)
    runs = supervised_text(tok, enc["input_ids"], enc["labels"])
    end = end_token(tok)
    expected = [ex["api"], ex["answer"] + end] if ex["answer"] else [ex["api"] + end]
    assert runs == expected
    # the question and the memory's reply are never supervised
    unsup = tok.decode([t for t, lab in zip(enc["input_ids"], enc["labels"]) if lab == IGNORE])
    assert ex["user"] in unsup and ex["reply"] in unsup


def test_no_mask_supervises_everything(tok):
    text, spans = retllm_example_text(tok, READ)
    enc = tokenize_with_spans(tok, text, spans, max_length=512, mask=False)
    assert enc["labels"] == enc["input_ids"]


def test_truncation_that_cuts_a_span_is_an_error(tok):
    text, spans = retllm_example_text(tok, READ)
    with pytest.raises(ValueError, match="max_length"):
        tokenize_with_spans(tok, text, spans, max_length=20)


def test_build_sft_dataset_has_trl_columns(tok):
    ds = build_sft_dataset(tok, [READ, WRITE], retllm_example_text, max_length=512)
    assert ds.column_names == ["input_ids", "labels"] and len(ds) == 2
    assert all(len(i) == len(lab) for i, lab in zip(ds["input_ids"], ds["labels"]))
