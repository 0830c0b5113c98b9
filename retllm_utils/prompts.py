"""One prompt format for RET-LLM training and inference: the model's own chat template (notebooks 02–03, RET-LLM §3.3).

A RET-LLM example is a user turn and an assistant turn. The assistant turn is
``api + reply + answer + end``: `api` is what the model generates (write calls, or a read query ending
in ':'), `reply` is what the memory appends (``{..};{..}]``, never supervised), `answer` is the sentence
the user sees. Training and the controller both build text with `chat_prompt`, so token boundaries at
inference are the ones seen in training.
"""

from __future__ import annotations

from typing import Any, Mapping

__all__ = ["chat_prompt", "end_token", "retllm_example_text", "ALPACA_TEMPLATE"]

# For base models with no chat template (e.g. an Alpaca-7B checkpoint), the Alpaca instruction format.
ALPACA_TEMPLATE = (
    "Below is an instruction that describes a task. Write a response that appropriately completes the "
    "request.\n\n### Instruction:\n{user}\n\n### Response:\n"
)


def chat_prompt(tokenizer: Any, user_text: str, system: str | None = None) -> str:
    """The text the assistant continues from; the chat template if the tokenizer has one."""
    if getattr(tokenizer, "chat_template", None):
        msgs = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user_text}]
        return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return ALPACA_TEMPLATE.format(user=(system + "\n\n" if system else "") + user_text)


def end_token(tokenizer: Any) -> str:
    """The token that ends an assistant turn: '<|im_end|>' for ChatML templates, else EOS."""
    template = getattr(tokenizer, "chat_template", None) or ""
    if "<|im_end|>" in template:
        return "<|im_end|>"
    return tokenizer.eos_token


def retllm_example_text(tokenizer: Any, ex: Mapping[str, str]) -> tuple[str, list[tuple[int, int]]]:
    """Full training text and the character spans to supervise: the API call, and the answer + end token.

    `ex` has string fields `user`, `api`, `reply` (may be ''), `answer` (may be '').
    """
    prompt = chat_prompt(tokenizer, ex["user"])
    end = end_token(tokenizer)
    text = prompt + ex["api"]
    spans = [(len(prompt), len(text))]
    text += ex.get("reply", "")
    ans_start = len(text)
    text += ex.get("answer", "") + end
    spans.append((ans_start, len(text)))
    return text, [s for s in spans if s[1] > s[0]]
