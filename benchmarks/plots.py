"""Notebook 08's memory figures, drawn from the memory benchmark's results: latency vs size, recall vs latency.

    .venv/bin/python benchmarks/plots.py   # -> benchmarks/figures/08_latency_vs_size.png, 08_recall_vs_latency.png

From benchmarks/results/memory.json (MiniLM, solid lines) and memory_ngram.json (the n-gram encoder, dotted). Notebook
08 shows the committed figures (`show`); on the smoke profile it draws its own measurements with the same functions.
"""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.common import FIGURES, MEMORY_GOALS, RESULTS

COLORS = {"flat": "tab:gray", "lsh": "tab:orange", "hnsw": "tab:blue"}
MEMORY_FILES = ("memory.json", "memory_ngram.json")  # the default encoder first
LINES = ("-", ":")  # one line style per encoder, in that order


def load_memory(results: Path = RESULTS) -> list[dict]:
    """The memory benchmark's results, one dict per encoder (those measured)."""
    return [json.loads((results / f).read_text()) for f in MEMORY_FILES if (results / f).exists()]


def memory_runs(mems: list[dict]) -> list[dict]:
    """Every (size, index kind) record of every encoder, each with its `encoder` name."""
    return [{**r, "encoder": m["embedder"]} for m in mems for r in m["runs"]]


def latency_vs_size(mems: list[dict]):
    """Fuzzy (left; band: p50 to p99 of the first encoder) and exact (right) lookup p50 against memory size."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FormatStrFormatter, NullFormatter

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), dpi=100, sharex=True)
    for mem, line in zip(mems, LINES):
        for kind, color in COLORS.items():
            rs = sorted((r for r in mem["runs"] if r["kind"] == kind), key=lambda r: r["n_triples"])
            if not rs:
                continue
            n = [r["n_triples"] for r in rs]
            for ax, q in zip(axes, ("fuzzy", "exact")):
                p50, p99 = [r[q]["p50_ms"] for r in rs], [r[q]["p99_ms"] for r in rs]
                ax.plot(n, p50, "o" + line, color=color, ms=4, label=f"{kind} · {mem['embedder']}")
                if line == LINES[0] and q == "fuzzy":
                    ax.fill_between(n, p50, p99, color=color, alpha=0.1)
    axes[0].axhline(MEMORY_GOALS["fuzzy_p50_ms"], color="k", lw=0.6, ls=":")
    axes[1].axhline(MEMORY_GOALS["exact_p50_ms"], color="k", lw=0.6, ls=":")
    axes[0].set(yscale="log", title="fuzzy lookup (band: p50 to p99), log scale", ylabel="ms per read (p50)")
    axes[0].yaxis.set_major_formatter(FormatStrFormatter("%g"))
    axes[0].yaxis.set_minor_formatter(NullFormatter())
    axes[1].set(ylim=(0, None), title="exact lookup (dictionary hit, then SQL), linear scale")
    for ax in axes:
        ax.set(xscale="log", xlabel="triples in memory")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=6, ncol=2)
    fig.tight_layout()
    return fig


def recall_vs_latency(mems: list[dict]):
    """The efSearch and nbits sweeps at each encoder's largest memory, one panel per encoder."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(mems), figsize=(5.2 * len(mems), 4), dpi=100, sharey=True, squeeze=False)
    for ax, mem in zip(axes[0], mems):
        top = max(r["n_triples"] for r in mem["runs"])
        at = [r for r in mem["runs"] if r["n_triples"] == top]
        for r in at:
            pts = r.get("sweep") or []
            if pts:
                x, y = [p["p50_ms"] for p in pts], [p["recall_at_1"] for p in pts]
                ax.plot(x, y, "o-", color=COLORS[r["kind"]], ms=4, label=f"{r['kind']}, {pts[0]['param']}")
                right = r["kind"] == "lsh"  # lsh's labels right of its points, hnsw's left: the curves interleave
                for p in pts:
                    ax.annotate(
                        str(p["value"]),
                        (p["p50_ms"], p["recall_at_1"]),
                        fontsize=7,
                        xytext=(5, -3) if right else (-5, -3),
                        ha="left" if right else "right",
                        textcoords="offset points",
                    )
            if r["kind"] == "flat":
                ax.plot(r["fuzzy"]["p50_ms"], r["fuzzy"]["recall_at_1"], "s", color=COLORS["flat"], label="flat")
        ax.axhline(MEMORY_GOALS["fuzzy_recall_at_1"], color="k", lw=0.6, ls=":")
        ax.axvline(MEMORY_GOALS["fuzzy_p50_ms"], color="k", lw=0.6, ls=":")
        ax.set(xscale="log", xlabel="fuzzy lookup p50 (ms)", title=f"{at[0]['size']} triples · {mem['embedder']}")
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("recall@1 vs exact search (goal: top left)")
    fig.tight_layout()
    return fig


def show(name: str) -> None:
    """Display the committed benchmarks/figures/NAME in a notebook."""
    from IPython.display import Image, display

    display(Image(filename=str(FIGURES / name)))


def main() -> None:
    import matplotlib

    matplotlib.use("Agg")
    mems = load_memory()
    FIGURES.mkdir(exist_ok=True)
    for name, draw in (("08_latency_vs_size.png", latency_vs_size), ("08_recall_vs_latency.png", recall_vs_latency)):
        draw(mems).savefig(FIGURES / name)
        print("figure:", FIGURES.relative_to(FIGURES.parents[1]) / name)


if __name__ == "__main__":
    main()
