"""The contradictions an answer must never hold, read off the text a user reads (issue 49): the verdict, the
binding limit, the expectation and the advice printed by `sweep`, `report` and `tune` must tell one story.

`contradictions(text)` returns each contradiction found, in words; tests/conftest.py runs it on every answer the
suite prints (every call of `_render.print_recommendation`), and benchmarks/pick_quality.py may run it on the
output of a real command."""

from __future__ import annotations

import re

IDLE = 5.0  # percent: a fed idle share over this is input-bound (verdict.FED_STALL)

# the limit each attack's advice acts on (verdict.binding.advice's openings and verdict.attack.ATTACK's)
ADVICE = (
    (r"^(decode|transform) ", "decode"),
    (r"^a cheaper decode|^a lighter transform|^decode on the GPU", "decode"),
    (r"^read |^pack small files", "storage"),
    (r"^transfer |^hand over less", "main_process"),
    (r"^collate |^a cheaper collate|^more workers|^use workers", "workers"),
    (r"^pin_memory", "h2d"),
    (r"^find what the workers share", "unmeasured"),
)


def _binding(text: str) -> str | None:
    m = re.search(r"^binding limit: (the model|workers|a limit dataperf does not measure|[a-z_]+)", text, re.M)
    if not m:
        return None
    return {"the model": "model", "a limit dataperf does not measure": "unmeasured"}.get(m.group(1), m.group(1))


def _verdict(text: str) -> str | None:
    for line in text.splitlines():
        if line.startswith(("INPUT-BOUND", "NOT SETTLED")):
            return "input_bound"
        if line.startswith("recommended:") and "feeds the model" in line or \
                line.startswith("recommended:") and "confirmed end to end" in line:
            return "feeds"
    return None


def contradictions(text: str, cuda: bool | None = None) -> list[str]:
    """Every contradiction in one printed answer (`cuda`: whether the machine has a GPU; None: not checked). A line
    wrapped to the console's width (its continuation indented two spaces, _render.say) is read whole."""
    text = re.sub(r"\n  (?=\S)", " ", text)
    out = []
    verdict, binding = _verdict(text), _binding(text)
    if verdict == "input_bound" and binding == "model":
        out.append("INPUT-BOUND beside the model as the binding limit")
    if verdict == "feeds" and binding not in (None, "model"):
        out.append(f"the model is fed, yet the binding limit is {binding}")
    expect = re.search(r"^expect: .*?waiting on data (\d+)% of the time", text, re.M)
    if expect and verdict == "feeds" and float(expect.group(1)) > IDLE:
        out.append(f"'feeds' beside an expected wait on data of {expect.group(1)}%")
    if expect and verdict == "input_bound" and float(expect.group(1)) <= IDLE and "NOT SETTLED" not in text:
        out.append(f"INPUT-BOUND beside an expected wait on data of {expect.group(1)}%")
    fed = re.search(r"^recommended: .*confirmed end to end: fed [\d,]+ samples/s mid-epoch with the [\w ]+? "
                    r"(\d+)% of the time", text, re.M)
    if fed and float(fed.group(1)) > IDLE:
        out.append(f"'recommended ... fed' with the model idle {fed.group(1)}% mid-epoch")
    attack = re.search(r"^attack: (.*)$", text, re.M)
    if attack:
        acts_on = next((lim for pat, lim in ADVICE if re.search(pat, attack.group(1))), None)
        if verdict == "feeds":
            out.append("advice to attack the loader where the model is fed")
        elif acts_on is not None and binding is not None and acts_on != binding:
            out.append(f"advice for {acts_on} ({attack.group(1)[:40]}...) where {binding} binds")
        if cuda is False and "GPU" in attack.group(1):
            out.append("advice naming a GPU on a machine without one")
    return out
