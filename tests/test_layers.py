"""The package's layers, kept by a test: a module imports only its own layer or the layers below it, and no
modules import each other in a circle (imports inside functions count: they run all the same).

The order, bottom up (docs/architecture.md): errors, watchdog, stages, results, data, backends, verdict, measure,
workflows, commands, cli."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "dataperf"
LAYERS = ["errors", "watchdog", "stages", "results", "data", "backends", "verdict", "measure", "workflows", "commands",
          "cli"]
TOP = {"__init__": 0, "__main__": len(LAYERS)}  # the package marker sits below all; `python -m` above all


def module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    """Every module of the package, except the watch hook (it runs inside the user's job, imports nothing of
    dataperf, and is not a package)."""
    return {module_name(p): p for p in PKG.rglob("*.py") if "hook" not in p.parts}


def imports(path: Path, name: str, known: set[str]) -> set[str]:
    """The package modules `path` imports, at module level or inside a function."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            # `from pkg import sub` imports the module sub; `from pkg.mod import name` the module pkg.mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name:
                out.add(t)
    return out


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(path, name, set(mods)) for name, path in mods.items()}


def layer(name: str) -> int:
    parts = name.split(".")
    if len(parts) == 1:
        return 0
    top = parts[1]
    if top in TOP:
        return TOP[top]
    if top not in LAYERS:
        raise AssertionError(f"{name} is in no layer: put it in one of {LAYERS} (docs/architecture.md)")
    return LAYERS.index(top)


def test_every_module_is_in_a_layer():
    for name in modules():
        layer(name)


def test_no_import_runs_up_a_layer():
    up = sorted(f"{a} -> {b}" for a, deps in graph().items() for b in deps
                if layer(b) > layer(a) and b != "dataperf")
    assert not up, "imports that run up a layer:\n" + "\n".join(up)


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    assert not cycles(graph()), cycles(graph())


