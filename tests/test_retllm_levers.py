"""The levers summary: every run it names was decoded with notebook 03's rules, its table is the one in
experiments/README.md, answers appear only for runs decoded as notebook 03 decodes them, and the figure is drawn."""

import importlib.util
import json

import pytest

from retllm_utils.paths import ROOT

EXPERIMENTS = ROOT / "experiments"


@pytest.fixture(scope="module")
def levers():
    import sys

    sys.path.insert(0, str(EXPERIMENTS))  # retllm_levers imports open_relations as its script does
    try:
        spec = importlib.util.spec_from_file_location("retllm_levers", EXPERIMENTS / "retllm_levers.py")
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.path.remove(str(EXPERIMENTS))


def test_every_run_named_is_committed_and_decoded_with_notebook_03s_rules(levers):
    for lever, members in levers.LEVER_RUNS.items():
        for file, name in members:
            result = json.loads((EXPERIMENTS / "results" / f"{file}.json").read_text())
            assert result["notebook_03"] and result["copy_relations"] and result["five_relations"], (lever, file)
            assert name in result["passes"], (lever, file)


def test_the_readme_table_is_the_committed_results(levers):
    assert levers.markdown(levers.lever_scores()) in (EXPERIMENTS / "README.md").read_text()


def test_answers_only_for_runs_decoded_as_notebook_03(levers):
    in_order = json.loads((EXPERIMENTS / "results" / "open_relations_rank64_in_order.json").read_text())
    as_03 = json.loads((EXPERIMENTS / "results" / "open_relations_masked.json").read_text())
    assert not levers.as_notebook_03(in_order) and levers.as_notebook_03(as_03)
    assert levers.adapter_scores(in_order, levers.NEW)["test answers"] is None
    assert (
        levers.adapter_scores(as_03, levers.NEW)["test answers"]
        == as_03["passes"][levers.NEW]["test"]["scores"]["all"]["facts_acc"]
    )
    # notebook 02's adapter scored in another run's JSON: its training record is not that JSON's
    soup = json.loads((EXPERIMENTS / "results" / "open_relations_soup.json").read_text())
    assert levers.adapter_scores(soup, "committed (notebook 02)")["minutes"] is None


def test_a_cell_is_the_mean_and_range_and_says_when_some_adapters_lack_it(levers):
    assert levers._cell([(50, 76), (58, 76), (53, 76)], count=True) == "53.7/76 (50–58)"
    assert levers._cell([(60, 76)], count=True) == "60/76"
    assert levers._cell([0.9, None], count=False) == "0.900 (1 of 2 adapters)"
    assert levers._cell([0.5, 0.7], count=False) == "0.600 (0.500–0.700)"
    assert levers._cell([None], count=False) == "–"


def test_the_figure_is_drawn_and_the_trade_off_measured(levers, tmp_path):
    scores = levers.lever_scores()
    assert levers.figure(scores, tmp_path / "levers.png").stat().st_size > 10_000
    c = levers.correlations(scores)
    assert c["adapters"] == len(levers.trained_adapters(scores)) >= 20
    assert -1 <= c["test ~ paraphrase"] <= 1
