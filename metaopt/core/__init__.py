"""The ground floor: errors, the budget, the configuration codec, the archive, the component registry,
the executor, file helpers, the benchmarks and their regret references, and what components see
of a run (context, features). Imports nothing else of metaopt."""
