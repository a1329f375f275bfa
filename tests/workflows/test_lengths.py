from click.testing import CliRunner

from dataperf.cli import cli
from dataperf.data.manifest import read_manifest
from dataperf.workflows.lengths import analyse, batch_maxima, waste_pct


def test_batch_maxima_and_waste():
    assert batch_maxima([1, 5, 2, 2, 9], 2) == [5, 2, 9]
    assert waste_pct([2, 2], 2) == 0
    assert waste_pct([1, 3], 2) == 100 * (1 - 4 / 6)


def test_analyse_real_dataset_with_cap(datasets):
    r = analyse(datasets["tokens-webdataset"], 8, cap=64)
    m = read_manifest(datasets["tokens-webdataset"])
    assert r.samples == 96 and r.sample_lengths == m.token_lengths
    assert r.batch_max_tokens_p99 >= r.batch_max_tokens_p50 >= r.sample_tokens_p50
    assert r.capped_batch_max_tokens_p99 <= 64
    assert 0 < r.tokens_dropped_by_cap_pct < 100
    assert r.capped_padding_waste_pct < r.padding_waste_pct


def test_cap_lowers_step_peak_memory(datasets):
    r = CliRunner().invoke(cli, ["lengths", str(datasets["tokens-files"]), "--batch-size", "8", "--cap", "32",
                                 "--model", "gpt-tiny"])
    assert r.exit_code == 0, r.output
    assert "step peak_mem_mib capped" in r.output
    from dataperf.measure.step import StepOptions
    from dataperf.workflows.lengths import measure_cap_memory

    res = analyse(datasets["tokens-files"], 8, cap=32)
    measure_cap_memory(res, StepOptions(model="gpt-tiny", steps=1, warmup=1))
    assert res.step_peak_mem_mib_capped < res.step_peak_mem_mib_uncapped


def test_lengths_on_images_is_a_clear_error(datasets):
    r = CliRunner().invoke(cli, ["lengths", str(datasets["image-files"])])
    assert r.exit_code == 2 and "tokens dataset" in r.output
