"""Shared fixtures: the real offline SmolLM2 model (loaded once per session) and the Re-DocRED test split."""

import pytest


@pytest.fixture(scope="session")
def smol():
    """(model, tokenizer) of the default offline model; the first run converts the GGUF (~40 s), then < 2 s."""
    from retllm_utils.models import load_model

    model, tokenizer = load_model("smollm2-135m-instruct", device="cpu")
    model.eval()
    return model, tokenizer


@pytest.fixture(scope="module")
def corpus():
    """(documents, relation names) of the bundled Re-DocRED test split."""
    from retllm_utils.memllm.docred import load_docred, relation_names
    from retllm_utils.paths import DATA

    docs = load_docred(DATA / "redocred" / "test_revised.json")
    return docs, relation_names(DATA / "redocred" / "rel_info.json")
