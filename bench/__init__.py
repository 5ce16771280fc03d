"""Performance harness: how fast metaopt's optimizers run and how good they are, next to the peers.

``metaopt bench`` (:mod:`metaopt.bench.harness`) writes a JSON result and ``docs/benchmarks.md``
(:mod:`metaopt.bench.report`); :mod:`metaopt.bench.overhead` is the per-run measurement every section uses.
"""
