"""The xllamacpp chat engine (`retllm_utils.chat.xllama`): a ctypes binding to the llama.cpp that PyPI's xllamacpp
wheel ships. It loads the shipped GGUF, decodes as transformers does on the same prompt (up to Q4_1 arithmetic),
applies a converted LoRA, keeps its KV cache across calls without changing the logits, runs the controller's turn
through `LlamaCppGenerator`'s loop, and drafts tokens by prompt lookup without changing one on
short turns. One thread, a few dozen
tokens: seconds."""

import json
import shutil

import numpy as np
import pytest
import torch

pytest.importorskip("xllamacpp")

from retllm_utils.chat.llamacpp import lora_gguf, merged_gguf  # noqa: E402
from retllm_utils.chat.xllama import XLlamaGenerator, load_xllama, lookup_draft  # noqa: E402
from retllm_utils.controller import ForceThenFree, RetLLMController  # noqa: E402
from retllm_utils.memory import TripleMemory  # noqa: E402
from retllm_utils.models import NgramEmbedder  # noqa: E402
from retllm_utils.paths import run_dir  # noqa: E402
from retllm_utils.prompts import chat_prompt  # noqa: E402
from retllm_utils.retllm.synthetic import fact_sentence  # noqa: E402

USER = "What is the capital of France?"
NEAR_TIE = 0.25  # logits: a gap Q4_1's rounding can close (the flips seen were 0.08-0.09)
WITH_SCORES = {"output_scores": True, "return_dict_in_generate": True}


@pytest.fixture(scope="module")
def base():
    llm = load_xllama(threads=1, n_ctx=512)
    yield llm
    llm.close()


def test_another_xllamacpp_version_is_refused_by_name(monkeypatch):
    import importlib.metadata

    from retllm_utils.chat import xllama

    xllama._lib.cache_clear()
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "2026.11.1")
    with pytest.raises(ImportError, match=f"2026.11.1 is installed.*xllamacpp=={xllama.XLLAMACPP_VERSION}"):
        xllama._lib()
    monkeypatch.undo()
    assert xllama._lib()  # the pinned version opens again (the same library handle)


def _greedy(llm, ids, n):
    """`n` greedy tokens after `ids`, from an empty cache."""
    llm.n_tokens, out = 0, []
    llm.eval(ids)
    for _ in range(n):
        out.append(int(llm.logits().argmax()))
        llm.eval(out[-1:])
    return out


def test_the_library_loads_the_shipped_gguf(base):
    assert base.n_vocab() == 49152
    base.n_tokens = 0
    base.eval([1, 2, 3])
    assert base.n_tokens == 3 and base.input_ids[:3].tolist() == [1, 2, 3]
    assert np.isfinite(base.logits()).all()


