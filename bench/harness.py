"""``metaopt bench``: run the benchmark sections in one process, write the JSON result and the Markdown.

Sections (each measures against a reference taken in this same process, so ratios hold on a
noisy machine):

- ``overhead``: wall time per run of each optimizer vs. the *limit*, the time the same
  evaluations take in one batched benchmark call (:mod:`metaopt.bench.overhead`);
- ``peers``: SMAC, Optuna and FLAML next to the presets they correspond to, on the same
  instances, seeds and budget: wall time and final normalized regret;
- ``meta``: inner runs per second of a meta-optimization shaped like the study file of the
  configuration (SMAC over the training instances), with 1 and 2 Dask workers, and the projected
  wall time of the whole study (:mod:`metaopt.bench.meta_throughput`);
- ``scaling``: wall time per run vs. budget, with the growth exponent between budgets;
- ``api``: ``metaopt.minimize`` on a benchmark problem wrapped as a function vs. ``run`` on the
  problem, each against its own evaluation limit (:mod:`metaopt.bench.api_overhead`).
- ``baseline``: trials per second of the meta study's optimize stage under the commit ``--baseline``
  names and under this checkout, back to back (:mod:`metaopt.bench.baseline`).
- ``clock``: the simulated clock's cost per evaluation, and designs' regret against simulated
  wall-clock time with several workers (:mod:`metaopt.bench.clock`).
- ``replay``: SMAC's own time in a long search, replayed from its archive (:mod:`metaopt.bench.replay`).
- ``meta_fidelity``: a search at one inner budget against the same search over the inner budget, on one
  CPU budget: meta-trials per CPU-hour and the quality of each γ* on the same fresh runs
  (:mod:`metaopt.bench.meta_fidelity`).

A run (benchmark, instance, optimizer, seed, budget) is measured once per invocation and shared by
the sections that need it. Before its first timed run on a benchmark, every optimizer makes one
untimed run at a budget of 1d, so one-time costs (imports, ONNX sessions) are not counted.
"""

from __future__ import annotations

import json
from dataclasses import asdict
import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from metaopt.bench.config import FULL, QUICK, BenchConfig
from metaopt.bench.machine import machine_info
from metaopt.bench.overhead import measure
from metaopt.core.benchmarks import get_benchmark
from metaopt.core.budget import Budget
from metaopt.core.errors import UsageError
from metaopt.core.references import get_reference
from metaopt.core.store_utils import atomic_write_text, read_json_file

SECTIONS = ("overhead", "peers", "meta", "scaling", "api", "baseline", "clock", "replay", "meta_fidelity")
WARMUP_BUDGET = "1d"


