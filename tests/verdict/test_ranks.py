"""`sweep --ranks G` judged (verdict/ranks.py) on records whose answer is known by construction: the pick, the
binding limit, whether the ladder is settled, today's practice beside it, and the ranks the CPUs can feed."""

from dataclasses import asdict

import pytest

from dataperf import verdict
from dataperf.results import CONSUMER_GIVEN, LoaderConfig, RanksResult


def trial(workers: int, per_rank: list[float], demand: float = 100.0, main: float = 0.1, host: float = 1.0,
          cores: int = 8, cpu_ms: float = 10.0, status: str = "ok", **knobs) -> RanksResult:
    cfg = LoaderConfig(num_workers=workers, prefetch_factor=knobs.pop("prefetch_factor", 2), **knobs)
    return RanksResult(config=asdict(cfg), config_key=f"ranks={len(per_rank)}|{cfg.key()}", ranks=len(per_rank),
                       consumer=CONSUMER_GIVEN, demand_samples_per_s_per_rank=demand, host_cores=cores,
                       fed_samples_per_s_per_rank=per_rank, fed_samples_per_s_slowest=min(per_rank),
                       fed_samples_per_s_total=sum(per_rank), slowest_rank=per_rank.index(min(per_rank)),
                       data_wait_fraction_per_rank=[0.1] * len(per_rank),
                       main_cpu_cores_busy_per_rank=[main] * len(per_rank), host_cpu_cores_busy=host,
                       cpu_ms_per_sample=cpu_ms, status=status)


def test_the_pick_is_the_fewest_workers_within_five_percent_of_the_best_slowest_rank():
    recs = [trial(1, [40, 42]), trial(2, [70, 75]), trial(4, [96, 99]), trial(8, [100, 97])]
    a = verdict.ranks_answer(recs)
    assert verdict.ranks.workers(a.best) == 8  # the slowest rank decides: 97 beats 96
    assert verdict.ranks.workers(a.pick) == 4  # 96 >= 0.95 x 97


def test_a_config_whose_every_rank_is_fed_binds_on_the_model():
    a = verdict.ranks_answer([trial(1, [60, 99], host=7.9), trial(2, [99, 98], host=7.9)])
    assert a.fed and a.binding == "model" and verdict.ranks.workers(a.pick) == 2


@pytest.mark.parametrize("main, host, limit", [(0.95, 3.0, "main_process"), (0.3, 7.5, "cores"),
                                               (0.3, 3.0, "storage")])
def test_an_input_bound_answer_names_what_binds(main, host, limit):
    a = verdict.ranks_answer([trial(1, [50, 50], main=main, host=host), trial(2, [51, 50], main=main, host=host)])
    assert not a.fed and a.binding == limit
    assert limit in verdict.ranks.LIMITS


def test_a_top_rung_still_gaining_leaves_the_answer_unsettled_and_one_that_flattened_settles_it():
    gaining = verdict.ranks.ok_trials([trial(1, [40, 40]), trial(2, [60, 60])])
    assert not verdict.ranks_settled(gaining)
    flat = verdict.ranks.ok_trials([trial(1, [40, 40]), trial(2, [60, 60]), trial(3, [61, 61])])
    assert verdict.ranks_settled(flat)
    fed = verdict.ranks.ok_trials([trial(1, [40, 40]), trial(2, [99, 99])])
    assert verdict.ranks_settled(fed)  # the consumers are fed: more workers cannot raise the rate
    past = verdict.ranks.ok_trials([trial(1, [40, 40]), trial(2, [80, 80]), trial(3, [70, 70])])
    assert verdict.ranks_settled(past)  # the best is not the top


def test_the_rules_of_thumb_and_tf_datas_default_are_scored_against_the_pick():
    recs = [trial(1, [50, 50]), trial(2, [80, 80]), trial(4, [100, 100]), trial(3, [99, 99])]
    a = verdict.ranks_answer(recs)
    assert verdict.ranks.workers(a.pick) == 3
    by = {p.workers: p for p in a.practices}
    assert by[2].gain == pytest.approx(99 / 80) and by[4].gain == pytest.approx(99 / 100)
    tf = a.practices[-1]
    assert tf.workers == 4 and "8 cores / 2 ranks" in tf.name  # tf.data: all cores / G


def test_tf_datas_default_gives_each_rank_at_least_one_worker():
    assert verdict.ranks.tf_data_default(8, 16) == 2
    assert verdict.ranks.tf_data_default(3, 2) == 1


def test_the_ranks_the_cpus_can_feed_are_the_cores_over_cpu_per_sample_over_one_ranks_demand():
    a = verdict.ranks_answer([trial(1, [50, 50], cores=16, cpu_ms=8.0, demand=250.0)])
    assert a.host_samples_per_s == pytest.approx(16 / 0.008)  # 2000 samples/s
    assert a.ranks_fed == pytest.approx(2000 / 250)


def test_failed_counts_are_left_out_and_no_ranks_records_give_no_answer():
    a = verdict.ranks_answer([trial(1, [50, 50]), trial(2, [90, 90], status="failed")])
    assert [verdict.ranks.workers(t) for t in a.trials] == [1]
    assert verdict.ranks_answer([]) is None


def test_a_variant_at_the_picks_count_is_chosen_only_when_it_feeds_the_slowest_rank_over_five_percent_faster():
    ladder = [trial(1, [50, 50]), trial(2, [80, 80]), trial(4, [82, 82])]
    faster = trial(2, [90, 88], prefetch_factor=4)  # 88 > 1.05 x 80
    within = trial(2, [83, 84], pin_memory=True)  # 83: within 5% of 80, one rate
    a = verdict.ranks_answer([*ladder, faster, within])
    assert verdict.ranks.workers(a.pick) == 2 and a.pick is ladder[1]  # the ladder's pick, not overwritten
    assert a.variants == [faster, within] and a.choice is faster
    by = {p.workers: p for p in a.practices}
    assert by[4].gain == pytest.approx(88 / 82)  # today's practice scored against what is recommended
    assert verdict.ranks_answer([*ladder, within]).choice is ladder[1]


def test_variants_leave_the_ladder_alone_and_only_those_at_the_picks_count_are_weighed():
    ladder = [trial(1, [50, 50]), trial(2, [99, 99])]
    elsewhere = trial(1, [99, 99], prefetch_factor=8)  # a variant at another count: not the pick's
    a = verdict.ranks_answer([*ladder, elsewhere])
    assert [verdict.ranks.workers(t) for t in a.trials] == [1, 2] and a.trials[0] is ladder[0]
    assert a.variants == [] and a.choice is ladder[1]
