"""SMAC's own time in a long search: a committed search replayed from its meta-archive.

A slice of a long search (``--stop-after``) first replays the trials stored so far: SMAC is asked
for each trial again and told its stored result, nothing runs. So the replay's time is the
meta-optimizer's own (SMAC's model fits, acquisition searches and intensifier, our asks and tells),
which grows with the trials, and which a search pays again during every new trial.

This section replays the first ``replay_trials`` trials of ``replay_study``'s first meta-seed from
its committed archive, in this process, with SMAC 2.4 as shipped and with the meta-optimizer's
faster asks (:func:`metaopt.core.smac_utils.fast_asks`), alternating, ``replay_repeats`` times each.
Both arms must propose the same trials in every run: the section fails otherwise. An untimed first pass runs, once, what this machine's SMAC proposes beyond the
archive (its proposals depend on numpy's vector kernels), so the timed runs run nothing.
"""

from __future__ import annotations

import contextlib
import io
import tempfile
import time
from typing import Any
from unittest import mock

from metaopt.bench.config import BenchConfig
from metaopt.bench.machine import REPO, busy_cores


def _as_shipped(smac: Any) -> Any:
    """The facade as SMAC builds it (the arm without :func:`metaopt.core.smac_utils.fast_asks`)."""
    return smac


def replay_section(config: BenchConfig, yahpo_data: str | None) -> dict[str, Any]:
    from metaopt.core.executor import make_executor
    from metaopt.core.smac_utils import fast_asks
    from metaopt.stages import meta_search
    from metaopt.stages.meta import known_designs, load_cache
    from metaopt.stages.study import StudyContext, search_inputs
    from metaopt.store.meta_archive import record_key
    from metaopt.store.store import StudyStore
    from metaopt.store.study_spec import load_study

    study = load_study(REPO / config.replay_study)
    ctx = StudyContext(study, yahpo_data)
    meta = study.spec.meta
    archive = meta.archive_files().get(meta.restriction) if meta is not None and not isinstance(meta.restriction, list) else None
    if meta is None or meta.fidelity is not None or meta.optimizer != "smac" or archive is None or not archive.exists():
        raise ValueError(f"{config.replay_study}: the replay section needs a study whose SMAC search (algorithm "
                         "configuration, one restriction) continues from a committed meta.archive")
    assert isinstance(meta.seeds, list) and not isinstance(meta.restriction, list)
    references = ctx.references(ctx.meta_instances, quiet=True)
    setup, space, features = search_inputs(ctx, meta.restriction, references, ctx.meta_time_limits())
    initial = list(known_designs(setup, space, ctx.initial_configs, presets=meta.initial_presets,
                                 found_by=study.spec.name).values())
    trials, meta_seed = min(config.replay_trials, meta.trials), meta.seeds[0]
    arms = {"SMAC 2.4 as shipped": _as_shipped, "fast_asks": fast_asks}
    rows: list[dict[str, Any]] = []

    def replay(store: Any, patch: Any) -> tuple[list[dict[str, Any]], float, float]:
        """One search over the first `trials` with the archive and `store`'s runs as stored runs: its
        trial rows, wall and CPU seconds."""
        cache = load_cache(store, archive, max_evals=setup.budget.max_evals, objective=setup.objective_tag)
        with mock.patch.object(meta_search, "fast_asks", patch), contextlib.redirect_stdout(io.StringIO()):
            started, cpu_before = time.perf_counter(), time.process_time()
            search = meta_search.SmacSearch(store, meta_seed, setup, cache, space, ctx.meta_instances, features,
                                            meta.trials, meta.batch_size, True, initial, 0,
                                            inner_seeds=meta.inner_seeds)
            # SMAC's scenario keeps the study's trial count (the size of its initial design depends
            # on it); the replay stops after the first `trials`
            search.trials = trials
            meta_search.run_side_by_side([search], executor)
            return search.rows, time.perf_counter() - started, time.process_time() - cpu_before

    with tempfile.TemporaryDirectory(prefix="metaopt-bench-replay-") as folder, make_executor(1) as executor:
        store = StudyStore(folder)
        # Untimed first pass. SMAC's proposals depend on numpy's vector kernels (with AVX-512 kernels
        # disabled, NPY_DISABLE_CPU_FEATURES=X86_V4, the lcbench race leaves its archive within its first
        # 60 trials): on such a CPU the runs from there on are run here, once, so that the timed passes
        # below run nothing.
        first, _, _ = replay(store, fast_asks)
        expected = [record_key(row) for row in first]
        from_archive = sum(row["cached"] for row in first)
        for repeat in range(config.replay_repeats):
            for arm, patch in arms.items():
                busy_before = busy_cores()
                trial_rows, wall_s, cpu_s = replay(store, patch)
                keys = [record_key(row) for row in trial_rows]
                if keys != expected or not all(row["cached"] for row in trial_rows):
                    raise RuntimeError(f"replay ({arm}, run {repeat + 1}): other trials than the first pass's")
                rows.append({"arm": arm, "repeat": repeat + 1, "trials": len(keys), "wall_s": wall_s, "cpu_s": cpu_s,
                             "ms_per_trial": 1000 * wall_s / len(keys), "busy_cores_before": busy_before})
    return {"study": config.replay_study, "archive": str(archive), "trials": trials,
            "study_trials": meta.trials, "instances": len(ctx.meta_instances), "inner_seeds": meta.inner_seeds,
            "restriction": meta.restriction, "rows": rows, "from_archive": from_archive}
