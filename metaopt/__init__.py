"""metaopt: design HPO algorithms by optimization, then explain them.

The engine: the component registry, the optimizer loop, benchmarks and problems, traces and
regret references, studies, and the command line. Building blocks live in ``components``, the
design space and presets in ``spaces``, statistics and plots in ``analysis``.

Use a design on your own problem: ``metaopt.minimize(objective, space, optimizer=...)`` or an
ask/tell loop, ``metaopt.ask_tell(space, optimizer=...)`` (:mod:`metaopt.stages.api`, docs/python_api.md).
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["AskTell", "MinimizeResult", "Trial", "ask_tell", "fidelity_check", "minimize"]


def __getattr__(name: str) -> Any:
    """The public Python API, imported on first use: ``import metaopt`` alone stays cheap for the
    command line and the Dask workers, which never need it."""
    if name in __all__:
        from metaopt.stages import api

        return getattr(api, name)
    raise AttributeError(f"module 'metaopt' has no attribute {name!r}")
