"""The calibration figures of `hybridsearch bench --calibration` (tools.quality.calibration)."""

import math

import pytest

from hybridsearch.tools.quality.calibration import above, answering, average_precision, report, roc_auc


@pytest.mark.parametrize("judged, auc", [
    ([(0.9, True), (0.8, True), (0.2, False), (0.1, False)], 1.0),       # every relevant above
    ([(0.9, False), (0.8, False), (0.2, True), (0.1, True)], 0.0),       # every relevant below
    ([(0.5, True), (0.5, False)], 0.5),                                  # a tie counts half
    ([(0.9, True), (0.7, False), (0.6, True), (0.1, False)], 0.75),      # 3 of 4 pairs in order
])
def test_roc_auc_is_the_share_of_pairs_in_order(judged, auc):
    assert roc_auc(judged) == pytest.approx(auc)


def test_roc_auc_needs_both_kinds():
    assert math.isnan(roc_auc([(0.9, True)])) and math.isnan(roc_auc([]))


def test_average_precision_and_ties_are_pessimistic():
    assert average_precision([(0.9, True), (0.7, False), (0.6, True)]) == pytest.approx((1 + 2 / 3) / 2)
    assert average_precision([(0.5, True), (0.5, False)]) == pytest.approx(0.5)


def test_what_a_threshold_keeps():
    judged = [(0.9, True), (0.7, False), (0.6, True), (0.1, True)]
    assert above(judged, 0.6, 3) == {"kept": 3, "precision": pytest.approx(2 / 3, abs=1e-4), "recall": pytest.approx(2 / 3, abs=1e-4)}
    assert above(judged, 0.95, 3) == {"kept": 0, "precision": None, "recall": 0.0}
    assert report(judged, (0.5,))["min_score"]["0.50"]["kept"] == 3


def test_answering_is_the_share_of_queries_whose_top_hit_passes():
    assert answering([0.9, 0.55, 0.41, 0.0], (0.4, 0.5, 0.95)) == {"0.40": 0.75, "0.50": 0.5, "0.95": 0.0}
    assert answering([], (0.5,)) == {"0.50": 0.0}
