import pytest
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


@pytest.mark.slow
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


def test_lengths_of_data_that_is_not_a_dataperf_dataset(tmp_path, datasets):
    """Every DATA bench reads (issue 29): a flat .bin stream cut into --seq-len windows, text lines tokenized
    (bytes: a line's length is its UTF-8 bytes), and tar shards with no manifest; images are refused in one line."""
    import json
    import shutil

    import numpy as np

    np.arange(5000, dtype=np.uint16).tofile(tmp_path / "t.bin")
    r = analyse(str(tmp_path / "t.bin"), 8, seq_len=100)
    assert r.samples == 50 and set(r.sample_lengths) == {100}
    texts = ["hello world " * (i % 50 + 1) + "é" * (i % 7) for i in range(300)]
    (tmp_path / "t.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in texts) + "\n")
    r = analyse(f"{tmp_path / 't.jsonl'}#tokenizer=bytes", 8)
    assert r.sample_lengths == [len(t.encode()) for t in texts]
    foreign = tmp_path / "foreign"
    shutil.copytree(datasets["tokens-webdataset"], foreign)
    (foreign / "manifest.json").unlink()
    assert analyse(str(foreign), 8).sample_lengths == read_manifest(datasets["tokens-webdataset"]).token_lengths
    out = CliRunner().invoke(cli, ["lengths", str(datasets["image-files"])])
    assert out.exit_code == 2 and out.output.count("error:") == 1 and "tokens dataset" in out.output, out.output
