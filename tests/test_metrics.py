"""The shared scores: one precision/recall rule for both papers, whole-word mentions."""

import math

from retllm_utils.metrics import PRF, ratio, whole_word


def test_empty_sides_follow_one_rule():
    # nothing predicted, nothing to find: perfect, not NaN (a per-example mean must not turn NaN)
    assert (PRF.of_sets([], []).precision, PRF.of_sets([], []).recall, PRF.of_sets([], []).f1) == (1.0, 1.0, 1.0)
    # nothing predicted but something to find: precision and recall 0
    assert (PRF.of_sets([], ["a"]).precision, PRF.of_sets([], ["a"]).recall) == (0.0, 0.0)
    # something predicted, nothing to find: both 0
    assert (PRF.of_sets(["a"], []).precision, PRF.of_sets(["a"], []).recall) == (0.0, 0.0)
    assert ratio(0, 0, other_side_empty=True) == 1.0 and ratio(0, 0, other_side_empty=False) == 0.0


def test_micro_average_adds_counts():
    total = PRF.of_sets(["a", "b"], ["a"]) + PRF.of_sets(["c"], ["c", "d"])
    assert (total.correct_pred, total.n_pred, total.found_gold, total.n_gold) == (2, 3, 2, 3)
    assert math.isclose(total.precision, 2 / 3) and math.isclose(total.recall, 2 / 3)
    assert math.isclose(total.f1, 2 / 3)


def test_whole_word():
    assert whole_word("Ann", "Ann Lee works") and not whole_word("Ann", "Anna works")
    assert whole_word("U.S.", "in the U.S. today") and not whole_word("", "anything")
    assert not whole_word("Lee", "Leeds")
