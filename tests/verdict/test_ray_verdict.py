"""Ray sizing's arithmetic and the cross-check of Ray's books, on figures whose answers are known."""

import pytest

from dataperf.verdict.ray import DISAGREE, NodePoint, Sizing, around, cross_check, nodes_for


@pytest.mark.parametrize("demand,per_node,n", [(100, 50, 2), (101, 50, 3), (49, 50, 1), (150, 50, 3)])
def test_nodes_for_a_demand_is_the_ceiling_of_demand_over_a_node(demand, per_node, n):
    assert nodes_for(demand, per_node) == n


def test_nodes_for_refuses_a_rate_that_measures_nothing():
    with pytest.raises(ValueError):
        nodes_for(100, float("nan"))


def test_around_measures_one_below_and_one_above_within_bounds():
    assert around(1) == [1, 2]
    assert around(3) == [2, 3, 4]
    assert around(4, most=4) == [3, 4]


def test_sizing_scores_the_prediction_against_the_smallest_cluster_that_fed():
    s = Sizing(demand=100, per_node=48, predicted_nodes=3, points=[
        NodePoint(2, 2, 90, 90), NodePoint(3, 3, 140, 99), NodePoint(4, 4, 180, 100)])
    assert s.smallest_feeding() == 3  # 90 < 95% of 100; 99 >= 95
    assert s.node_error() == 0
    assert s.rate_error() == pytest.approx(abs(144 - 140) / 140)


def test_a_failed_cluster_never_feeds():
    assert not NodePoint(2, 2, 200, 200, "failed", "node died").feeds(100)


STATS = {"ray_stats": {"operators": {"MapBatches(load_batch)": {"rows": 100, "task_wall_s": 0.5, "task_cpu_s": 0.4,
                                                                "tasks": 4, "wall_s": 0.3}},
                       "first_batch_s": 1.0, "first_batch_s_seen": 1.05, "backpressure": []}}


def test_ray_books_that_agree_are_said_to_agree():
    lines = cross_check(STATS, {"read": 1.0, "decode": 3.0, "transform": 0.8})  # 4.8 vs Ray's 5.0 ms a sample
    assert any("map task wall time" in ln and "agree within" in ln for ln in lines), lines
    assert any("time to first batch" in ln and "agree within" in ln for ln in lines), lines


def test_a_gap_over_ten_percent_is_printed_as_a_disagreement():
    ours = 5.0 * (1 - DISAGREE) - 0.2  # just past the line
    lines = cross_check(STATS, {"read": ours})
    assert any("map task wall time" in ln and "DISAGREE" in ln for ln in lines), lines


def test_no_ray_books_no_lines():
    assert cross_check({}, {"read": 1.0}) == []
    assert "not read" in cross_check({"ray_stats": {"error": "x"}}, {})[0]