@pytest.mark.parametrize("g, circles", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_circle_finder_finds_a_circle(g, circles):
    """The check itself, on graphs whose answer is known: a test that cannot fail would keep nothing."""
    assert cycles(g) == circles


def test_an_upward_import_is_caught(tmp_path, monkeypatch):
    """A measure module importing a workflow is reported (a copy of the rule run on a made-up package)."""
    pkg = tmp_path / "dataperf"
    (pkg / "measure").mkdir(parents=True)
    (pkg / "workflows").mkdir()
    for f in ("__init__.py", "measure/__init__.py", "workflows/__init__.py", "workflows/sweep.py"):
        (pkg / f).write_text("")
    (pkg / "measure" / "trial.py").write_text("def f():\n    from dataperf.workflows import sweep\n")
    monkeypatch.setattr(__import__(__name__), "PKG", pkg)
    with pytest.raises(AssertionError, match="dataperf.measure.trial -> dataperf.workflows.sweep"):
        test_no_import_runs_up_a_layer()


# Inside a folder, each file or sub-folder is one room, and the rooms have an order of their own, bottom up (a
# room imports only rooms below it: a folder drawn as a house keeps its floors). A room left out of its folder's
# list fails the test, so a new module is placed on purpose. The package module (`__init__`) sits on top.
INNER: dict[str, list[set[str]]] = {
    "dataperf.measure": [
        {"guards", "models", "zero", "footprint", "breakdown", "collectors", "distributed", "paced_feed"},
        {"cache", "preflight", "step"},
        {"trial"},
        {"fed", "limits"},
        {"ranks"},
    ],
    "dataperf.workflows": [
        {"progress", "clock", "inspect_data", "e2e", "compare", "diagnose", "memory", "profile", "watch",
         "tune_predict", "ray_size"},
        {"budget", "lengths"},
        {"sweep"},
        {"tune"},
    ],
    "dataperf.measure.trial": [{"options", "timing"}, {"plan", "fill"}],
    "dataperf.measure.limits": [{"ceiling"}, {"reads", "probe"}, {"storage", "replay"}, {"h2d"}],
    "dataperf.workflows.sweep": [{"grid"}, {"plan"}, {"state"}, {"confirm", "edge", "ranks"}, {"stages"}],
    "dataperf.workflows.watch": [{"launch"}, {"results"}],
    "dataperf.measure.collectors": [{"base"}, {"nvml", "proc", "ebpf"}, {"sysstat"}],
}


def room(pkg: str, name: str) -> str | None:
    """The room of module `name` inside package `pkg` (its first part below pkg; `__init__` for pkg itself), or
    None when it lies outside pkg."""
    if name == pkg:
        return "__init__"
    return name[len(pkg) + 1:].split(".")[0] if name.startswith(pkg + ".") else None


def inner_level(pkg: str, r: str) -> int:
    levels = INNER[pkg]
    if r == "__init__":
        return len(levels)
    found = [i for i, rooms in enumerate(levels) if r in rooms]
    if not found:
        raise AssertionError(f"{pkg}.{r} is in no room order: add it to tests/test_layers.py INNER[{pkg!r}]")
    return found[0]


def inner_violations(g: dict[str, set[str]]) -> list[str]:
    """Imports between rooms of one folder that run up its order, or sideways between two rooms of one floor."""
    out = []
    for pkg in INNER:
        for a, deps in g.items():
            ra = room(pkg, a)
            if ra is None:
                continue
            for b in deps:
                rb = room(pkg, b)
                if rb is None or rb == ra:
                    continue
                la, lb = inner_level(pkg, ra), inner_level(pkg, rb)
                if lb >= la:
                    out.append(f"{a} -> {b} ({ra} on floor {la} of {pkg}, {rb} on floor {lb})")
    return sorted(out)


def test_rooms_inside_a_folder_import_only_rooms_below():
    assert not inner_violations(graph()), "\n".join(inner_violations(graph()))


def test_every_room_inside_an_ordered_folder_is_placed():
    for name in modules():
        for pkg in INNER:
            r = room(pkg, name)
            if r is not None:
                inner_level(pkg, r)


def test_a_room_importing_up_its_folder_is_caught():
    """The check itself on a made-up graph: budget importing sweep runs up workflows' floors."""
    g = {"dataperf.workflows.budget": {"dataperf.workflows.sweep.plan"}, "dataperf.workflows.sweep.plan": set()}
    assert inner_violations(g) == ["dataperf.workflows.budget -> dataperf.workflows.sweep.plan (budget on floor 1 "
                                   "of dataperf.workflows, sweep on floor 2)"]


# Where a backend other than the DataLoader's may be named outside backends/, and why: the record schema declares
# each backend's own knobs (results.config.own_knob) and which shuffle is a buffer; provenance records, and report
# prints, the versions of the software installed; data/ recognises another loader's folder by its package.
NAMED_BY = {"dataperf.results.config", "dataperf.results.provenance", "dataperf.commands.report"}


def backend_names_outside(pkg: Path) -> list[str]:
    """file:line of every string literal naming a backend beyond the DataLoader's (dali, spdl, ...) in a module
    that should ask the Backend instead (backends.of(cfg).own_pipeline, not `cfg.backend == "dali"`)."""
    from dataperf.backends import DATALOADER, REGISTRY

    names = set(REGISTRY) - set(DATALOADER)
    out = []
    for p in sorted(pkg.rglob("*.py")):
        name = module_name(p) if pkg == PKG else p.relative_to(pkg).as_posix()
        if {"backends", "data", "hook"} & set(p.relative_to(pkg).parts) or name in NAMED_BY:
            continue
        out += [f"{name}:{n.lineno} {n.value!r}" for n in ast.walk(ast.parse(p.read_text()))
                if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names]
    return out


def test_only_the_registry_names_a_backend():
    """Adding a backend, or a knob of its own, touches backends/ and the knob's one declaration: a branch on a
    backend's name elsewhere would be one more place to find (DALI was once known in 10 places)."""
    assert not backend_names_outside(PKG), backend_names_outside(PKG)


def test_a_branch_on_a_backend_name_is_caught(tmp_path):
    """The check itself, on a made-up module that branches on DALI's name the way verdict/answer.py once did."""
    (tmp_path / "verdict").mkdir()
    (tmp_path / "verdict" / "answer.py").write_text('def f(c):\n    return c.backend == "dali"\n')
    assert backend_names_outside(tmp_path) == ["verdict/answer.py:2 'dali'"]
