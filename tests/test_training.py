"""Loss masks: the supervised tokens are exactly the API call and the answer (+ end token), nothing else; training
progress; `train_or_reuse`: an adapter is reused only if the model, data and settings that shaped it are the same."""

import json
import math

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


# --------------------------------------------------------------------------------------------- train or reuse
def _config(**given):
    """The smoke profile's training settings at a tiny scale: 2 steps of batch 2."""
    from retllm_utils.retllm.config import RetLLMConfig

    return RetLLMConfig.for_profile("smoke", **{"batch_size": 2, "max_steps": 2, **given})


def _tiny(tok):
    """A function that makes a fresh tiny Llama (train_or_reuse calls it only when it trains)."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = LlamaConfig(
        vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2
    )
    return lambda: AutoModelForCausalLM.from_config(cfg)


def test_a_saved_adapter_is_reused_only_when_model_data_and_settings_are_the_same(tok, tmp_path, capsys):
    # an adapter trained with other settings is retrained, not loaded: lr, epochs, the base model, LoRA, the data
    from retllm_utils.training import META_FILE, train_or_reuse

    ds = build_sft_dataset(tok, [READ, WRITE, EMPTY] * 2, retllm_example_text, max_length=512)
    run = dict(tokenizer=tok, model=_tiny(tok), info={"variant": "test"})
    first = train_or_reuse(tmp_path / "a", ds, _config(), model_id="tiny", **run)
    assert first.trainer is not None and (tmp_path / "a" / "adapter_config.json").is_file()
    meta = json.loads((tmp_path / "a" / META_FILE).read_text())
    assert meta["lr"] == 1e-3 and meta["model_id"] == "tiny" and meta["loss"] == "masked" and meta["variant"] == "test"
    assert meta["steps"] == 2 and meta["examples"] == 6 and [h["step"] for h in meta["log_history"] if "loss" in h]
    again = train_or_reuse(tmp_path / "a", ds, _config(), model_id="tiny", **run)
    assert again.trainer is None and again.meta == meta and "reusing" in capsys.readouterr().out
    whole = build_sft_dataset(tok, [READ, WRITE, EMPTY] * 2, retllm_example_text, 512, mask=False)
    changed = {
        "lr": (_config(lr=5e-4), "tiny", ds),
        "epochs": (_config(epochs=2), "tiny", ds),
        "model_id": (_config(), "mistralai/Mistral-7B-v0.1", ds),
        "lora_alpha": (_config(lora_alpha=8), "tiny", ds),
        "data": (_config(), "tiny", build_sft_dataset(tok, [READ, WRITE], retllm_example_text, max_length=512)),
        "loss": (_config(), "tiny", whole),
    }
    for name, (config, model_id, data) in changed.items():
        train_or_reuse(tmp_path / "a", ds, _config(), model_id="tiny", **run)  # back to the first settings
        capsys.readouterr()
        redo = train_or_reuse(tmp_path / "a", data, config, model_id=model_id, **run)
        said = capsys.readouterr().out
        assert redo.trainer is not None, f"{name} changed but the saved adapter was reused"
        assert "retraining: the adapter in" in said and f"{name} " in said, said
    # retrain=True trains even with the same settings
    assert train_or_reuse(tmp_path / "a", ds, _config(), model_id="tiny", retrain=True, **run).trainer is not None


def test_an_adapter_without_the_recipe_is_retrained(tok, tmp_path, capsys):
    # notebook 05 used to write train_meta.json without the data and seed: such an adapter is not trusted
    from retllm_utils.training import META_FILE, train_or_reuse

    ds = build_sft_dataset(tok, [READ, WRITE], retllm_example_text, max_length=512)
    out = tmp_path / "write"
    out.mkdir()
    (out / "adapter_config.json").write_text("{}")
    old = {"kind": "write", "profile": "smoke", "seconds": 1.0, "epochs": 1, "lr": 1e-3, "lora": [16, 32, 0.05]}
    (out / META_FILE).write_text(json.dumps({**old, "model_id": "tiny"}))
    assert train_or_reuse(out, ds, _config(), model_id="tiny", tokenizer=tok, model=_tiny(tok)).trainer is not None
    assert "data None -> " in capsys.readouterr().out


def test_micro_batches_and_gradient_checkpointing_keep_the_batch(tok, tmp_path):
    # the gpu profiles' way of fitting a large batch: 2 passes of 2 examples per optimizer step, activations recomputed
    from retllm_utils.training import train_or_reuse

    ds = build_sft_dataset(tok, [READ, WRITE, EMPTY] * 4, retllm_example_text, max_length=512)
    config = _config(batch_size=4, micro_batch=2, gradient_checkpointing=True)
    done = train_or_reuse(tmp_path / "a", ds, config, model_id="tiny", tokenizer=tok, model=_tiny(tok))
    args = done.trainer.args
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (2, 2)
    assert args.gradient_checkpointing and done.meta["micro_batch"] == 2 and done.meta["grad_accum"] == 2
    assert done.meta["steps"] == 2 and all(math.isfinite(h["loss"]) for h in done.meta["log_history"] if "loss" in h)
    # how the batch is computed is not part of what the adapter learnt: the same adapter is reused with one pass
    again = train_or_reuse(tmp_path / "a", ds, _config(batch_size=4), model_id="tiny", tokenizer=tok)
    assert again.trainer is None


def test_batch_split_over_processes_and_micro_batches():
    config = _config(batch_size=32, micro_batch=4)
    assert config.batch_split() == (4, 8) and config.batch_split(2) == (4, 4) and config.batch_split(8) == (4, 1)
    assert _config(batch_size=8).batch_split(2) == (4, 1)
    with pytest.raises(ValueError, match="does not split over 3 processes"):
        config.batch_split(3)
    with pytest.raises(ValueError, match="^micro_batch must divide batch_size"):
        _config(batch_size=8, micro_batch=3)


@pytest.mark.parametrize("kind", ["write", "read"])
def test_committed_cpu_adapters_are_what_notebook_05_would_reuse(tok, kind):
    # make restore-checkpoints + notebook 05 on cpu: the saved recipe equals the one notebook 05 computes, so the
    # committed adapters are loaded, not retrained
    from retllm_utils.memllm.config import MemLLMConfig
    from retllm_utils.memllm.dataset import load_or_build, render
    from retllm_utils.paths import ROOT
    from retllm_utils.training import META_FILE, recipe, recipe_differences

    config = MemLLMConfig.for_profile("cpu")
    dd, how = load_or_build("cpu", seed=config.seed)
    assert how.startswith("loaded")
    ds = build_sft_dataset(tok, dd[f"{kind}_train"], render, config.max_length)
    saved = json.loads((ROOT / "checkpoints" / "memllm" / "cpu" / kind / META_FILE).read_text())
    assert recipe_differences(saved, recipe(config, "smollm2-135m-instruct", ds)) == []
    assert saved["examples"] == len(ds) and saved["tokens_per_epoch"] == sum(map(len, ds["input_ids"]))


def test_sft_config_takes_bf16_and_checkpointing_under_either_transformers_name(monkeypatch):
    # bf16=False keeps fp32 on a GPU (write_levers --fp32); transformers 5.17 (a GPU image) has no
    # `activation_checkpointing` argument, so the name is read off the SFTConfig at hand
    import dataclasses

    import trl

    from retllm_utils.training import sft_config

    args = sft_config("/tmp/unused", bf16=False, gradient_checkpointing=True)
    assert args.bf16 is False and args.gradient_checkpointing is True

    @dataclasses.dataclass
    class OldSFTConfig:  # the fields an older transformers' training arguments have, and no more
        output_dir: str = ""
        learning_rate: float = 0.0
        num_train_epochs: float = 0.0
        max_steps: int = -1
        per_device_train_batch_size: int = 1
        gradient_accumulation_steps: int = 1
        max_length: int = 0
        seed: int = 0
        data_seed: int = 0
        logging_steps: int = 0
        save_strategy: str = ""
        report_to: str = ""
        bf16: bool = False
        use_cpu: bool = False
        lr_scheduler_type: str = ""
        warmup_steps: float = 0.0
        disable_tqdm: bool = True
        gradient_checkpointing: bool = False
        train_sampling_strategy: str = ""

    monkeypatch.setattr(trl, "SFTConfig", OldSFTConfig)
    assert sft_config("/tmp/unused", gradient_checkpointing=True).gradient_checkpointing is True
