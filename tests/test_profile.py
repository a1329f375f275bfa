import json

from dataperf.profile import ACTIVE, run_profile
from dataperf.records import LoaderConfig
from dataperf.step import StepOptions


def test_profile_exports_trace_with_spans_and_splits_time(datasets, tmp_path):
    cfg = LoaderConfig(format="webdataset", batch_size=8, num_workers=1, image_size=32)
    r = run_profile(datasets["image-webdataset"], cfg, StepOptions(model="cnn-small"), tmp_path)
    trace = json.loads((tmp_path / "trace.json").read_text())
    names = {e.get("name") for e in trace["traceEvents"]}
    assert {"data_wait", "h2d", "forward", "backward", "optimizer"} <= names
    assert sum(1 for e in trace["traceEvents"] if e.get("name") == "forward") == ACTIVE
    assert r.top_ops and r.top_ops[0]["self_ms"] >= r.top_ops[-1]["self_ms"]
    assert any(o["name"].startswith("aten::") for o in r.top_ops)
    assert set(r.split_ms) == {"data_wait", "h2d", "compute"}
    assert abs(sum(r.split_fraction.values()) - 1) < 1e-6
    assert r.split_ms["compute"] > 0
    assert set(r.span_ms) == {"data_wait", "h2d", "forward", "backward", "optimizer"}
    assert r.span_ms["forward"] > 0 and r.span_ms["backward"] > 0
