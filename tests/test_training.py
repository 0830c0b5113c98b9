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


@pytest.fixture
def tiny_model(tok):
    """A 2-layer Llama of width 16 on SmolLM2's vocabulary: trains in seconds, no download (fresh per test: LoRA
    is injected in place)."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2
    )
    return AutoModelForCausalLM.from_config(cfg)


def test_training_logs_progress_lines(tok, tiny_model, tmp_path, capsys):
    # outside a live notebook (papermill, a terminal) training prints text lines with the loss, and no bar
    from retllm_utils.training import lora_config, sft_config, train_lora

    ds = build_sft_dataset(tok, [READ, WRITE, EMPTY] * 4, retllm_example_text, max_length=512)
    args = sft_config(str(tmp_path), max_steps=4, batch_size=2, logging_steps=1)
    trainer = train_lora(tiny_model, tok, ds, args, lora_config(r=2, alpha=4))
    out, err = capsys.readouterr()
    lines = [line for line in out.splitlines() if line.startswith("step ")]
    assert [line.split(" · ")[0] for line in lines] == [f"step {i}/4 ({25 * i}%)" for i in range(1, 5)], out
    assert all(" · loss " in line and " elapsed, ~" in line for line in lines), lines
    assert out.splitlines()[-1].startswith("done: 4 steps · mean loss "), out
    assert "training:" not in err and trainer.state.global_step == 4  # no bar (datasets' map bars aside)
    assert "{'loss'" not in out  # transformers' log-dict printer stays off


def test_training_progress_bar_shows_the_loss(tok, tiny_model, tmp_path, capsys):
    # where a bar updates live (JupyterLab, Colab) the loss rides on the bar instead of text lines
    from retllm_utils.training import TrainingProgress, lora_config, sft_config, train_lora

    ds = build_sft_dataset(tok, [READ, WRITE] * 2, retllm_example_text, max_length=512)
    args = sft_config(str(tmp_path), max_steps=2, batch_size=2, logging_steps=1)
    train_lora(tiny_model, tok, ds, args, lora_config(r=2, alpha=4), progress=TrainingProgress(bar=True))
    out, err = capsys.readouterr()
    assert "training: 100%" in err and "2/2" in err and "loss=" in err, err
    assert not any(line.startswith(("step ", "done: ")) for line in out.splitlines())


def test_live_frontend_is_false_outside_a_jupyter_server(monkeypatch):
    from retllm_utils.training import live_frontend

    monkeypatch.setenv("JPY_SESSION_NAME", "x.ipynb")
    assert not live_frontend()  # no kernel here: pytest is a terminal