@pytest.mark.model
def test_greedy_tokens_agree_with_transformers_up_to_near_ties(base, smol):
    """Q4_1 with 8-bit activations (llama.cpp) against the same weights dequantised to fp32 (transformers): a choice
    may flip only where transformers' top two logits are within NEAR_TIE, and each run agrees on 3 tokens unless the
    first difference is such a tie (the France prompt: 'The' 25.33 vs 'L' 25.24 in fp32, the other way in Q4_1)."""
    model, tok = smol
    agree = {}
    for user in ("Who is employed by Pfizer?", "Who is connected to Deutsche Bank?", USER):
        ids = tok(chat_prompt(tok, user), add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            out = model.generate(torch.tensor([ids]), max_new_tokens=8, do_sample=False, pad_token_id=2, **WITH_SCORES)
        hf, scores = out.sequences[0, len(ids) :].tolist(), [s[0].numpy() for s in out.scores]
        base.n_tokens = 0
        base.eval(ids)
        for t, s in zip(hf, scores):  # on transformers' tokens, step by step
            ours = int(base.logits().argmax())
            assert ours == t or s[t] - s[ours] < NEAR_TIE, (user, tok.decode([t]), tok.decode([ours]), s[t] - s[ours])
            base.eval([t])
        free = _greedy(base, ids, len(hf))  # free-running: a flipped tie changes the rest of the run
        same = next((i for i, (a, b) in enumerate(zip(free, hf)) if a != b), len(hf))
        agree[user] = same
        assert same >= 3 or scores[same][hf[same]] - scores[same][free[same]] < NEAR_TIE, (user, tok.decode(free))
    print(f"\nfirst greedy tokens equal to transformers' (of 8): {agree}")


def test_the_kv_cache_kept_or_cut_gives_the_logits_of_a_fresh_evaluation(base):
    prompt, ext = [1, 9690, 198, 4093, 314, 260], [2052, 281, 3485, 30]
    base.n_tokens = 0
    base.eval(prompt + ext)
    fresh = base.logits()
    base.n_tokens = 0
    base.eval(prompt)
    base.eval(ext)  # the prompt stays cached: only the extension is evaluated
    np.testing.assert_allclose(base.logits(), fresh, atol=1e-3)
    base.eval([17, 18])  # diverge, then cut the cache back to the prompt, as the generator does
    base.n_tokens = len(prompt)
    base.eval(ext)
    np.testing.assert_allclose(base.logits(), fresh, atol=1e-3)


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    """A copy of notebook 02's smoke adapter where it was trained, else a random r=2 peft LoRA of the offline model;
    one per module, so its GGUF forms (converted, merged) are built once and reused, as the engine reuses them."""
    out = tmp_path_factory.mktemp("xllama") / "adapter"
    trained = run_dir("retllm", "smoke") / "adapter"
    if (trained / "adapter_config.json").is_file():
        out.mkdir()
        for name in ("adapter_config.json", "adapter_model.safetensors"):
            shutil.copy(trained / name, out / name)
        return out
    from peft import LoraConfig, get_peft_model

    from retllm_utils.models import load_model

    torch.manual_seed(0)
    cfg = LoraConfig(r=2, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj"], init_lora_weights=False)
    get_peft_model(load_model(device="cpu")[0], cfg).save_pretrained(str(out))
    return out


@pytest.mark.model
def test_a_converted_lora_changes_the_logits_as_peft_does(base, smol, adapter):
    from peft import PeftModel

    from retllm_utils.models import load_model

    _, tok = smol
    assert json.loads((adapter / "adapter_config.json").read_text())["peft_type"] == "LORA"
    ids = tok(chat_prompt(tok, USER), add_special_tokens=False)["input_ids"]
    tuned = load_xllama(lora_gguf(adapter), threads=1, n_ctx=512)
    base.n_tokens = 0
    base.eval(ids)
    tuned.eval(ids)
    ours = tuned.logits() - base.logits()
    assert np.abs(ours).max() > 0.1
    with torch.no_grad():
        x, model = torch.tensor([ids]), load_model(device="cpu")[0]  # a copy: peft wraps it in place
        hf_base = model(x).logits[0, -1].numpy()
        hf = PeftModel.from_pretrained(model, str(adapter)).eval()(x).logits[0, -1].numpy() - hf_base
    corr = float(np.corrcoef(ours, hf)[0, 1])
    print(f"\nthe LoRA's change to the last logits: correlation {corr:.3f} between llama.cpp and peft")
    assert corr > 0.9
    tuned.close()
    merged = load_xllama(threads=1, n_ctx=512, model_path=merged_gguf(adapter))  # the adapter in the weights (Q8_0)
    merged.eval(ids)
    corr = float(np.corrcoef(merged.logits() - base.logits(), hf)[0, 1])
    print(f"merged into the weights: correlation {corr:.3f}")
    assert corr > 0.9
    merged.close()


@pytest.mark.model
def test_the_generator_runs_a_controller_turn_with_a_pause_and_reuses_its_cache(base, smol):
    _, tok = smol
    call = "[MEM_READ{>>employed by>>Pfizer}:"  # forced (the base model does not know the API), then free
    prompt_ids = tok(chat_prompt(tok, "Who is employed by Pfizer?"), add_special_tokens=False)["input_ids"]
    head = tok(chat_prompt(tok, "Who is employed by Pfizer?") + call, add_special_tokens=False)["input_ids"]
    force = ForceThenFree(len(prompt_ids), head[len(prompt_ids) :])
    mem = TripleMemory(embedder=NgramEmbedder(), index="flat")
    mem.write_many([("Ann Lee", "employed by", "Pfizer")])
    fed, eval_ = [], base.eval
    base.eval = lambda tokens: fed.append(len(tokens)) or eval_(tokens)
    try:
        base.n_tokens = 0
        gen = XLlamaGenerator(base, tok, max_new_tokens=24, logits_processor=[force])
        ctl = RetLLMController(gen, mem, lambda u: chat_prompt(tok, u), copy_names=True, answer_form=fact_sentence)
        turn = ctl.chat("Who is employed by Pfizer?")
    finally:
        del base.eval
    assert [e["event"] for e in turn.trace] == ["model", "read", "model"]
    assert turn.answer.startswith("Ann Lee is employed by Pfizer.")
    assert sum(fed) <= len(gen._last[1]) + 1  # the prompt once, then only new tokens: no re-evaluation


@pytest.mark.model
def test_load_retllm_runs_the_trained_adapter_on_xllamacpp(smol, adapter, monkeypatch):
    import retllm_utils.chat.loading as loading

    _, tok = smol
    monkeypatch.setattr(loading, "run_dir", lambda paper, profile: adapter.parent)  # no file written under runs/
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    ctls, _, msg = loading.load_retllm(
        "smollm2-135m-instruct", "smoke", "paper", dtype=torch.float32, max_new_tokens=8, engine="xllamacpp"
    )
    gen = ctls["trained"].generator
    assert isinstance(gen, XLlamaGenerator) and msg.endswith("on xllamacpp")
    text, _ = gen(chat_prompt(tok, "Who is employed by Pfizer?"))
    assert text and gen.model.n_tokens > 8


def test_the_auto_engine_is_xllamacpp_on_a_cpu_and_transformers_with_cuda(smol, adapter, monkeypatch):
    """Notebook 09's default engine: the prebuilt llama.cpp where there is no GPU (this machine), transformers where
    CUDA is there; an engine name it does not know is refused by name, not run as transformers."""
    import retllm_utils.chat.loading as loading
    from retllm_utils.chat.xllama import available

    assert available()  # a main dependency on Linux x86-64: make install brings it
    monkeypatch.setattr(loading, "run_dir", lambda paper, profile: adapter.parent)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    kw = dict(dtype=torch.float32, max_new_tokens=8)
    ctls, _, msg = loading.load_retllm("smollm2-135m-instruct", "smoke", "paper", **kw)
    assert isinstance(ctls["trained"].generator, XLlamaGenerator) and msg.endswith("on xllamacpp")
    assert ctls["trained"].facts_in_order  # the chat answers as notebook 03 scores it: the reply's facts in its order
    assert ctls["trained"].write_every_name  # and writes a statement's names in its order, none skipped
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert loading.chat_engine("auto") == "transformers" and loading.chat_engine("xllamacpp") == "xllamacpp"
    with pytest.raises(ValueError, match="engine must be 'auto'"):
        loading.load_retllm("smollm2-135m-instruct", "smoke", "paper", engine="xllama", **kw)


def test_lookup_draft_takes_what_followed_the_latest_earlier_occurrence():
    ids = [5, 1, 2, 3, 9, 9, 1, 2, 3, 7, 8, 4, 1, 2, 3]
    assert lookup_draft(ids, k=3) == [7, 8, 4]  # the latest earlier (1, 2, 3), not the first
    assert lookup_draft(ids, k=10) == [7, 8, 4, 1, 2, 3]  # it may run into the tail itself
    assert lookup_draft([1, 2, 3, 4], k=5) == [] and lookup_draft(ids, k=0) == []
    assert lookup_draft([1, 2, 3, 1, 2, 3], k=2) == [1, 2]
    assert lookup_draft(ids, k=3, start=7) == [] and lookup_draft(ids, k=3, start=6) == [7, 8, 4]  # only from `start`


@pytest.mark.model
def test_drafting_gives_the_tokens_of_one_at_a_time_decoding(base, smol):
    """Prompt lookup changes only how many tokens one llama.cpp call evaluates: every kept token is the one greedy
    decoding with the same processors picks (a controller turn with a forced call, copied names and the answer held
    to the reply, and free text that repeats its prompt), and the drafts are used, looked up in the whole context or
    only in the call's own output."""
    _, tok = smol
    user = "Who is employed by Pfizer? Ann Lee is employed by Pfizer. Bo Kim is employed by Pfizer."
    prompt_ids = tok(chat_prompt(tok, user), add_special_tokens=False)["input_ids"]
    call = tok(chat_prompt(tok, user) + "[MEM_READ{>>employed by>>Pfizer}:", add_special_tokens=False)["input_ids"]
    write = "[MEM_WRITE{Ann Lee>>employed by>>Pfizer}]"
    twice = tok(chat_prompt(tok, user) + write * 2, add_special_tokens=False)["input_ids"]  # a write call repeated
    mem = TripleMemory(embedder=NgramEmbedder(), index="flat")
    mem.write_many([("Ann Lee", "employed by", "Pfizer"), ("Bo Kim", "employed by", "Pfizer")])
    out = {}
    for draft, source in ((0, "context"), (16, "context"), (16, "output")):
        force = ForceThenFree(len(prompt_ids), call[len(prompt_ids) :])
        base.n_tokens = 0
        gen = XLlamaGenerator(base, tok, max_new_tokens=40, logits_processor=[force], draft=draft, draft_from=source)
        ctl = RetLLMController(gen, mem, lambda u: chat_prompt(tok, u), copy_names=True, answer_form=fact_sentence)
        turn = ctl.chat(user)
        echo = XLlamaGenerator(base, tok, max_new_tokens=40, draft=draft, draft_from=source)
        rep = ForceThenFree(len(prompt_ids), twice[len(prompt_ids) :])
        again = XLlamaGenerator(base, tok, max_new_tokens=40, logits_processor=[rep], draft=draft, draft_from=source)
        out[draft, source] = (
            turn.model_text,
            turn.answer,
            echo(chat_prompt(tok, "Say it twice: " + user))[0],
            again(chat_prompt(tok, user))[0],
        )
        if source == "context" and draft:
            assert gen.accepted > 0  # the reply's names, found in the context, drafted and kept
        if source == "output":
            assert again.accepted >= 10 and gen.drafted == 0  # the repeated call drafted from the first; no reply
    assert out[16, "context"] == out[16, "output"] == out[0, "context"]
    with pytest.raises(ValueError, match="draft must be an int from 0 to 63"):
        XLlamaGenerator(base, tok, draft=64)
    with pytest.raises(ValueError, match="draft_from must be one of"):
        XLlamaGenerator(base, tok, draft=4, draft_from="prompt")
