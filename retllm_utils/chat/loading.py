"""Notebook 09's chat models: RET-LLM controllers over notebook 02's adapter (or the zero-shot base model alone) and
MemLLM's controller over notebook 05's two adapters. Each loader returns what it loaded and a message saying what it
found, or which notebook to run first.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import torch

from ..controller import HFGenerator, RetLLMController
from ..memllm.controller import MemLLMController
from ..models import for_chat, load_model
from ..paths import ROOT, run_dir
from ..prompts import chat_prompt

__all__ = ["chat_engine", "cpp_generator", "load_retllm", "load_memllm"]

NO_RETLLM = """!! no RET-LLM adapter in {where}: run notebook 02 with profile={profile!r}
   first. Until then only the zero-shot base model chats (it cannot use the memory).
   (its ablation=True trains the whole-sequence adapter; loss='paper' uses the masked one it always trains)"""
NO_MEMLLM = """!! no MemLLM adapters in {where}: run notebook 05 with
   profile={profile!r} first. Until then the MemLLM tab is off."""


def _shown(path: Path) -> str:
    """A path as the notebook prints it: relative to the kit, never the machine's own folders."""
    return os.path.relpath(path, ROOT)


def chat_engine(engine: str = "auto") -> str:
    """The engine `load_retllm` runs: "auto" is xllamacpp on a machine without CUDA where its library opens (6-7x
    faster per generated token than transformers fp32 on a 2-core AMD EPYC, about 3x on an Intel Xeon:
    benchmarks/README.md), else transformers; an unknown name is refused."""
    if engine not in ("auto", "transformers", "xllamacpp", "llama.cpp"):
        raise ValueError(f"engine must be 'auto', 'transformers', 'xllamacpp' or 'llama.cpp'; got {engine!r}")
    if engine != "auto":
        return engine
    from .xllama import available

    return "xllamacpp" if not torch.cuda.is_available() and available() else "transformers"


def cpp_generator(
    engine: str,
    adapter: Path,
    tokenizer: Any,
    llama_cpp_src: str | None,
    threads: int,
    max_new_tokens: int,
    *,
    merged: bool = True,
    draft: int = 16,
) -> HFGenerator:
    """A llama.cpp generator for the trained adapter. "xllamacpp" (the prebuilt library): the model with `adapter`
    merged into its weights, Q8_0 (`llamacpp.merged_gguf`; its write and read turns ran faster than Q4_1 with the
    LoRA applied at run time), or with `merged=False` the shipped Q4_1 GGUF with `adapter` converted to
    a GGUF LoRA (`llamacpp.lora_gguf`), as llama-cpp-python ("llama.cpp") always runs it. xllamacpp drafts up to
    `draft` tokens from what the model call has generated (`XLlamaGenerator(draft_from="output")`: the model repeats
    its write calls, and a repeat is then checked in one batch); 0 decodes one token at a time."""
    from .llamacpp import LlamaCppGenerator, load_llama, lora_gguf, merged_gguf

    if engine == "xllamacpp":
        from .xllama import XLlamaGenerator, load_xllama

        llm = (
            load_xllama(threads=threads, model_path=merged_gguf(adapter))
            if merged
            else load_xllama(lora_gguf(adapter, llama_cpp_src), threads=threads)
        )
        return XLlamaGenerator(llm, tokenizer, max_new_tokens=max_new_tokens, draft=draft, draft_from="output")
    lora = lora_gguf(adapter, llama_cpp_src)
    return LlamaCppGenerator(load_llama(lora, threads=threads), tokenizer, max_new_tokens=max_new_tokens)


