"""The benchmarks package: its workload generator (seeded, distinct, fair), where its outputs go, its figures, and
the quality experiments beside it (experiments/)."""

import ast
import json
import subprocess
import sys

import pytest

from benchmarks import common, plots
from benchmarks.phrases import make_triples
from benchmarks.workload import exact_queries, phrases_of, workload
from retllm_utils.paths import ROOT


def test_same_seed_same_triples_other_seed_other_triples():
    assert make_triples(2000, seed=3) == make_triples(2000, seed=3)
    assert make_triples(2000, seed=3) != make_triples(2000, seed=4)


def test_triples_are_distinct_and_entities_recur():
    t = make_triples(5000, seed=0)
    assert len(set(t)) == 5000 and all(s != o for s, _, o in t)
    ents, rels = phrases_of(t)
    assert len(ents) < 2 * len(t) and len(rels) > 5  # entities shared between triples


def test_fuzzy_queries_are_near_misses_not_stored_and_workload_is_deterministic():
    t, exact, fuzzy, needed = workload(3000, seed=1, n_queries=200)
    assert (t, exact, fuzzy, needed) == workload(3000, seed=1, n_queries=200)
    stored = set(phrases_of(t)[0])
    for q, src in fuzzy:
        term = q[0] or q[2]
        assert term not in stored and src in stored and term != src
        assert set(q) - {term, ""} <= set(phrases_of(t)[1])
    for q in exact:
        assert all(x == "" or x in stored or x in phrases_of(t)[1] for x in q)


def test_smaller_query_sets_are_prefixes():
    t = make_triples(1000, seed=0)
    assert exact_queries(t, 50, 0) == exact_queries(t, 100, 0)[:50]


def test_outputs_stay_in_the_benchmarks_folder():
    assert common.RESULTS == ROOT / "benchmarks" / "results" and common.FIGURES == ROOT / "benchmarks" / "figures"
    assert not list((ROOT / "figures").glob("08_*.png")), "benchmark figures belong in benchmarks/figures/"
    for name in ("memory", "controller", "training"):
        assert (common.RESULTS / f"{name}.json").is_file() and (
            common.FIGURES / f"08_{name.replace('memory', 'memory_scaling')}.png"
        ).is_file()


def test_docstrings_name_where_the_files_are_written():
    # a script writes to benchmarks/results/ or experiments/results/, never a bare results/ (the notebooks' folder),
    # except write_scaling.py, whose summary and figure are notebook 05's (results/05_*, figures/05_*)
    for path in [*(ROOT / "benchmarks").glob("*.py"), *(ROOT / "experiments").glob("*.py")]:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        for arrow in [line.split("# ->", 1)[1] for line in doc.splitlines() if "# ->" in line]:
            own = path.name == "write_scaling.py" and "results/05_write_scaling.json" in arrow
            kit = "benchmarks/results/" in arrow or "experiments/results/" in arrow
            assert own or kit or "results/" not in arrow, f"{path.name}: {arrow.strip()}"


@pytest.mark.parametrize("draw", [plots.latency_vs_size, plots.recall_vs_latency])
def test_notebook_08s_memory_figures_draw_from_the_committed_results(draw):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mems = plots.load_memory()
    assert [m["embedder"] for m in mems] == ["all-minilm-l6-v2", "ngram-384"]
    fig = draw(mems)
    assert len(fig.axes) == 2 and all(ax.lines for ax in fig.axes)
    plt.close(fig)


def test_quality_experiments_keep_their_results_beside_them():
    results = ROOT / "experiments" / "results"
    for name in (
        "write_levers",
        "write_levers_180x2",
        "chat_accuracy",
        "chat_accuracy_llamacpp",
        "alias_rule",
        "open_relations",
    ):
        json.loads((results / f"{name}.json").read_text())
    for script in (
        "chat_accuracy.py",
        "write_levers.py",
        "alias_rule.py",
        "open_relations.py",
    ):  # they import from the kit and benchmarks
        done = subprocess.run([sys.executable, str(ROOT / "experiments" / script), "--help"], capture_output=True)
        assert done.returncode == 0, done.stderr.decode()[-2000:]
