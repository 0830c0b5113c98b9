"""Every training lever tried for RET-LLM's wide build, side by side against the kit's goals, from the saved JSONs.

`open_relations.py` measured each lever in its own section of experiments/README.md, beside the runs it was compared
with. This puts them in one table and one figure: each lever's adapters (training seeds, or a soup), all decoded with
notebook 03's rules on xllamacpp (`--notebook-03`), so the model's own writes (the calls, before any write rule)
compare across every run. Answers also depend on the read rules and the answers' fact order, so they are shown only
for runs decoded exactly as notebook 03 decodes (`either_role`, `read_names_from_user`, the model's fact order).
Trains and decodes nothing.

    .venv/bin/python experiments/retllm_levers.py   # prints the table, -> figures/retllm_levers.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from open_relations import RESULTS, _synthetic_statements

FIGURE = Path(__file__).resolve().parents[1] / "figures" / "retllm_levers.png"
NEW = "with open relations"  # the pass name of a run's own adapter; notebook 02's is "committed (notebook 02)"
# lever -> its adapters, one per training seed (or one soup): (results file under experiments/results, pass name)
LEVER_RUNS: dict[str, list[tuple[str, str]]] = {
    "lr 1e-3 (notebook 02's former recipe)": [
        ("open_relations_soup", "committed (notebook 02)"),
        ("open_relations_soup_seed1", NEW),
        ("open_relations_soup_seed2", NEW),
    ],
    "question verbs balanced": [("open_relations_balanced", NEW), ("open_relations_balanced_seed1", NEW)],
    "more questions (1,134)": [
        ("open_relations_questions1134", NEW),
        ("open_relations_questions1134_seed1_in_order", NEW),
        ("open_relations_questions1134_seed2_in_order", NEW),
    ],
    "2,100 wide rows": [("open_relations_ntrain2100_seed1", NEW)],
    "two epochs": [("open_relations_epochs2", NEW), ("open_relations_epochs2_seed1", NEW)],
    "NEFTune (alpha 5)": [("open_relations_neftune5", NEW), ("open_relations_neftune5_seed1_in_order", NEW)],
    "LoRA rank 64": [
        ("open_relations_rank64_in_order", NEW),
        ("open_relations_rank64_seed1_in_order", NEW),
        ("open_relations_rank64_seed2_in_order", NEW),
    ],
    "multi-fact shapes twice": [("open_relations_multi2", NEW), ("open_relations_multi2_seed1", NEW)],
    "the paper's loss mask, lr 1e-3": [
        ("open_relations_masked", NEW),
        ("open_relations_masked_seed1", NEW),
        ("open_relations_masked_seed2", NEW),
    ],
    "lr 2e-3 (notebook 02's recipe since)": [
        ("open_relations_lr2e-3", NEW),
        ("open_relations_lr2e-3_seed1", NEW),
        ("open_relations_lr2e-3_seed2", NEW),
    ],
    "the paper's loss mask, lr 2e-3": [
        ("open_relations_masked_lr2e-3", NEW),
        ("open_relations_masked_lr2e-3_seed1", NEW),
        ("open_relations_masked_lr2e-3_seed2", NEW),
    ],
    "soup, seeds 0 and 1": [("open_relations_soup", NEW)],
    "soup, seeds 0, 1 and 2": [("open_relations_soup3", NEW)],
    "soup, multi-fact twice": [("open_relations_multi2_soup", NEW)],
    "soup, loss mask": [("open_relations_masked_soup3", NEW)],
    "soup, both losses": [("open_relations_soup_losses", NEW)],
}
# the kit's goals for these numbers (RET-LLM): test split >= 0.98 on every query type, paraphrase writes
# >= 0.90 and answers >= 0.95, held-out relations' writes >= 0.70 and read-back answers >= 0.80
GOALS = {"test": 0.98, "paraphrase": 0.90, "first fact": 0.70, "read back": 0.80, "test answers": 0.98}
GOALS["paraphrase answers"] = 0.95


def _get(d: Any, *path: str) -> Any:
    for k in path:
        d = d.get(k) if isinstance(d, dict) else None
    return d


def as_notebook_03(result: dict[str, Any]) -> bool:
    """Whether a run's reads and answers were decoded as notebook 03 decodes them (not only its writes)."""
    return bool(
        result.get("notebook_03")
        and result.get("either_role")
        and result.get("read_names_from_user")
        and result.get("facts_in_order") is False
    )


def adapter_scores(result: dict[str, Any], name: str) -> dict[str, Any]:
    """One adapter's numbers: statements by calls (count, of n), held-out open statements, answers (or None)."""
    p = result["passes"][name]
    held = _get(p, "held-out relations", "per_relation_write_read_back", "all") or {}
    answers = as_notebook_03(result)
    return {
        "test": _synthetic_statements(p, "test"),
        "paraphrase": _synthetic_statements(p, "paraphrase"),
        "first fact": held.get("write_exact"),
        "read back": held.get("answer_ok"),
        "test answers": _get(p, "test", "scores", "all", "facts_acc") if answers else None,
        "paraphrase answers": _get(p, "paraphrase", "scores", "all", "facts_acc") if answers else None,
        # the JSON's training record is its own adapter's (NEW); a soup trained nothing
        "minutes": result["train"]["train_seconds"] / 60 if name == NEW and not result["train"].get("soup") else None,
    }


