"""Shared fixtures: the real offline SmolLM2 model, loaded once per test session (cached HF checkpoint)."""

import pytest


@pytest.fixture(scope="session")
def smol():
    """(model, tokenizer) of the default offline model; the first run converts the GGUF (~40 s), then < 2 s."""
    from retllm_utils.models import load_model

    model, tokenizer = load_model("smollm2-135m-instruct", device="cpu")
    model.eval()
    return model, tokenizer
