import json

import pytest

from dataperf import records
from dataperf.errors import UserError
from dataperf.records import LoaderResult, StepResult, percentile, summarize


def test_round_trip_keeps_values_and_nan(tmp_path):
    p = tmp_path / "r.jsonl"
    records.append(p, LoaderResult(data="d", samples_per_s_median=12.5, samples_per_s_repeats=[12.0, 12.5, 13.0]))
    records.append(p, StepResult(model="m", step_ms_median=3.0))
    a, b = records.load(p)
    assert isinstance(a, LoaderResult) and a.samples_per_s_repeats == [12.0, 12.5, 13.0]
    assert a.payload_mib_s_median != a.payload_mib_s_median  # NaN written as null comes back as NaN
    assert isinstance(b, StepResult) and b.step_ms_median == 3.0
    line = json.loads(p.read_text().splitlines()[0])
    assert line["schema_version"] == records.SCHEMA_VERSION and line["payload_mib_s_median"] is None


def test_truncated_last_line_is_skipped(tmp_path):
    p = tmp_path / "r.jsonl"
    records.append(p, LoaderResult(data="d"))
    with open(p, "a") as f:
        f.write('{"kind": "loader", "sche')
    assert len(records.load(p)) == 1


def test_schema_mismatch_and_missing_file(tmp_path):
    p = tmp_path / "r.jsonl"
    p.write_text(json.dumps({"kind": "loader", "schema_version": 999}) + "\n")
    with pytest.raises(UserError, match="schema_version"):
        records.load(p)
    with pytest.raises(UserError, match="not found"):
        records.load(tmp_path / "nope.jsonl")


def test_summary_and_percentile():
    s = summarize([10.0, 12.0, 11.0])
    assert s == {"median": 11.0, "min": 10.0, "max": 12.0, "spread_pct": pytest.approx(100 * 2 / 11)}
    assert percentile([1, 2, 3, 4, 5], 50) == 3
    assert percentile(list(range(101)), 99) == 99