def parse_sections(text: str) -> list[str]:
    """``overhead,peers`` -> the sections in canonical order; UsageError for unknown names."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in SECTIONS]
    if unknown or not names:
        raise UsageError(f"--sections: unknown section(s) {', '.join(unknown) or '(none given)'}; "
                         f"choose from {','.join(SECTIONS)}")
    return [s for s in SECTIONS if s in names]


class Session:
    """Problems, references and measured runs of one invocation; each run is measured once."""

    def __init__(self, config: BenchConfig, yahpo_data: str | None) -> None:
        self.config = config
        self.yahpo_data = yahpo_data
        self._runs: dict[tuple, dict[str, Any]] = {}
        self._warm: set[tuple[str, str, str]] = set()

    def instances(self, benchmark: str, count: int | None = None) -> list[str]:
        """The first ``count`` (default: the configuration's ``instances``) test instances of ``benchmark``."""
        count = self.config.instances if count is None else count
        return get_benchmark(benchmark, self.yahpo_data).instances_of("test")[:count]

    def run(self, kind: str, name: str, benchmark: str, instance: str, seed: int, budget: str) -> dict[str, Any]:
        """The measurement (:func:`metaopt.bench.overhead.measure`) of our preset (``kind`` "ours") or a peer ("peer")."""
        from metaopt.spaces.presets import get_preset

        key = (kind, name, benchmark, instance, seed, budget)
        if key not in self._runs:
            bench = get_benchmark(benchmark, self.yahpo_data)
            problem = bench.problem(instance)
            reference = get_reference(bench, problem.instance)
            optimizer = {"peer": name} if kind == "peer" else {"config": get_preset(name).config(problem.fidelity)}
            with warnings.catch_warnings():
                # SMAC's local search averages empty lists when it finds no neighbours.
                warnings.filterwarnings("ignore", "Mean of empty slice", RuntimeWarning)
                warnings.filterwarnings("ignore", "invalid value encountered", RuntimeWarning)
                if (kind, name, benchmark) not in self._warm:
                    measure(problem, 0, WARMUP_BUDGET, reference=reference, **optimizer)
                    self._warm.add((kind, name, benchmark))
                result = measure(problem, seed, budget, reference=reference, **optimizer)
            self._runs[key] = {"optimizer": name, "kind": kind, **result}
        return self._runs[key]


def _split_available(presets: tuple[str, ...]) -> tuple[list[str], list[dict[str, Any]]]:
    """(presets that exist, skipped entries with the reason) for a configured list."""
    from metaopt.spaces.presets import PRESETS

    present = [p for p in presets if p in PRESETS]
    skipped = [{"optimizer": p, "reason": "not a preset (yet)"} for p in presets if p not in PRESETS]
    return present, skipped


def _bar(total: int, desc: str) -> tqdm:
    return tqdm(total=total, desc=desc, unit="run", disable=None)


def overhead_section(session: Session) -> dict[str, Any]:
    cfg = session.config
    optimizers, skipped = _split_available(cfg.overhead_optimizers)
    plan = [(b, i, o, s) for b in cfg.benchmarks for i in session.instances(b) for o in optimizers
            for s in range(1, cfg.seeds + 1)]
    rows = []
    with _bar(len(plan), "overhead") as bar:
        for benchmark, instance, optimizer, seed in plan:
            rows.append(session.run("ours", optimizer, benchmark, instance, seed, cfg.budget))
            bar.update()
    return {"budget": cfg.budget, "rows": rows, "skipped": skipped}


def peers_section(session: Session) -> dict[str, Any]:
    from metaopt.engine.peers import peer_status

    cfg = session.config
    status = peer_status()
    ours, skipped = _split_available(cfg.our_peer_presets)
    peers = [p for p, _ in cfg.peers if status.get(p) == "available"]
    skipped += [{"optimizer": p, "reason": status.get(p, "unknown peer")} for p, _ in cfg.peers if p not in peers]
    plan = [(kind, name, b, i, s) for b in cfg.benchmarks for i in session.instances(b, cfg.peer_instances)
            for kind, names in (("ours", ours), ("peer", peers)) for name in names
            for s in range(1, cfg.peer_seeds + 1)]
    rows = []
    with _bar(len(plan), "peers") as bar:
        for kind, name, benchmark, instance, seed in plan:
            rows.append(session.run(kind, name, benchmark, instance, seed, cfg.budget))
            bar.update()
    return {"budget": cfg.budget, "counterparts": dict(cfg.peers), "peer_status": status, "rows": rows,
            "skipped": skipped}


def _projected_seconds(points: list[tuple[float, float]], amount: float) -> float:
    """Run time at budget ``amount`` extrapolated from the measured (budget, seconds) points: with the
    growth exponent of the last two points (at least 1), linearly from a single point."""
    b2, t2 = points[-1]
    exponent = 1.0
    if len(points) > 1:
        b1, t1 = points[-2]
        exponent = max(math.log(t2 / t1) / math.log(b2 / b1), 1.0)
    return t2 * (amount / b2) ** exponent


def scaling_section(session: Session) -> dict[str, Any]:
    cfg = session.config
    benchmark = cfg.benchmarks[0]
    instance = session.instances(benchmark)[0]
    d = get_benchmark(benchmark, session.yahpo_data).d
    optimizers, skipped = _split_available(cfg.scaling_optimizers)
    rows = []
    seeds = range(1, cfg.scaling_seeds + 1)
    with _bar(len(optimizers) * len(cfg.scaling_budgets) * len(seeds), "scaling") as bar:
        for optimizer in optimizers:
            points: list[tuple[float, float]] = []
            for spec in cfg.scaling_budgets:
                amount = Budget.parse(spec, d).amount
                if points and (projected := _projected_seconds(points, amount)) > cfg.scaling_max_run_s:
                    skipped.append({"optimizer": optimizer, "budget": spec,
                                    "reason": f"projected {projected:.0f} s per run > {cfg.scaling_max_run_s:.0f} s",
                                    "projected_s": projected})
                    bar.update(len(seeds))
                    continue
                runs = []
                for seed in seeds:
                    runs.append(session.run("ours", optimizer, benchmark, instance, seed, spec))
                    bar.update()
                mean_s = float(np.mean([r["run_s"] for r in runs]))
                growth = (math.log(mean_s / points[-1][1]) / math.log(amount / points[-1][0])) if points else None
                points.append((amount, mean_s))
                rows += [{**r, "full_evals": amount, "growth_exponent": growth} for r in runs]
    return {"benchmark": benchmark, "instance": instance, "budgets": list(cfg.scaling_budgets),
            "max_run_s": cfg.scaling_max_run_s, "rows": rows, "skipped": skipped}


def api_section(session: Session) -> dict[str, Any]:
    from metaopt.bench.api_overhead import measure_api

    cfg = session.config
    plan = [(b, o, s) for b in cfg.benchmarks for o in cfg.api_optimizers for s in range(1, cfg.seeds + 1)]
    rows = []
    with _bar(len(plan), "api") as bar:
        for benchmark, optimizer, seed in plan:
            problem = get_benchmark(benchmark, session.yahpo_data).problem(session.instances(benchmark)[0])
            rows.append(measure_api(problem, optimizer, seed, cfg.budget))
            bar.update()
    return {"budget": cfg.budget, "rows": rows}


def command_line(sections: list[str], quick: bool, out: Path, md: Path, seeds: int | None, instances: int | None,
                 benchmarks: tuple[str, ...] | None, keep_other_sections: bool = False,
                 baseline: str | None = None) -> str:
    """The ``metaopt bench`` command that reproduces a run (the data directory aside)."""
    parts = ["metaopt bench", f"--sections {','.join(sections)}", *(["--quick"] if quick else [])]
    parts += [f"--baseline {baseline}"] if baseline is not None else []
    parts += ["--keep-other-sections"] if keep_other_sections else []
    parts += [f"--seeds {seeds}"] if seeds is not None else []
    parts += [f"--instances {instances}"] if instances is not None else []
    parts += [f"--benchmarks {','.join(benchmarks)}"] if benchmarks else []
    return " ".join(parts + [f"--out {out}", f"--md {md}"])


def run_bench(sections: str, quick: bool, out: Path, md: Path, seeds: int | None = None,
              instances: int | None = None, benchmarks: str | None = None,
              yahpo_data: str | None = None, keep_other_sections: bool = False,
              baseline: str | None = None) -> dict[str, Any]:
    """Run the comma-separated ``sections``; write the JSON result to ``out`` and the Markdown to ``md``.

    ``seeds``, ``instances`` and ``benchmarks`` (comma-separated names) override the configuration
    (:data:`bench.config.QUICK` with ``quick``, else :data:`bench.config.FULL`). Each section records
    when, on which commit and by which command it was measured (``measured``);
    ``keep_other_sections`` carries the sections of the existing ``out`` that this call does not run
    over into the new result (a section that takes an hour need not be rerun with the others).
    ``baseline`` (a git revision) is the older code of the ``baseline`` section, which needs it.
    """
    from metaopt.bench.report import markdown, section_stamp

    chosen = parse_sections(sections)
    previous = read_json_file(out, "--keep-other-sections") if keep_other_sections and out.exists() else None
    if ("baseline" in chosen) != (baseline is not None):
        raise UsageError("--baseline REV and the section 'baseline' go together: the section times the optimize "
                         "stage of the commit REV against this checkout")
    if baseline is not None:
        from metaopt.bench.baseline import resolve_commit

        resolve_commit(baseline)  # an unknown revision fails before any work
    if seeds is not None and seeds < 1:
        raise UsageError(f"--seeds must be at least 1, got {seeds}")
    if instances is not None and instances < 1:
        raise UsageError(f"--instances must be at least 1, got {instances}")
    names = tuple(b.strip() for b in benchmarks.split(",") if b.strip()) if benchmarks is not None else None
    if names is not None and not names:
        raise UsageError("--benchmarks: give at least one benchmark name, e.g. yahpo:lcbench")
    config = (QUICK if quick else FULL).with_overrides(seeds, instances, names)
    for name in config.benchmarks:
        get_benchmark(name, yahpo_data)  # unknown benchmarks and missing data fail before any work
    session = Session(config, yahpo_data)
    results: dict[str, Any] = {"machine": machine_info(),
                               "command": command_line(chosen, quick, out, md, seeds, instances, names,
                                                       keep_other_sections, baseline),
                               "config": asdict(config), "sections": {}}
    started = time.perf_counter()
    for section in chosen:
        section_started = time.perf_counter()
        if section == "overhead":
            data = overhead_section(session)
        elif section == "peers":
            data = peers_section(session)
        elif section == "meta":
            from metaopt.bench.meta_throughput import meta_section

            data = meta_section(config, yahpo_data)
        elif section == "scaling":
            data = scaling_section(session)
        elif section == "baseline":
            from metaopt.bench.baseline import baseline_section

            assert baseline is not None  # run_bench refuses the section without --baseline
            data = baseline_section(config, yahpo_data, baseline)
        elif section == "api":
            data = api_section(session)
        elif section == "clock":
            from metaopt.bench.clock import clock_section

            data = clock_section(config, yahpo_data)
        elif section == "replay":
            from metaopt.bench.replay import replay_section

            data = replay_section(config, yahpo_data)
        elif section == "meta_fidelity":
            from metaopt.bench.meta_fidelity import meta_fidelity_section

            data = meta_fidelity_section(config, yahpo_data)
        else:
            raise AssertionError(f"unhandled section {section}")
        data["wall_time_s"] = time.perf_counter() - section_started
        data["measured"] = section_stamp(results)
        results["sections"][section] = data
        print(f"bench: {section} done in {data['wall_time_s']:.0f} s", flush=True)
    results["wall_time_s"] = time.perf_counter() - started
    if previous is not None:
        kept = {name: {**data, "measured": data.get("measured") or section_stamp(previous)}
                for name, data in previous.get("sections", {}).items() if name not in results["sections"]}
        merged = {**kept, **results["sections"]}
        results["sections"] = {name: merged[name] for name in SECTIONS if name in merged}
    atomic_write_text(out, json.dumps(results, indent=1, default=_json_default) + "\n")
    atomic_write_text(md, markdown(results))
    print(f"bench: wrote {out} and {md} ({results['wall_time_s']:.0f} s)")
    return results


def report_only(out: Path, md: Path) -> None:
    """Regenerate the Markdown report from an existing JSON result."""
    from metaopt.bench.report import markdown

    results = read_json_file(out, "--report-only (run `metaopt bench` first to write it)")
    atomic_write_text(md, markdown(results))
    print(f"bench: wrote {md} from {out}")


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")