def lever_scores(runs: dict[str, list[tuple[str, str]]] = LEVER_RUNS) -> dict[str, list[dict[str, Any]]]:
    """Each lever's adapters' numbers, from the JSONs present (a lever with none is left out)."""
    out = {}
    for lever, members in runs.items():
        got = [
            adapter_scores(json.loads((RESULTS / f"{f}.json").read_text()), name)
            for f, name in members
            if (RESULTS / f"{f}.json").is_file()
        ]
        if got:
            out[lever] = got
    return out


def _cell(values: list[Any], count: bool) -> str:
    """Mean (and range over several adapters) of a column; statements as counts "k/n"; "of m adapters" where only
    some have the number."""
    vals = [v for v in values if v is not None]
    if not vals:
        return "–"
    some = f", {len(vals)} of {len(values)} adapters" if len(vals) < len(values) else ""
    if count:
        ks, n = [k for k, _ in vals], vals[0][1]
        mean = f"{np.mean(ks):.1f}/{n}" if len(ks) > 1 else f"{ks[0]}/{n}"
        return mean + (f" ({min(ks)}–{max(ks)})" if len(ks) > 1 else "")
    spread = f"{min(vals):.3f}–{max(vals):.3f}" if len(vals) > 1 else ""
    inner = ", ".join(x for x in (spread, some.removeprefix(", ")) if x)
    return f"{np.mean(vals):.3f}" + (f" ({inner})" if inner else "")


def markdown(scores: dict[str, list[dict[str, Any]]]) -> str:
    """experiments/README.md's table: per lever the mean over its adapters and, for several, their range."""
    cols = [
        ("test statements by calls", "test", True),
        ("paraphrase statements by calls", "paraphrase", True),
        ("held-out open: first fact exact", "first fact", False),
        ("held-out open: read back", "read back", False),
        ("test answers", "test answers", False),
        ("paraphrase answers", "paraphrase answers", False),
    ]
    head = ["lever", "adapters", "training min", *(c for c, _, _ in cols)]
    out = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for lever, adapters in scores.items():
        mins = [a["minutes"] for a in adapters if a["minutes"] is not None]
        cells = [lever, str(len(adapters)), f"{np.mean(mins):.1f}" if mins else "0 (soup)"]
        cells += [_cell([a[k] for a in adapters], count) for _, k, count in cols]
        out.append("| " + " | ".join(cells) + " |")
    goal = ["the kit's goal", "", "≤ ~30"]
    of = {"test": 76, "paraphrase": 30}  # the statements' goals as counts
    goal += [f"≥ {GOALS[k] * of[k]:.1f}" if count else f"≥ {GOALS[k]:.2f}" for _, k, count in cols]
    out.append("| " + " | ".join(goal) + " |")
    return "\n".join(out)


def trained_adapters(scores: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Every trained adapter (soups left out: they are means of the others)."""
    return [a for lever, adapters in scores.items() if not lever.startswith("soup") for a in adapters]


def correlations(scores: dict[str, list[dict[str, Any]]]) -> dict[str, float]:
    """Over the trained adapters: how the trained shapes' statements go with the held-out shapes' and relations'."""
    ads = trained_adapters(scores)
    test = [a["test"][0] for a in ads]
    para = [a["paraphrase"][0] for a in ads]
    first = [a["first fact"] for a in ads]
    return {
        "adapters": len(ads),
        "test ~ paraphrase": float(np.corrcoef(test, para)[0, 1]),
        "test ~ held-out first fact": float(np.corrcoef(test, first)[0, 1]),
    }


def figure(scores: dict[str, list[dict[str, Any]]], path: Path = FIGURE) -> Path:
    """Two panels: the trained shapes' statements against the paraphrase split's and the held-out open relations'."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 6.2), sharex=True)
    markers, colors = "o^sDvP*Xh<>p8d+", plt.get_cmap("tab20").colors
    for i, (lever, adapters) in enumerate(scores.items()):
        x = [a["test"][0] for a in adapters]
        style = dict(marker=markers[i % len(markers)], s=45, color=colors[(2 * i) % 20 + (i >= 10)], label=lever)
        if i == 0:  # notebook 02's former recipe, the baseline every lever was measured against
            style.update(color="black", s=90, zorder=3)
        axes[0].scatter(x, [a["paraphrase"][0] for a in adapters], **style)
        axes[1].scatter(x, [a["first fact"] * 48 for a in adapters], **style)
    for ax, goal, ylabel in (
        (axes[0], GOALS["paraphrase"] * 30, "paraphrase statements written exactly (of 30, held-out shapes)"),
        (axes[1], GOALS["first fact"] * 48, "held-out open statements, first fact exact (of 48)"),
    ):
        ax.axhline(goal, color="grey", ls="--", lw=1)
        ax.axvline(GOALS["test"] * 76, color="grey", ls=":", lw=1)
        ax.set_xlabel("test statements of the five relations written exactly (of 76, trained shapes)")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    title = "RET-LLM wide build: every lever's adapters (dashed: the goal; dotted: the test split's goal)"
    fig.suptitle(title, fontsize=11)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--no-figure", action="store_true", help="print the table only")
    a = ap.parse_args()
    scores = lever_scores()
    print(markdown(scores))
    c = correlations(scores)
    print(
        f"\nover {c['adapters']} trained adapters (soups left out), Pearson r: test ~ paraphrase statements "
        f"{c['test ~ paraphrase']:.2f}, test statements ~ held-out first facts {c['test ~ held-out first fact']:.2f}"
    )
    if not a.no_figure:
        print("->", figure(scores).relative_to(FIGURE.parents[1]))


if __name__ == "__main__":
    main()