def load_retllm(
    model_id: str,
    profile: str,
    loss: str,
    *,
    dtype: Any,
    max_new_tokens: int,
    engine: str = "auto",
    llama_cpp_src: str | None = None,
    answer_form: Callable | None = None,
    no_answer: str | None = None,
) -> tuple[dict[str, RetLLMController], Any, str]:
    """(controllers by name, the tokenizer, a message): "trained" when notebook 02 saved the adapter of `loss`
    ("whole_sequence" or "paper") for `profile` (names copied from the message or the memory, answers held to the
    reply's facts in `answer_form`'s words and an empty reply answered `no_answer`, or, for a relation it has no words
    for, to the reply's and the user's names, as notebook 03 scores it), and "base" (zero-shot); their memory is set
    by `ChatSession`.

    Both run in `dtype` with the adapter merged (`models.for_chat`), or the trained one on llama.cpp
    (`engine="llama.cpp"`: the shipped 4-bit GGUF with the adapter converted, `chat.llamacpp`; `engine="xllamacpp"`:
    the model with the adapter merged into its weights, Q8_0, on the prebuilt llama.cpp of PyPI's xllamacpp wheel, no
    compiler needed, `cpp_generator`; "auto":
    `chat_engine`'s choice).
    """
    engine = chat_engine(engine)
    adapter = run_dir("retllm", profile) / {"whole_sequence": "adapter_nomask", "paper": "adapter"}[loss]
    base, tokenizer = load_model(model_id)
    base = for_chat(base, dtype=dtype)
    controllers = {"base": RetLLMController.from_model(base, tokenizer, None, max_new_tokens=max_new_tokens)}
    if not (adapter / "adapter_config.json").is_file():
        return controllers, tokenizer, NO_RETLLM.format(where=_shown(adapter), profile=profile)
    if engine in ("llama.cpp", "xllamacpp"):
        threads = torch.get_num_threads()
        generator: HFGenerator = cpp_generator(engine, adapter, tokenizer, llama_cpp_src, threads, max_new_tokens)
    else:
        from peft import PeftModel

        trained = for_chat(PeftModel.from_pretrained(load_model(model_id)[0], str(adapter)), dtype=dtype)
        generator = HFGenerator(trained, tokenizer, max_new_tokens=max_new_tokens)
    from ..retllm.synthetic import company_names, relation_vocabulary

    trained_ctl = RetLLMController(
        generator,
        None,
        lambda u: chat_prompt(tokenizer, u),
        copy_names=True,
        known_names=company_names(),  # names a call may copy when the user misspells one
        relation_names=relation_vocabulary(),  # a write's relation: the five relations' names or the user's words
        # a read's relation in other words: the stored one sharing a content word; a read that then finds nothing,
        # its relation stored nowhere and not one of the five names: again, the likeliest call among its entity's
        # stored relations or none
        read_relations="likely",
        answer_form=answer_form,
        no_answer=no_answer,
        facts_in_order=True,  # the reply's facts in its order, none skipped, as training answers state them
        either_order=True,  # "How are Ann and SAP connected?" read as (SAP, , Ann) still finds (Ann, employed by, SAP)
        either_role=True,  # "Who is tied to IKEA?" read as (IKEA, , ?) asks (?, , IKEA) when IKEA is only an object
        coordinated_writes=True,  # "Ann Lee and Bo Wu work at BMW" with only Ann Lee written: Bo Wu too, as Ann Lee
        # "Cisco, which Ann Lee runs, has Bo Wu as a shareholder" with only Ann Lee written: Bo Wu's likeliest call
        named_writes=True,
        # before both, while the model writes: after a write, the next call writes the statement's first name no write
        # holds, so a list is written in order and the turn does not end before its last name
        write_every_name=True,
        # a free answer (a relation `answer_form` has no words for): its names the reply's or the user's, the reply's
        # paired as the reply pairs them, and it ends at a sentence said twice, as notebook 03 scores it
        answer_names=True,
        stop_repeated_sentences=True,
    )
    controllers = {"trained": trained_ctl, "base": controllers["base"]}
    return controllers, tokenizer, f"RET-LLM adapter: {_shown(adapter)} on {engine}"


def load_memllm(model_id: str, tokenizer: Any, profile: str, memory: Any) -> tuple[MemLLMController | None, str]:
    """(MemLLM's controller over `memory`, a message): notebook 05's "write" and "read" adapters for `profile` on one
    base model, switched per call; None where either is missing."""
    dirs = {k: run_dir("memllm", profile) / k for k in ("write", "read")}
    where = _shown(dirs["write"].parent)
    if not all((d / "adapter_config.json").is_file() for d in dirs.values()):
        return None, NO_MEMLLM.format(where=where, profile=profile)
    from peft import PeftModel

    model = PeftModel.from_pretrained(load_model(model_id)[0], str(dirs["write"]), adapter_name="write")
    model.load_adapter(str(dirs["read"]), adapter_name="read")
    memllm = MemLLMController.from_model(model.eval(), tokenizer, memory, max_new_tokens=40)
    return memllm, f"MemLLM adapters: {where}/{{write,read}}"
