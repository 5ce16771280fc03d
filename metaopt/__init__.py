"""metaopt: design HPO algorithms by optimization, then explain them.

The engine: the component registry, the optimizer loop, benchmarks and problems, traces and
regret references, studies, and the command line. Building blocks live in ``components``, the
design space and presets in ``spaces``, statistics and plots in ``analysis``.
"""

__version__ = "0.1.0"
