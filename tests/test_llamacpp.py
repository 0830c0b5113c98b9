"""The llama.cpp chat path (`retllm_utils.chat.llamacpp`) keeps HFGenerator's contract: on the same model it generates
the same turn (pauses, memory replies, decoding constraints) and reuses its KV cache across a pause.

llama-cpp-python is optional and not installed by `make install`, so the engine here is a stand-in with llama.cpp's
interface (`eval`, `input_ids`, `n_tokens`) running the real SmolLM2 through transformers: what is tested is the
generator's own loop, not llama.cpp's numerics (experiments/chat_accuracy.py measures those)."""

import os

import numpy as np
import pytest
import torch
from transformers import LogitsProcessorList

from retllm_utils.chat.llamacpp import LlamaCppGenerator, lora_gguf
from retllm_utils.controller import ForceThenFree, HFGenerator, RetLLMController
from retllm_utils.memory import TripleMemory
from retllm_utils.models import NgramEmbedder
from retllm_utils.prompts import chat_prompt
from retllm_utils.retllm.synthetic import fact_sentence


class _Engine:
    """llama.cpp's Llama as the generator uses it, over a transformers model; counts the tokens it evaluates."""

    def __init__(self, model):
        self.model, self.input_ids, self.n_tokens, self.fed, self.last = model, np.zeros(2048, np.intc), 0, 0, None

    @torch.no_grad()
    def eval(self, tokens):
        n = self.n_tokens
        self.input_ids[n : n + len(tokens)] = tokens
        self.n_tokens, self.fed = n + len(tokens), self.fed + len(tokens)
        ids = torch.tensor([self.input_ids[: self.n_tokens].tolist()])
        self.last = self.model(ids).logits[0, -1].float()


class _Gen(LlamaCppGenerator):
    def _logits(self):
        return self.model.last[None].clone()


@pytest.mark.model
def test_the_llama_cpp_loop_generates_hf_generators_turn_and_reuses_its_cache(smol):
    model, tok = smol
    user = "Who is employed by Pfizer?"
    call = "[MEM_READ{>>employed by>>Pfizer}:"  # forced (the base model does not know the API), then free
    prompt_ids = tok(chat_prompt(tok, user), add_special_tokens=False)["input_ids"]
    forced = tok(chat_prompt(tok, user) + call, add_special_tokens=False)["input_ids"][len(prompt_ids) :]
    turns, engine = {}, _Engine(model)
    for name in ("transformers", "llama.cpp"):
        mem = TripleMemory(embedder=NgramEmbedder(), index="flat")
        mem.write_many([("Ann Lee", "employed by", "Pfizer"), ("Bo Wu", "employed by", "Pfizer")])
        force = ForceThenFree(len(prompt_ids), forced)
        gen = (
            HFGenerator(model, tok, max_new_tokens=24, logits_processor=LogitsProcessorList([force]))
            if name == "transformers"
            else _Gen(engine, tok, max_new_tokens=24, logits_processor=[force])
        )
        ctl = RetLLMController(gen, mem, lambda u: chat_prompt(tok, u), copy_names=True, answer_form=fact_sentence)
        turns[name] = ctl.chat(user)
    hf, cpp = turns["transformers"], turns["llama.cpp"]
    assert [e["event"] for e in cpp.trace] == ["model", "read", "model"]
    assert cpp.model_text == hf.model_text and cpp.answer == hf.answer
    assert cpp.answer.startswith(("Ann Lee is employed by Pfizer.", "Bo Wu is employed by Pfizer."))
    # after the pause only the memory's reply and the answer were evaluated, not the prompt again
    total = len(tok(chat_prompt(tok, user), add_special_tokens=False)["input_ids"]) + len(
        gen._last[1][len(prompt_ids) :]
    )
    assert engine.fed <= total + 1


def test_a_converted_adapter_is_reused_until_the_adapter_is_newer(tmp_path, monkeypatch):
    monkeypatch.delenv("LLAMA_CPP_SRC", raising=False)
    weights, gguf = tmp_path / "adapter_model.safetensors", tmp_path / "adapter.gguf"
    weights.write_bytes(b"w")
    gguf.write_bytes(b"g")
    os.utime(weights, (1, 1))
    assert lora_gguf(tmp_path) == gguf  # converted after the adapter was saved: no llama.cpp source needed
    os.utime(weights, None)
    os.utime(gguf, (1, 1))
    calls = []
    import retllm_utils.chat.lora_gguf as lg

    monkeypatch.setattr(lg, "convert_peft_lora", lambda a, out, base: calls.append((a, out)) or out)
    assert lora_gguf(tmp_path) == gguf and calls == [(tmp_path, gguf)]  # a retrained adapter is converted again
