"""results.jsonl.upgrade on real schema-3 records: every config key an old record holds comes out equal to the
key of the same config made today, so `sweep --resume`, `compare`, `report` and pick_quality's --truth-from keep
matching records written before the backend had its own name (schema 3 called it `format`).

schema3.jsonl holds five lines copied byte for byte from benchmarks/results/2026-12-04-h200-pick_quality-4/run/:
sweep.jsonl:3 (a loader trial, no workers), truth.jsonl:3 (a truth-grid fed round), sweep.jsonl:9 (a --confirm
fed run of the pinned variant), sweep.jsonl:11 (the limits, with the best trial's key) and tune.jsonl:15 (tune's
decision, with its predictions). The same step renames the figures that said epoch for a repeat's rate."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from dataperf import results
from dataperf.results import LoaderConfig, LoaderResult
from dataperf.workflows import compare, sweep

OLD = Path(__file__).with_name("schema3.jsonl")
LINES = OLD.read_text().splitlines()
RAW = [json.loads(line) for line in LINES]
# the loader trial of sweep.jsonl:3 as a command makes it today (every other field at its default)
W0 = LoaderConfig(backend="files", batch_size=256, num_workers=0, decode=True, transform="imagenet-train")


def renamed(cfg: dict) -> dict:
    """An old record's config dict (or parsed key) with its backend under today's name."""
    return {("backend" if k == "format" else k): v for k, v in cfg.items()}


def today(cfg: dict) -> LoaderConfig:
    return LoaderConfig(**renamed(cfg))


def test_the_lines_are_schema_3_and_name_their_backend_format():
    assert [r["schema_version"] for r in RAW] == [3] * 5
    assert [r["kind"] for r in RAW] == ["loader", "e2e", "e2e", "limits", "decision"]
    assert all(r["config"]["format"] == "files" and '"format": "files"' in r["config_key"] for r in RAW)


def test_every_config_key_of_a_schema_3_record_equals_the_key_made_today():
    recs = results.load(OLD)
    for rec, raw in zip(recs, RAW, strict=True):
        assert rec.schema_version == results.SCHEMA_VERSION == 5
        assert "format" not in rec.config and rec.config["backend"] == "files"
        assert rec.config_key == today(raw["config"]).key() == LoaderConfig(**rec.config).key()
        assert json.loads(rec.config_key) == renamed(json.loads(raw["config_key"]))  # the same values, renamed
    loader, truth, variant, limits, decision = recs
    assert loader.config_key == W0.key()
    assert truth.config_key == replace(W0, num_workers=12, prefetch_factor=2, pin_memory=True).key()
    # the --confirm variant names the unpinned trial it varies, and the limits the best trial: the same config
    assert variant.variant_of == replace(variant.loader_config, pin_memory=False).key() == limits.best_config_key
    assert limits.best_config_key == limits.config_key
    assert [p["config"] for p in decision.predictions] == [today(json.loads(p["config"])).key()
                                                           for p in RAW[4]["predictions"]]
    assert [p["predicted"] for p in decision.predictions] == [p["predicted"] for p in RAW[4]["predictions"]]
    assert decision.config_key == today(RAW[4]["config"]).key()


def test_a_schema_2_record_chains_through_3_and_4_to_5():
    """Schema 2 read in storage order: the config gains shuffle False, then its backend is renamed, and the key is
    that of today's sequential config."""
    raw = {k: v for k, v in RAW[0].items() if k != "env"}
    old_cfg = {k: v for k, v in raw["config"].items() if k not in ("shuffle", "shuffle_buffer")}
    old_key = json.dumps({k: v for k, v in old_cfg.items() if v is not None}, sort_keys=True)
    up = results.upgrade({**raw, "schema_version": 2, "config": old_cfg, "config_key": old_key})
    assert up["schema_version"] == 5 and "format" not in up["config"] and up["config"]["shuffle"] is False
    assert up["config_key"] == replace(W0, shuffle=False).key()


def test_keys_that_are_no_loader_config_are_left_as_they_were():
    for key in ("", None, "cnn|cpu|adamw|bs=8", '{"watch": "train.py"}', "{not json"):
        rec = {"kind": "e2e", "schema_version": 3, "config": {}, "config_key": key, "variant_of": key}
        up = results.upgrade(rec)
        assert up["config_key"] == key and up["variant_of"] == key and up["config"] == {}


