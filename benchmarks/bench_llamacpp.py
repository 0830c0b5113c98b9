"""Per-token latency of llama.cpp over the GGUF the kit ships, beside transformers on the same model (base, no adapter).

    pip install llama-cpp-python      # no wheel on PyPI for Linux x86-64: builds llama.cpp (4.6 min on 2 cores here)
    .venv/bin/python benchmarks/bench_llamacpp.py            # -> benchmarks/results/llamacpp.json

Raw decoding speed of the two engines, without the adapter or the controller: bench_controller.py's llama.cpp
variant times chat turns on `retllm_utils.chat.llamacpp` (the adapter converted to GGUF, the kit's pauses and
processors).
Both engines decode greedily from the same chat prompts (user turns of the synthetic test split); llama.cpp reads
the 4-bit (Q4_1) weights as they are, transformers the same weights dequantised to fp32, so outputs may differ.
"""

from __future__ import annotations

import argparse
import time

from benchmarks.common import machine, save_result, set_threads, table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=4, help="user turns of the test split (half statements)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    a = ap.parse_args()
    try:
        import llama_cpp
    except ImportError:
        raise SystemExit("llama-cpp-python is not installed: pip install llama-cpp-python (builds llama.cpp)") from None
    import torch

    from retllm_utils.models import gguf_path, load_model
    from retllm_utils.prompts import chat_prompt, end_token
    from retllm_utils.retllm.synthetic import load_synthetic

    set_threads(a.threads)
    model, tok = load_model(device="cpu")
    end = tok.convert_tokens_to_ids(end_token(tok))
    llm = llama_cpp.Llama(model_path=str(gguf_path()), n_threads=a.threads, n_ctx=1024, verbose=False)
    test = load_synthetic("cpu")["test"]
    users = [r["user"] for r in test if r["kind"] == "write"][: a.prompts // 2]
    users += [r["user"] for r in test if r["kind"] == "read"][: a.prompts - len(users)]
    rows = []
    for user in users:
        ids = tok(chat_prompt(tok, user), add_special_tokens=False)["input_ids"]
        lids = llm.tokenize(chat_prompt(tok, user).encode(), add_bos=False, special=True)
        out: dict[str, list[int]] = {}
        ms: dict[str, float] = {}
        for _ in range(2):  # the first pass warms up; the second is timed
            t0, first, new = time.perf_counter(), None, []
            for t in llm.generate(lids, temp=0.0, top_k=1, reset=True):
                first = first or time.perf_counter()
                new.append(t)
                if t == end or len(new) >= a.max_new_tokens:
                    break
            ms["llama.cpp"] = (time.perf_counter() - first) * 1e3 / max(len(new) - 1, 1)
            out["llama.cpp"] = new
            with torch.no_grad():
                x = torch.tensor([ids])
                t0 = time.perf_counter()
                model(x, use_cache=True)  # one prefill, timed to subtract it from generate's time
                t1 = time.perf_counter()
                g = model.generate(
                    x, max_new_tokens=a.max_new_tokens, do_sample=False, eos_token_id=end, pad_token_id=end
                )[0, len(ids) :].tolist()
                t2 = time.perf_counter()
            # per token after the first: generate's time less one prefill, over the tokens after the first
            ms["transformers fp32"] = ((t2 - t1) - (t1 - t0)) * 1e3 / max(len(g) - 1, 1)
            out["transformers fp32"] = g
        rows.append(
            {
                "user": user[:40],
                "prompt tokens": len(ids),
                "same tokenization": lids == ids,
                "llama.cpp ms/token": ms["llama.cpp"],
                "transformers fp32 ms/token": ms["transformers fp32"],
                "llama.cpp tokens": len(out["llama.cpp"]),
                "same output": out["llama.cpp"] == out["transformers fp32"],
            }
        )
        print(table(rows[-1:]), flush=True)
    save_result(
        "llamacpp",
        {
            "benchmark": "llamacpp",
            "llama_cpp_python": llama_cpp.__version__,
            "gguf": gguf_path().name,
            "threads": a.threads,
            "rows": rows,
            "machine": machine(),
            "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
    )
    print(table(rows))


if __name__ == "__main__":
    main()
