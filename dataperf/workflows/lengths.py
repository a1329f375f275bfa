"""Token-length edge cases: per-batch padded lengths, the p99 that sets peak memory, and what a cap changes."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dataperf.data import Data, as_data
from dataperf.data.make.inspect import inspect_dataset
from dataperf.errors import UserError
from dataperf.measure.step import StepOptions, measure_step
from dataperf.results import LengthsResult, percentile


def batch_maxima(lengths: list[int], batch_size: int) -> list[int]:
    """The padded length of each batch, in loader order (what the collate pads to)."""
    return [max(lengths[i:i + batch_size]) for i in range(0, len(lengths), batch_size)]


def waste_pct(lengths: list[int], batch_size: int) -> float:
    padded = sum(m * len(lengths[i * batch_size:(i + 1) * batch_size])
                 for i, m in enumerate(batch_maxima(lengths, batch_size)))
    return (1 - sum(lengths) / padded) * 100 if padded else 0.0


def token_lengths(data: Data, seq_len: int | None = None) -> list[int]:
    """Every sample's token count, in storage order: a dataperf dataset's manifest (or its shards' arrays), else
    DATA read as bench reads it with decode on (a flat token stream cut into --seq-len windows, text files
    tokenized, foreign shards' arrays), each sample's real tokens (no padding)."""
    from dataperf.workflows.inspect_data import samples_of

    spec = data.spec
    refuse = UserError(f"{spec} holds no token sequences (images, or shards without token arrays); lengths needs a "
                       "tokens dataset: a .bin/.npy stream, .jsonl or .parquet text, or shards of token arrays")
    if not data.remote and data.format in ("webdataset", "files"):
        m = data.manifest
        got = (list(m.token_lengths) if m else []) or inspect_dataset(data).token_lengths
        if not got:
            raise refuse
        return got
    if data.kind == "image":
        raise refuse
    return [len(s["x"]) for s in samples_of(data, seq_len) if "x" in s]


def analyse(data: Data | Path | str, batch_size: int, cap: int | None = None,
            seq_len: int | None = None) -> LengthsResult:
    """The length figures of DATA (resolved, or a spec resolved here) at batch_size, with and without cap."""
    if batch_size <= 0:
        raise UserError("--batch-size must be positive")
    if cap is not None and cap <= 0:
        raise UserError("--cap must be a positive number of tokens")
    if seq_len is not None and seq_len <= 0:
        raise UserError("--seq-len must be a positive number of tokens")
    data = as_data(data)
    lengths = token_lengths(data, seq_len)
    if not lengths:
        raise UserError(f"{data.spec} holds no token sequences; lengths needs token data")
    maxima = batch_maxima(lengths, batch_size)
    r = LengthsResult(data=data.spec, batch_size=batch_size, cap_tokens=cap, samples=len(lengths),
                      config_key=f"bs={batch_size}|cap={cap}",
                      sample_tokens_p50=percentile(lengths, 50), sample_tokens_p99=percentile(lengths, 99),
                      sample_tokens_max=max(lengths), batch_max_tokens_p50=percentile(maxima, 50),
                      batch_max_tokens_p99=percentile(maxima, 99), batch_max_tokens_max=max(maxima),
                      padding_waste_pct=waste_pct(lengths, batch_size), sample_lengths=lengths,
                      batch_max_tokens=maxima)
    if cap:
        capped = [min(n, cap) for n in lengths]
        r.capped_batch_max_tokens_p99 = percentile(batch_maxima(capped, batch_size), 99)
        r.capped_padding_waste_pct = waste_pct(capped, batch_size)
        r.tokens_dropped_by_cap_pct = (1 - sum(capped) / sum(lengths)) * 100
    return r


def measure_cap_memory(r: LengthsResult, sopts: StepOptions) -> None:
    """Peak memory of the model step at the uncapped p99 batch length vs the capped one."""
    from dataperf.measure.models import load_model
    from dataperf.measure.preflight import model_max_seq_len

    sopts = replace(sopts, batch_size=r.batch_size, input="tokens")
    longest = model_max_seq_len(load_model(sopts.model))
    p99 = round(r.batch_max_tokens_p99)
    if longest is not None and p99 > longest:
        if r.capped_batch_max_tokens_p99 is None:
            raise UserError(f"the p99 batch length {p99} is longer than --model {sopts.model} holds ({longest} "
                            f"positions); pass --cap {longest} (or less) to measure the capped step")
        r.notes.append(f"uncapped step not measured: the p99 batch length {p99} exceeds the model's {longest} "
                       "positions")
    else:
        r.step_peak_mem_mib_uncapped = measure_step(replace(sopts, seq_len=p99)).peak_mem_mib
    if r.capped_batch_max_tokens_p99 is not None:
        capped = replace(sopts, seq_len=round(r.capped_batch_max_tokens_p99))
        r.step_peak_mem_mib_capped = measure_step(capped).peak_mem_mib