def test_resume_counts_an_old_trial_done_for_the_same_config_asked_today(tmp_path):
    out = tmp_path / "sweep.jsonl"
    out.write_text(LINES[0] + "\n")
    done = sweep.finished_ids(out)
    data = Path(RAW[0]["data"])
    assert sweep.trial_id(data, W0) in done
    assert sweep.trial_id(data, replace(W0, num_workers=2)) not in done  # another config is still to run


def test_compare_pairs_an_old_record_with_the_same_config_measured_today(tmp_path):
    base, head = tmp_path / "base.jsonl", tmp_path / "head.jsonl"
    base.write_text(LINES[0] + "\n")
    results.append(head, LoaderResult(data=RAW[0]["data"], config=asdict(W0), config_key=W0.key(),
                                      samples_per_s_repeats=[x / 2 for x in RAW[0]["samples_per_s_repeats"]]))
    changes = compare.compare(base, head, ["samples_per_s"], 5.0)
    assert [(c.kind, c.config) for c in changes] == [("loader", W0.short())]
    assert changes[0].change_pct == pytest.approx(-50.0)


def test_a_repeats_rate_is_named_repeat_not_epoch():
    """Schema 3's epoch_samples_per_s_* was a repeat's samples over its wall time (start-up included), and an e2e
    record's loader_epoch_samples_per_s that same figure of its loader trial: upgraded, the values keep, renamed."""
    loader, _, variant, *_ = results.load(OLD)
    assert loader.repeat_samples_per_s_repeats == RAW[0]["epoch_samples_per_s_repeats"] != []
    assert loader.repeat_samples_per_s_median == RAW[0]["epoch_samples_per_s_median"]
    # what the name says: each repeat's samples over its repeat_s
    per_repeat = [n / t for n, t in zip(RAW[0]["repeat_samples"], RAW[0]["repeat_s"], strict=True)]
    assert loader.repeat_samples_per_s_repeats == pytest.approx(per_repeat)
    assert variant.loader_repeat_samples_per_s == RAW[2]["loader_epoch_samples_per_s"] > 0
    up = results.upgrade(dict(RAW[0]))
    assert not [k for k in up if k.startswith("epoch_samples_per_s") or k == "loader_epoch_samples_per_s"]


def test_compare_matches_the_repeat_rate_of_an_old_record_under_either_name(tmp_path):
    base, head = tmp_path / "base.jsonl", tmp_path / "head.jsonl"
    base.write_text(LINES[0] + "\n")
    doubled = [2 * x for x in RAW[0]["epoch_samples_per_s_repeats"]]
    results.append(head, LoaderResult(data=RAW[0]["data"], config=asdict(W0), config_key=W0.key(),
                                      repeat_samples_per_s_repeats=doubled))
    for name in ("repeat_samples_per_s", "epoch_samples_per_s"):  # the old name still accepted
        changes = compare.compare(base, head, [name], 5.0)
        assert [(c.metric, c.config) for c in changes] == [("repeat_samples_per_s", W0.short())]
        assert changes[0].change_pct == pytest.approx(100.0)


def test_a_schema_4_ranks_record_loads_with_its_window_counted_whole():
    """Before schema 5 a ranks record's fed rate was its window's samples over its wall: it loads with those as
    its counted samples and wall, in 0 waves (every step counted), its rate as it was."""
    rec = results.RanksResult(ranks=2, samples_per_rank=[96, 104], wall_s_per_rank=[2.0, 2.1],
                              fed_samples_per_s_per_rank=[48.0, 104 / 2.1])
    old = {k: v for k, v in json.loads(json.dumps(asdict(rec), default=str)).items()
           if k not in ("counted_samples_per_rank", "counted_wall_s_per_rank", "waves_per_rank")}
    got = results.jsonl.from_dict({**old, "schema_version": 4})
    assert isinstance(got, results.RanksResult) and got.schema_version == results.SCHEMA_VERSION == 5
    assert got.counted_samples_per_rank == [96, 104] and got.counted_wall_s_per_rank == [2.0, 2.1]
    assert got.waves_per_rank == [0, 0] and got.fed_samples_per_s_per_rank == [48.0, 104 / 2.1]
