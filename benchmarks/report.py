"""Print the README's *Performance* tables from benchmarks/results/*.json (so README numbers are never typed in).

.venv/bin/python benchmarks/report.py
"""

from __future__ import annotations

import json

from benchmarks.common import RESULTS


def fmt(x: float, digits: int = 2) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.{digits}f}"


def memory_tables(mem: dict) -> None:
    print(f"Encoder {mem['embedder']}:\n")
    print(
        "| triples | index | store+index triples/s | exact p50 / p99 ms | fuzzy p50 / p99 ms | recall@1 | "
        "RSS MiB | disk MiB | reopen s | load avg |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in mem["runs"]:
        print(
            f"| {r['size']} | {r['kind']} | {fmt(r['store_index_triples_per_s'])} | "
            f"{fmt(r['exact']['p50_ms'], 3)} / {fmt(r['exact']['p99_ms'], 3)} | "
            f"{fmt(r['fuzzy']['p50_ms'], 3)} / {fmt(r['fuzzy']['p99_ms'], 3)} | {r['fuzzy']['recall_at_1']:.3f} | "
            f"{fmt(r['open_rss_mib'], 0)} | {fmt(r['disk_mib'], 0)} | {fmt(r['reopen_s'])} | "
            f"{r['loadavg_query'][0][0]:.1f} |"
        )
    enc = mem.get("encoder")
    if enc:
        print(
            f"\nEncoder ({mem['embedder']}, {enc['threads']} threads, load {enc['loadavg'][0]:.1f}): one phrase "
            f"p50 {enc['one_phrase']['p50_ms']:.1f} ms; batched {enc['batch_phrases_per_s']:.0f} phrases/s, so "
            + ", ".join(
                f"{r['size']} triples ({r['n_entities'] + r['n_relations']:,} phrases) ≈ {r['embed_s_est']:.0f} s"
                for r in mem["runs"]
                if r["kind"] == "flat"
            )
            + " of embedding."
        )
    fill = mem.get("cache_fill")
    if fill and fill.get("best_chunk"):  # the MiniLM cache (the n-gram one is instant)
        print(
            f"\nVector cache filled at {fill['phrases_per_s']:.0f} phrases/s on average ({fill['phrases']:,} phrases, "
            f"niced, threads {fill['threads']}, mean load {fill['mean_loadavg']:.1f}); fastest chunk "
            f"{fill['best_chunk']['phrases_per_s']:.0f} phrases/s at load {fill['best_chunk']['loadavg']:.1f}."
            + (
                f" 1M: {fill['phrases_missing_1M']:,} of {fill['phrases_needed_1M']:,} phrases still missing."
                if fill.get("phrases_missing_1M")
                else ""
            )
        )
    sweeps = [r for r in mem["runs"] if r.get("sweep")]
    for r in sweeps:
        pts = ", ".join(f"{p['value']}: {p['p50_ms']:.3f} ms / {p['recall_at_1']:.3f}" for p in r["sweep"])
        print(f"\nSweep at {r['size']}, {r['kind']} {r['sweep'][0]['param']} (fuzzy p50 / recall@1): {pts}")


def main() -> None:
    for name in ("memory.json", "memory_ngram.json"):
        if (RESULTS / name).exists():
            memory_tables(json.loads((RESULTS / name).read_text()))
            print()
    try:
        ctl = json.loads((RESULTS / "controller.json").read_text())
        print(
            f"\nController ({ctl['mode']}; {ctl.get('controller', 'plain')}; memory: {ctl['memory']}, "
            f"{ctl['memory_triples']:,} triples), medians of {ctl['summary_median'][0]['n']} turns; same output = "
            "turns whose calls and answer equal the first variant's:\n"
        )
        print(
            "| variant | turn | total ms | slowest turn ms | generation ms | ms per token | memory ms (encoder) | "
            "overhead ms (pause check, processors) | tokens | drafted (kept) | same output | load avg |"
        )
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in ctl["summary_median"]:
            print(
                f"| {r.get('variant', 'fp32')} | {r['turn']} | {fmt(r['total_ms'])} | "
                f"{fmt(r.get('max_total_ms', float('nan')))} | {fmt(r['generation_ms'])} | "
                f"{fmt(r['generation_ms_per_token'], 1)} | {fmt(r['memory_ms'], 1)} ({fmt(r['encoder_ms'], 1)}) | "
                f"{fmt(r['overhead_ms'], 1)} ({fmt(r['pause_check_ms'], 1)}, {fmt(r.get('processors_ms', 0.0), 1)}) | "
                f"{r['tokens']:.0f} | {r.get('drafted', 0):g} ({r.get('draft_kept', 0):g}) | "
                f"{r.get('same_output', r['n'])}/{r['n']} | {r['loadavg']:.1f} |"
            )
    except FileNotFoundError:
        pass
    for f in sorted(RESULTS.glob("chat_accuracy*.json")):
        for v, r in json.loads(f.read_text())["runs"].items():
            t = r["scores"]["all"]
            print(
                f"\nNotebook 03's test split, {v} chat path ({t['n']:.0f} examples, "
                f"{r.get('adapter', 'retllm/cpu/adapter')}, {r['seconds'] / 60:.1f} min): calls {t['api_em']:.3f}, "
                f"answers (facts) {t['facts_acc']:.3f}, invented {t['invented_rate']:.3f}; "
                f"{r['differs']} examples decode differently from notebook 03's own pass."
            )
    try:
        tr = json.loads((RESULTS / "training.json").read_text())
        s = {x["labels"]: x for x in tr["summary"]}
        print(
            f"\nLoRA SFT ({tr['steps']} steps × {tr['batch']} examples, {tr['tokens_per_run']:,} tokens, "
            f"{tr['threads']} threads): span masks {s['span masks']['tokens_per_s_median']:.0f} tokens/s "
            f"(runs {s['span masks']['tokens_per_s_min']:.0f}–{s['span masks']['tokens_per_s_max']:.0f}), all tokens "
            f"{s['all tokens']['tokens_per_s_median']:.0f} tokens/s (runs {s['all tokens']['tokens_per_s_min']:.0f}–"
            f"{s['all tokens']['tokens_per_s_max']:.0f}); ratio {tr['mask_over_nomask_speed']:.3f}; load "
            f"{min(r['loadavg'] for r in tr['runs']):.1f}–{max(r['loadavg'] for r in tr['runs']):.1f}."
        )
    except FileNotFoundError:
        pass


if __name__ == "__main__":
    main()
