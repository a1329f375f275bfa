"""dataperf watch's startup hook, put first on the job's PYTHONPATH by `dataperf watch`.

Python imports `sitecustomize` at start-up, so this file runs in every Python process of the job without any
edit to the user's script. It installs the measurement hook (inert unless DATAPERF_WATCH_DIR is set) and then
runs the sitecustomize the user already had, which this file shadows, exactly as Python would have.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _install_hook():
    try:
        import dataperf_watch_hook

        dataperf_watch_hook.install()
    except Exception as e:  # never break the user's job; say why in the watch directory
        try:
            import dataperf_watch_hook

            dataperf_watch_hook.report_failure("install", e)
        except Exception:
            pass


def _chain_user_sitecustomize():
    """Find the next `sitecustomize` on the path, skipping this folder, and run it as `sitecustomize`."""
    import importlib.machinery
    import importlib.util

    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = mod
    spec.loader.exec_module(mod)  # its errors surface as Python reports any sitecustomize error


_install_hook()
_chain_user_sitecustomize()
