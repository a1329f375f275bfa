"""The public API declared in dataperf.__all__: sorted, every name importable from the top, and the top staying
light (the CLI's --help must not load torch)."""

import subprocess
import sys

import dataperf


def test_the_public_names_are_sorted_and_each_imports():
    assert dataperf.__all__ == sorted(dataperf.__all__)
    for name in dataperf.__all__:
        assert getattr(dataperf, name) is not None, name
    from dataperf import LoaderConfig, run_trial  # noqa: F401  (the way a script imports them)


def test_an_unknown_name_is_an_attribute_error():
    try:
        dataperf.no_such_name  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("an unknown name was found")


def test_importing_dataperf_loads_no_torch():
    code = "import sys, dataperf; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_version_is_written_once():
    """pyproject.toml takes the version from dataperf.__version__, not a second copy."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in text and 'version = {attr = "dataperf.__version__"}' in text
    assert "\nversion = \"" not in text  # no literal version beside the attr
