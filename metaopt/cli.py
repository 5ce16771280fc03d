"""The ``metaopt`` command line.

Every command has ``--help``. Bad input (unknown benchmark, optimizer or instance, malformed
files, missing or damaged data, a flag of the wrong type or out of range, an output path that
cannot be written) ends with one line ``metaopt: error: ...`` on stderr and exit status 2; it is
found before the work starts. Outputs are written atomically, only once the work succeeded. Commands that write into a study
output folder (study run, optimize, evaluate, ablate, importance, report) hold its lock
(``<output>/.lock``): a second one on the same folder is refused at once, with exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from contextlib import nullcontext
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

import pandas as pd

from metaopt.core.errors import UsageError
from metaopt.core.store_utils import atomic_write_text, check_writable, describe_os_error, output_lock, read_text_file
from metaopt.store.study_spec import MAX_SEEDS, SEED_LIMIT, load_study

EXIT_USAGE = 2


class _Parser(argparse.ArgumentParser):
    """argparse with its errors (unknown flags, wrong types, missing arguments) as a UsageError, which
    :func:`main` prints as the one line ``metaopt: error: ...`` (argparse would print the usage too)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _count(minimum: int, below: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer >= ``minimum`` (e.g. 0 for seeds, 1 for workers) and < ``below`` if given."""
    allowed = f"an integer >= {minimum}" + (f" and < {below}" if below is not None else "")

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {text!r}") from None
        if value < minimum or (below is not None and value >= below):
            raise argparse.ArgumentTypeError(f"must be {allowed}, got {value}")
        return value
    return parse


_seed_type = _count(0, SEED_LIMIT)
"""Seeds: 0 <= seed < 2**31 (metaopt.store.study_spec.SEED_LIMIT: what numpy and SMAC accept)."""
_positive_type = _count(1)


def _eta_type(text: str) -> float:
    """``--eta``: a real number > 1."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number > 1, got {text!r}") from None
    if not value > 1 or not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a number > 1, got {text}")
    return value


def _duration_type(text: str) -> float:
    """``--stop-after``: a duration such as ``90m``, ``2.5h`` or ``600s`` (a bare number: seconds)."""
    from metaopt.core.budget import parse_duration

    seconds = parse_duration(text)
    if math.isnan(seconds):
        raise argparse.ArgumentTypeError(f"expected a duration such as 90m, 2.5h or 600s, got {text!r}")
    return seconds


def _sim_time_type(text: str) -> str:
    """``--sim-time``: a simulated-clock time limit in the forms a study's ``time_limit`` takes
    (:func:`metaopt.core.budget.is_time_limit`), read on the run's instance by :func:`cmd_run`."""
    from metaopt.core.budget import TIME_LIMIT_FORMS, is_time_limit

    if not is_time_limit(text):
        raise argparse.ArgumentTypeError(f"must be {TIME_LIMIT_FORMS}, got {text!r}")
    return text


# -- helpers ------------------------------------------------------------------------------------

def _add_data_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--yahpo-data", metavar="PATH", default=None,
                        help="YAHPO Gym data directory (default: $METAOPT_YAHPO_DATA)")


def _print_table(df: pd.DataFrame) -> None:
    with pd.option_context("display.max_rows", 500, "display.max_columns", 50, "display.width", 200):
        print(df.to_string(index=False))


def _resolve_optimizer(args: argparse.Namespace, fidelity: Any) -> tuple[str, dict[str, Any]]:
    """``--optimizer NAME`` (a preset or a JSON file) or ``--config FILE``, else the default optimizer
    (:data:`metaopt.spaces.presets.DEFAULT_OPTIMIZER`): the name and configuration to run."""
    from metaopt.spaces.presets import DEFAULT_OPTIMIZER
    from metaopt.spaces.resolve import read_config_file, resolve_optimizer

    if args.config and args.optimizer:
        raise UsageError("give either --optimizer NAME or --config FILE, not both")
    if args.config:
        return Path(args.config).stem, read_config_file(args.config, "--config")
    resolved = resolve_optimizer(args.optimizer or DEFAULT_OPTIMIZER, fidelity, "--optimizer")
    assert resolved.config is not None  # None only for a peer or a pending gamma*, which are not accepted here
    return resolved.name, resolved.config


# -- commands -----------------------------------------------------------------------------------

def cmd_components(args: argparse.Namespace) -> None:
    from metaopt.core.registry import CATEGORIES, components
    from metaopt.spaces.design_space import describe_hyperparameter

    for cat in CATEGORIES.values():
        comps = components(cat.name)
        if not comps:
            continue
        print(f"{cat.name}  (design-space parameter: {cat.selector}, default: {cat.default})")
        print(f"    {cat.description}")
        for comp in comps:
            print(f"  - {comp.name}: {comp.description}")
            for hp in comp.hyperparameters:
                print(f"        {hp.name}: {describe_hyperparameter(hp)} (default {hp.default_value:g})"
                      if not isinstance(hp.default_value, str) else
                      f"        {hp.name}: {describe_hyperparameter(hp)} (default {hp.default_value})")
        print()


def cmd_benchmark_list(args: argparse.Namespace) -> None:
    from metaopt.core.benchmarks import get_benchmark, list_benchmark_names, yahpo_data_dir

    rows = [get_benchmark(name, args.yahpo_data).describe() for name in list_benchmark_names(args.yahpo_data)]
    _print_table(pd.DataFrame(rows))
    if yahpo_data_dir(args.yahpo_data) is None:
        print("\n(YAHPO scenarios not listed: set METAOPT_YAHPO_DATA or pass --yahpo-data PATH)")


def _read_jsonl(path: str) -> list[dict[str, Any]]:
    lines = read_text_file(path, "--input", "a JSONL file").splitlines()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise UsageError(f"--input {path} line {number}: not valid JSON ({err.msg})") from None
        if not isinstance(record, dict) or "instance" not in record or not isinstance(record.get("config"), dict):
            raise UsageError(f'--input {path} line {number}: expected {{"instance": ..., "config": {{...}}}}')
        records.append(record)
    return records


def cmd_benchmark_eval(args: argparse.Namespace) -> None:
    from metaopt.core.benchmarks import get_benchmark

    check_writable(args.output, "--output", folder=False)
    bench = get_benchmark(args.benchmark, args.yahpo_data)
    records = _read_jsonl(args.input)
    for rec in records:
        bench.problem(rec["instance"])  # unknown instances fail before any work
    results: list[dict[str, float] | None] = [None] * len(records)
    by_instance: dict[str, list[int]] = {}
    for i, rec in enumerate(records):
        by_instance.setdefault(str(rec["instance"]), []).append(i)
    for instance, idx in by_instance.items():
        if args.one_at_a_time:
            out = [bench.evaluate_raw(instance, [records[i]["config"]])[0] for i in idx]
        else:
            out = bench.evaluate_raw(instance, [records[i]["config"] for i in idx])
        for i, res in zip(idx, out):
            results[i] = res
    text = "".join(json.dumps({**rec, "result": res}) + "\n" for rec, res in zip(records, results))
    atomic_write_text(Path(args.output), text)
    print(f"evaluated {len(records)} configurations on {bench.name}; wrote {args.output}")


def _chosen_instances(bench: Any, instances: str | None, limit: int | None) -> list[str]:
    """``--instances test|train|all|ID,ID,...`` (default test) and ``--limit N`` of a command on ``bench``."""
    if instances in (None, "test", "train", "all"):
        chosen = bench.instances_of(instances or "test")
    else:
        try:
            chosen = bench.named_instances([i.strip() for i in instances.split(",")])
        except UsageError as err:
            raise UsageError(f"--instances: {err}") from None
    return list(chosen[:limit])


def cmd_benchmark_fidelity(args: argparse.Namespace) -> None:
    from tqdm import tqdm

    from metaopt.core.benchmarks import get_benchmark
    from metaopt.core.benchmarks.fidelity_check import check_fidelity, summarize

    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path:
            check_writable(path, flag, folder=False)
    work = []  # (benchmark, instance, problem) for every benchmark, checked before any evaluation
    for name in [n.strip() for n in args.benchmark.split(",") if n.strip()]:
        bench = get_benchmark(name, args.yahpo_data)
        instances = _chosen_instances(bench, args.instances, args.limit)
        if not instances:
            raise UsageError(f"--instances: {bench.name} has no {args.instances} instances")
        for instance in instances:
            problem = bench.problem(instance)
            if problem.fidelity.r_min >= problem.fidelity.r_max:
                raise UsageError(f"--benchmark: {bench.name} has no fidelity to check (r_min = r_max on {instance}); "
                                 "every evaluation is at full fidelity")
            work.append((bench.name, str(instance), problem))
    rows: dict[str, list] = {}
    for name, instance, problem in tqdm(work, desc="instances", disable=args.quiet or len(work) < 2):
        rows.setdefault(name, []).extend(check_fidelity(problem, args.configs, args.seed, args.eta, label=instance))
    for name, checks in rows.items():
        if args.per_instance:
            _print_table(pd.DataFrame([row.as_dict() for row in checks]).round(3))
            print()
        print(f"{name}: {len({row.instance for row in checks})} instances x {args.configs} random configurations "
              f"(seed {args.seed}), each evaluated at Hyperband's rungs r_max / {args.eta:g}^k and at r_max")
        _print_table(pd.DataFrame(summarize(checks)).round(3))
        print()
    print("spearman: rank correlation of the losses at the rung and at r_max; top_recall: share of the best 10% "
          "at r_max among the rung's best third; budget_share: r / r_max, what an evaluation there spends of "
          "a run's budget; cost_share: its cost over a full evaluation's")
    if args.json:
        payload = {"configs": args.configs, "seed": args.seed, "eta": args.eta,
                   "benchmarks": {name: {"rows": [row.as_dict() for row in checks], "summary": summarize(checks)}
                                  for name, checks in rows.items()}}
        atomic_write_text(Path(args.json), json.dumps(payload, indent=1) + "\n")
        print(f"wrote {args.json}")
    if args.plot:
        from metaopt.analysis.plots import plot_fidelity_check

        table = pd.DataFrame([{"benchmark": name, **row.as_dict()} for name, checks in rows.items() for row in checks])
        plot_fidelity_check(table, Path(args.plot),
                            f"{args.configs} random configurations per instance (seed {args.seed}), evaluated at "
                            f"Hyperband's rungs r_max / {args.eta:g}^k down to r_min and at r_max; line: median over "
                            "a benchmark's instances, band: lowest to highest instance.")
        print(f"wrote {args.plot}")


def _cheap_end_override(values: list[str] | None, bench: Any) -> dict[str, str] | None:
    """The ``--cheap-end NAME=lower|upper`` values as a dict (None when none are given)."""
    if not values:
        return None
    from ConfigSpace.hyperparameters import NumericalHyperparameter

    numeric = [name for name, hp in bench.search_space.items() if isinstance(hp, NumericalHyperparameter)]
    override = {}
    for value in values:
        name, _, end = value.partition("=")
        if name not in numeric:
            raise UsageError(f"--cheap-end {value}: {name!r} is not a numeric hyperparameter of {bench.name}; "
                             f"allowed names: {', '.join(numeric) or 'none'}")
        if end not in ("lower", "upper"):
            raise UsageError(f"--cheap-end {value}: the end must be lower or upper (NAME=lower|upper)")
        override[name] = end
    return override


def cmd_run(args: argparse.Namespace) -> None:
    from dataclasses import replace

    from tqdm import tqdm

    from metaopt.core.benchmarks import get_benchmark
    from metaopt.core.budget import Budget, parse_time_limit
    from metaopt.core.references import get_reference, resolve_time_limit
    from metaopt.engine.peers import PEERS, run_peer
    from metaopt.engine.simclock import run
    from metaopt.store.run_io import RunResult, summary_file, trace_file, write_run

    if args.out:
        check_writable(args.out, "--out", folder=True)
    bench = get_benchmark(args.benchmark, args.yahpo_data)
    problem = replace(bench.problem(args.instance), cheap_end_override=_cheap_end_override(args.cheap_end, bench))
    peer = args.optimizer if args.optimizer in PEERS and not args.config else None
    name, config = (peer, None) if peer else _resolve_optimizer(args, problem.fidelity)
    budget = Budget.parse(args.budget, problem.d)
    reference = get_reference(bench, problem.instance)
    time_limit = None if args.sim_time is None else resolve_time_limit(parse_time_limit(args.sim_time, problem.d),
                                                                        problem)
    with tqdm(total=1.0, desc=f"{name} on {problem}", unit="budget", disable=True if args.quiet else None,
              bar_format="{l_bar}{bar}| {n:.0%} [{elapsed}<{remaining}]") as bar:
        def progress(t: float) -> None:
            bar.n = t
            bar.refresh()
        if peer:
            result: RunResult = run_peer(peer, problem, args.seed, budget, reference=reference, progress=progress,
                                         workers=args.sim_workers, time_limit=time_limit)
        else:
            assert config is not None  # resolved above
            result = run(config, problem, args.seed, budget, progress=progress, reference=reference,
                         workers=args.sim_workers, time_limit=time_limit)
    result.summary["optimizer"] = name
    if not peer:
        result.summary["best_config"] = result.config  # type: ignore[attr-defined]
    if problem.cheap_end_override:
        result.summary["cheap_end"] = problem.cheap_end
    if args.out:
        write_run(Path(args.out), result)
    summary = {k: v for k, v in result.summary.items() if k != "config"}
    print(json.dumps(summary, indent=1))
    if args.out:
        print(f"wrote {trace_file(Path(args.out))} and {summary_file(Path(args.out))}")


def cmd_schedule(args: argparse.Namespace) -> None:
    from metaopt.core.benchmarks import get_benchmark
    from metaopt.engine.loop import Optimizer

    bench = get_benchmark(args.benchmark, args.yahpo_data)
    name, config = _resolve_optimizer(args, bench.fidelity)
    optimizer = Optimizer.from_config(config)
    schedule = optimizer.schedule
    s = schedule.stages(bench.fidelity)
    mu = int(config["mu"])
    rows = []
    seen: set[int] = set()
    for plan in schedule.brackets(bench.fidelity, mu):
        if plan.bracket in seen or len(seen) >= s:
            break
        seen.add(plan.bracket)
        cost = sum(st.n_total * st.fidelity / bench.fidelity.r_max for st in plan.stages)
        for st in plan.stages:
            rows.append({"bracket": plan.bracket, "stage": st.stage, "fidelity": st.fidelity,
                         "configs": st.n_total, "survivors": st.n_survivors, "new": st.n_total - st.n_survivors,
                         "bracket_cost": round(cost, 3)})
    print(f"{name} on {bench.name}: s = {s} stages, mu = {mu}, fidelity {bench.fidelity.name} "
          f"[{bench.fidelity.r_min:g}, {bench.fidelity.r_max:g}]; cost in full evaluations")
    _print_table(pd.DataFrame(rows))


def cmd_stages(args: argparse.Namespace) -> None:
    """``metaopt study run`` (every stage) and ``metaopt optimize`` / ``evaluate`` (one stage)."""
    from metaopt.stages.study import STAGES, run_stages

    study = load_study(Path(args.study))
    stages = list(STAGES) if args.stage_name == "study run" else [args.stage_name]
    run_stages(study, stages, yahpo_data=args.yahpo_data, quiet=args.quiet,
               workers=args.workers, scheduler=args.scheduler, stop_after=getattr(args, "stop_after", None))


def _add_study_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("study", metavar="STUDY.yaml")
    p.add_argument("--workers", type=_positive_type, default=None,
                   help="worker processes (a Dask LocalCluster when > 1; default: the study's 'workers', else 1)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="join an existing Dask scheduler (e.g. tcp://host:8786) instead of starting a LocalCluster")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    _add_data_option(p)


# -- parser -------------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="metaopt",
        description="Design HPO algorithms by optimization, then explain them.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("components", help="list registered components by category, with their hyperparameters")
    p.set_defaults(func=cmd_components)

    bench = sub.add_parser("benchmark", help="benchmarks: list them, evaluate configurations, check their fidelity")
    bsub = bench.add_subparsers(dest="benchmark_command", metavar="SUBCOMMAND", required=True)
    p = bsub.add_parser("list", help="benchmarks with instance counts, train/test sizes, fidelity, loss, cost")
    _add_data_option(p)
    p.set_defaults(func=cmd_benchmark_list)
    p = bsub.add_parser("eval", help="evaluate configurations from a JSONL file",
                        description='Each input line is {"instance": ..., "config": {...}} (config includes '
                                    'the fidelity); each output line is the input plus "result": {target: value}.')
    p.add_argument("--benchmark", required=True, help="e.g. yahpo:lcbench or synthetic:mlp")
    p.add_argument("--input", required=True, metavar="IN.jsonl")
    p.add_argument("--output", required=True, metavar="OUT.jsonl")
    p.add_argument("--one-at-a-time", action="store_true",
                   help="evaluate each configuration in its own call (bitwise equal to the YAHPO reference); "
                        "default: one batched call per instance (float32 rounding differences only)")
    _add_data_option(p)
    p.set_defaults(func=cmd_benchmark_eval)
    p = bsub.add_parser("fidelity", help="does the fidelity pay? rank correlation of low fidelities with the full one",
                        description="Draws random configurations, evaluates each at Hyperband's rungs "
                                    "r_max / eta^k (down to r_min) and at r_max, and prints per rung the rank "
                                    "correlation with the full fidelity, how many of the best configurations "
                                    "the rung keeps, and what an evaluation there spends. Low correlations mean "
                                    "a multi-fidelity schedule spends budget on rankings the full fidelity "
                                    "does not share.")
    p.add_argument("--benchmark", required=True,
                   help="e.g. yahpo:lcbench, or comma-separated benchmarks (one line each in --plot)")
    p.add_argument("--instances", default="test",
                   help="test (default), train, all, or comma-separated instance ids")
    p.add_argument("--limit", type=_positive_type, metavar="N", help="the first N of those instances")
    p.add_argument("--configs", type=_count(10), default=200, metavar="N",
                   help="random configurations per instance (default %(default)s)")
    p.add_argument("--eta", type=_eta_type, default=3.0, help="the rungs' ratio (default %(default)s)")
    p.add_argument("--seed", type=_seed_type, default=0, help="the configurations' seed (default %(default)s)")
    p.add_argument("--per-instance", action="store_true", help="also print every instance's rows")
    p.add_argument("--json", metavar="FILE", help="write the rows and the summary as JSON")
    p.add_argument("--plot", metavar="FILE.png", help="draw the rank correlation against the rung's fidelity")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    _add_data_option(p)
    p.set_defaults(func=cmd_benchmark_fidelity)

    for cmd, helptext, func in [
        ("run", "run one optimizer on one problem instance", cmd_run),
        ("schedule", "show the bracket/stage plan an optimizer uses on a benchmark", cmd_schedule),
    ]:
        p = sub.add_parser(cmd, help=helptext)
        p.add_argument("--optimizer", metavar="NAME", help="a preset name (see `metaopt presets`) or a JSON file "
                       "(default: metaopt_default, the designs the pooled meta-optimizations found)"
                       + ("; or a peer (smac_hpo, smac_hb, optuna_tpe, flaml_cfo; syne_asha and syne_bohb on the "
                          "simulated clock)" if cmd == "run" else ""))
        p.add_argument("--config", metavar="FILE", help="a design-space configuration as a JSON object")
        p.add_argument("--benchmark", required=True, help="e.g. yahpo:lcbench or synthetic:mlp")
        if cmd == "run":
            p.add_argument("--instance", required=True)
            p.add_argument("--budget", default="30d",
                           help="30d = 30 x d full evaluations (default), 100 = full evaluations, 3600s = cost units")
            p.add_argument("--seed", type=_seed_type, default=1, help="the run's seed, an integer >= 0 (default 1)")
            p.add_argument("--cheap-end", action="append", metavar="NAME=lower|upper",
                           help="the cheap end of a numeric hyperparameter, where low-cost starts (CFO) put it; "
                                "repeatable; overrides the benchmark's declaration for NAME")
            p.add_argument("--out", metavar="DIR", help="write DIR/trace.csv and DIR/summary.json")
            p.add_argument("--quiet", action="store_true", help="no progress bar")
            p.add_argument("--sim-workers", type=_positive_type, metavar="N",
                           help="run on a simulated clock with N workers, each evaluation taking its cost in "
                                "simulated seconds (the trace gets worker, sim_start and sim_time)")
            p.add_argument("--sim-time", type=_sim_time_type, metavar="DURATION",
                           help="on the simulated clock: start nothing after this much simulated time (90m, 2.5h, "
                                "600s, or 30dc / 100c: the time of 30 x d / 100 typical full evaluations of the "
                                "instance) and discard results arriving later")
        _add_data_option(p)
        p.set_defaults(func=func)

    p = sub.add_parser("presets", help="list the named optimizers (known algorithms as points of the design space)")
    p.set_defaults(func=cmd_presets, name=None)
    psub = p.add_subparsers(dest="presets_command", metavar="SUBCOMMAND")
    q = psub.add_parser("show", help="a preset's configuration as JSON (usable with `metaopt run --config`)")
    q.add_argument("name", metavar="NAME")
    q.add_argument("--benchmark", default="synthetic:mlp",
                   help="benchmark whose fidelity range fixes Hyperband's mu(1) (default synthetic:mlp)")
    q.add_argument("--fidelity", metavar="R_MIN:R_MAX",
                   help="a fidelity range instead of a benchmark's, e.g. 1:27 (integers: an integer fidelity), "
                        "as metaopt.minimize(fidelity=(name, 1, 27)) uses")
    _add_data_option(q)
    q.set_defaults(func=cmd_presets)

    space = sub.add_parser("space", help="the design space: summary table, ConfigSpace JSON export")
    spsub = space.add_subparsers(dest="space_command", metavar="SUBCOMMAND", required=True)
    for cmd, helptext, func in [("show", "summary table of the design space", cmd_space_show),
                                ("export", "write the design space as ConfigSpace JSON", cmd_space_export)]:
        q = spsub.add_parser(cmd, help=helptext)
        if cmd == "export":
            q.add_argument("--out", required=True, metavar="FILE")
        q.add_argument("--restrict", metavar="NAME", help="a named restriction (gamma1..gamma7, rho0, ...)")
        q.set_defaults(func=func)

    study = sub.add_parser("study", help="declarative studies")
    ssub = study.add_subparsers(dest="study_command", metavar="SUBCOMMAND", required=True)
    p = ssub.add_parser("run", help="run a study file: optimize (if it has a 'meta' section), evaluate, ablate, "
                                       "importance, report")
    _add_study_arguments(p)
    _add_stop_after(p)
    p.set_defaults(func=cmd_stages, stage_name="study run")
    p = ssub.add_parser("export-runs", help="write a study's finished held-out runs to one small file (a runs file), "
                                               "e.g. for a study that names it in report_with to read in a later session",
                        description="Reads OUTPUT_DIR/eval/runs and writes FILE (gzip-compressed JSON lines: each run's "
                                    "summary and its incumbent's regret trace; see analysis/held_out_runs.py).")
    p.add_argument("output_dir", metavar="OUTPUT_DIR", help="a study's output folder, e.g. results/rbv2_xgboost_smac")
    p.add_argument("--out", required=True, metavar="FILE", help="the runs file to write, e.g. docs/results/X/runs.jsonl.gz")
    p.add_argument("--optimizers", nargs="+", metavar="NAME", help="only these (default: all the study evaluates)")
    p.set_defaults(func=cmd_export_runs)
    p = ssub.add_parser("export-meta", help="write a study's finished meta-optimization runs to one small file "
                                               "(a compact meta-archive) that the study's meta.archive reads: a "
                                               "search continues from it in a later session",
                        description="Reads OUTPUT_DIR/meta/runs and writes FILE (gzip-compressed JSON lines: each "
                                    "inner run's configuration, instance, seed, objective and a few summary fields). "
                                    "A study of several restrictions (meta.restriction a list) has one search per "
                                    "arm (OUTPUT_DIR/arms/<restriction>/meta/runs) and one FILE per arm, with the "
                                    "arm's name before the extensions (meta_runs.<restriction>.jsonl.gz), which "
                                    "its meta.archive reads back arm by arm.")
    p.add_argument("output_dir", metavar="OUTPUT_DIR", help="a study's output folder, e.g. results/default")
    p.add_argument("--out", metavar="FILE", help="the file to write (default: the study's meta.archive; one per arm, the arm's name before the extensions, for a list of restrictions)")
    p.set_defaults(func=cmd_export_meta)
    p = sub.add_parser("optimize", help="meta-optimize: SMAC (or random search) searches the design space on the "
                                        "training instances")
    _add_study_arguments(p)
    _add_stop_after(p)
    p.set_defaults(func=cmd_stages, stage_name="optimize")
    p = sub.add_parser("evaluate", help="evaluate gamma*, presets and peers on the held-out instances x seeds")
    _add_study_arguments(p)
    p.set_defaults(func=cmd_stages, stage_name="evaluate")
    _add_ablate_parser(sub)
    _add_importance_parser(sub)
    _add_report_parser(sub)
    _add_reproductions_parser(sub)
    _add_bench_parser(sub)
    return parser


def _add_stop_after(p: argparse.ArgumentParser) -> None:
    p.add_argument("--stop-after", type=_duration_type, default=None, metavar="DURATION",
                   help="a slice of a long search: start no new batch of meta-trials after DURATION (90m, 2h, 600s), "
                        "store the runs under way, skip the later stages; run again to continue")


def cmd_export_meta(args: argparse.Namespace) -> None:
    """``metaopt study export-meta``: the compact meta-archive of each meta-optimization of the study
    (one per arm for a list of restrictions, :func:`metaopt.store.study_spec.arm_archive`), with the runs
    of the archive it continued from; an arm with no finished run yet is skipped with a line."""
    from metaopt.stages.meta import export_meta_runs
    from metaopt.store.meta_archive import check_archived_arm, check_archived_clock
    from metaopt.store.store import StudyStore

    store = StudyStore(Path(args.output_dir))
    meta = store.spec().meta
    if meta is None:
        raise UsageError(f"{store.root}: the study has no meta section: no meta-optimization runs to export")
    if args.out is None and meta.archive is None:
        raise UsageError(f"{store.root}: the study names no meta.archive; give --out FILE")
    clock = meta.clock.settings() if meta.clock is not None else None
    arms = isinstance(meta.restriction, list)
    previous = meta.archive_files()
    for restriction in previous:  # every check before the first file is written
        check_archived_clock(previous[restriction], clock)
        check_archived_arm(previous[restriction], restriction)
    stores = store.meta_stores(meta.restriction)
    written = 0
    for restriction, target in meta.archive_files(args.out).items():
        count = export_meta_runs(stores[restriction], target, previous.get(restriction), clock,
                                 restriction if arms else None, max_evals=meta.max_evals,
                                 objective=meta.objective_tag)
        if count:
            print(f"wrote {count} meta-optimization runs to {target} ({target.stat().st_size / 1024:.0f} KiB)")
            written += 1
        elif arms:
            print(f"{target}: not written (the arm {restriction} has no finished inner runs yet)")
    if not written:
        raise UsageError(f"{store.root / 'arms' if arms else store.meta_runs_dir} holds no finished inner runs to export")


def cmd_export_runs(args: argparse.Namespace) -> None:
    from metaopt.analysis.held_out_runs import write_runs_file

    target = Path(args.out)
    count = write_runs_file(Path(args.output_dir), target, args.optimizers)
    print(f"wrote {count} runs to {target} ({target.stat().st_size / 1024:.0f} KiB)")


def _add_bench_parser(sub: Any) -> None:
    p = sub.add_parser("bench", help="performance harness: overhead, peers, meta throughput, scaling "
                                     "(JSON result + Markdown report)",
                       description="Measures in one process, every ratio against a reference taken in the same "
                                   "process (see bench/harness.py). Default: the full configuration (about 20 "
                                   "minutes on 2 cores); --quick: a minutes-sized one.")
    p.add_argument("--sections", default="overhead,peers,meta,scaling,api",
                   help="comma-separated subset of overhead,peers,meta,scaling,api,baseline,clock,replay,"
                        "meta_fidelity (default: all but baseline, clock, replay and meta_fidelity)")
    p.add_argument("--quick", action="store_true", help="the minutes-sized configuration (CI, tests)")
    p.add_argument("--out", default="bench/results.json", metavar="FILE", help="JSON result (default %(default)s)")
    p.add_argument("--md", default="docs/benchmarks.md", metavar="FILE", help="Markdown report (default %(default)s)")
    p.add_argument("--seeds", type=_positive_type, default=None, metavar="N",
                   help="seeds per instance (default: configuration)")
    p.add_argument("--instances", type=_positive_type, default=None, metavar="N",
                   help="instances per benchmark, the first N of its test split (default: configuration)")
    p.add_argument("--benchmarks", default=None, metavar="NAMES",
                   help="comma-separated benchmarks (default yahpo:lcbench,yahpo:rbv2_xgboost)")
    p.add_argument("--baseline", default=None, metavar="REV",
                   help="the git commit whose optimize stage the section 'baseline' times against this checkout's "
                        "(e.g. a tag or hash; its package is built into a temporary folder)")
    p.add_argument("--report-only", action="store_true", help="only rewrite --md from the existing --out JSON")
    p.add_argument("--keep-other-sections", action="store_true",
                   help="keep the sections of the existing --out JSON that this call does not run (the report "
                        "says when and on which commit each section was measured)")
    _add_data_option(p)
    p.set_defaults(func=cmd_bench)


def cmd_bench(args: argparse.Namespace) -> None:
    from metaopt.bench.harness import report_only, run_bench

    for flag, path in (("--out", args.out), ("--md", args.md)):
        if not (args.report_only and flag == "--out"):  # --report-only reads --out
            check_writable(path, flag, folder=False)
    if args.report_only:
        report_only(Path(args.out), Path(args.md))
        return
    run_bench(args.sections, args.quick, Path(args.out), Path(args.md), seeds=args.seeds, instances=args.instances,
              benchmarks=args.benchmarks, yahpo_data=args.yahpo_data, keep_other_sections=args.keep_other_sections,
              baseline=args.baseline)


def _add_report_parser(sub: Any) -> None:
    p = sub.add_parser("report", help="write a study's design-analysis report (HTML and Markdown with figures)",
                       description="Reads a study's output folder (study.yaml, meta/, eval/, ablation/, importance/, "
                                   "answer.md) and writes OUTPUT_DIR/report/{report.html, report.md, figures/*.png} "
                                   "(see analysis/report.py).")
    p.add_argument("output_dir", metavar="OUTPUT_DIR", help="a study's output folder, e.g. results/lcbench_small")
    p.add_argument("--alpha", type=float, default=0.05,
                   help="significance level of the Friedman and Nemenyi tests (default 0.05)")
    p.add_argument("--budgets", nargs="+", metavar="BUDGET",
                   help="budgets of the box plots and critical-difference diagrams, in the study's unit (e.g. 10d); "
                        "default: the study's report_budgets, else 25%% of its budget; the full budget is always added")
    p.set_defaults(func=cmd_report)


def cmd_report(args: argparse.Namespace) -> None:
    from metaopt.analysis.report import write_report

    from metaopt.store.store import ReportFiles, StudyStore

    if not 0 < args.alpha < 1:
        raise UsageError(f"--alpha must be between 0 and 1, got {args.alpha}")
    output = Path(args.output_dir)
    # Not a study's output folder: write_report says so and writes nothing (not even the lock file).
    with output_lock(output) if StudyStore(output).is_study() else nullcontext():
        folder = write_report(output, alpha=args.alpha, budgets=args.budgets)
    files = ReportFiles(folder)
    print(f"wrote {files.html} (self-contained) and {files.markdown} with {len(files.figures())} figures "
          f"in {files.figures_dir}")


def _add_reproductions_parser(sub: Any) -> None:
    p = sub.add_parser("reproductions", help="the papers' claims against the studies' results (docs/reproductions.md)",
                       description="Reads the claims file and, for each claim, the held-out evaluation of the studies "
                                   "it names (their output folders); writes the Markdown page and one figure per "
                                   "measured claim (see analysis/reproductions.py). Claims whose studies have not "
                                   "been run are listed with the command that runs them.")
    p.add_argument("--claims", default="docs/claims.yaml", metavar="FILE", help="default %(default)s")
    p.add_argument("--studies", default="studies", metavar="DIR",
                   help="folder of the study files the claims name (default %(default)s)")
    p.add_argument("--out", default="docs/reproductions.md", metavar="FILE", help="default %(default)s")
    p.add_argument("--figures", default="docs/results/reproductions", metavar="DIR", help="default %(default)s")
    p.add_argument("--only", metavar="IDS", type=lambda text: [i for i in text.split(",") if i],
                   help="comma-separated claim ids: measure these and keep every other claim as --out has it "
                        "(to add one study's results on a machine that holds only that study's store)")
    p.set_defaults(func=cmd_reproductions)


def cmd_reproductions(args: argparse.Namespace) -> None:
    from metaopt.analysis.reproductions import write_reproductions

    outcomes = write_reproductions(Path(args.claims), Path(args.studies), Path(args.out), Path(args.figures),
                                   only=args.only)
    counts = {v: sum(o.verdict == v for o in outcomes) for v in ("reproduced", "mixed", "not reproduced", "not run")}
    kept = " (the others kept as they were)" if args.only is not None else ""
    print(f"wrote {args.out}: {len(outcomes)} claims measured{kept}, "
          + ", ".join(f"{n} {v}" for v, n in counts.items()))


def _add_importance_parser(sub: Any) -> None:
    p = sub.add_parser("importance", help="parameter importance of a meta-archive: fANOVA and local importance at gamma*",
                       description="Fits a random forest to <study-output>/meta/archive.csv and writes "
                                   "<out>/importance/{fanova,local}.{csv,png} and meta.json (see analysis/importance.py).")
    p.add_argument("--study-output", required=True, metavar="DIR", help="output folder of a study's optimize stage")
    p.add_argument("--out", metavar="DIR", default=None, help="write DIR/importance/ (default: the study output)")
    p.add_argument("--pairs", action=argparse.BooleanOptionalAction, default=True,
                   help="also estimate pairwise interactions (default: yes)")
    p.add_argument("--seed", type=_seed_type, default=1)
    p.add_argument("--trees", type=_positive_type, default=100, help="trees of the random forest (default 100)")
    p.add_argument("--recompute", action="store_true",
                   help="compute again even if DIR/importance/ holds a result from the same archive, gamma* and "
                        "settings (default: keep it)")
    p.set_defaults(func=cmd_importance)


def cmd_importance(args: argparse.Namespace) -> None:
    from metaopt.analysis.importance import importance_for_study

    from metaopt.store.store import ImportanceFiles, StudyStore

    if args.out:
        check_writable(args.out, "--out", folder=True)
    # Not a study's output folder: importance_for_study says so and writes nothing (not even the lock file).
    is_study = StudyStore(args.study_output).is_study()
    with output_lock(Path(args.out or args.study_output)) if is_study else nullcontext():
        arms = importance_for_study(Path(args.study_output), Path(args.out) if args.out else None,
                                    pairs=args.pairs, seed=args.seed, n_trees=args.trees,
                                    reuse=not args.recompute)
    for restriction, result, folder, reused in arms:
        if len(arms) > 1:
            print(f"\n== meta-optimization in {restriction}")
        print(f"random forest on {result.meta['n_rows']} archive rows ({result.meta['n_configurations']} "
              f"configurations), out-of-bag R^2 {result.meta['oob_r2']:.2f}")
        for kind, caption in [("main", "fANOVA main effects"), ("pair", "fANOVA pairwise interactions")]:
            part = result.fanova[result.fanova["kind"] == kind]
            if len(part):
                print(f"\n{caption} (top 10):")
                _print_table(part.head(10).drop(columns="kind"))
        print("\nlocal parameter importance around gamma* (top 10):")
        _print_table(result.local.head(10))
        print(f"\nkept {folder}/ (same archive, gamma* and settings; --recompute computes it again)" if reused
              else f"\nwrote {', '.join(str(path) for path in ImportanceFiles(folder).all())}")


def _add_ablate_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ablate", help="ablation between two optimizers: greedy path, one factor at a time, leave one component out",
        description="Writes OUT/ablation/NAME/{path,ofat,loco}.{csv,md,png} and meta.json (see metaopt/stages/ablation.py). "
                    "The evaluated estimator runs every candidate on instances x seeds (stored; a rerun resumes); "
                    "the surrogate estimator predicts them with a random forest fitted on a study's meta-archive.")
    p.add_argument("--benchmark", required=True, help="e.g. yahpo:lcbench or synthetic:mlp")
    p.add_argument("--from", dest="source", required=True, metavar="OPTIMIZER",
                   help="gamma_star (needs --study-output), a preset name, or a JSON file holding a configuration")
    p.add_argument("--to", dest="target", required=True, metavar="OPTIMIZER", help="as --from")
    p.add_argument("--estimator", required=True, metavar="NAME",
                   help="evaluated (run the candidates) or surrogate (predict them from the study's meta-archive)")
    p.add_argument("--study-output", metavar="DIR",
                   help="a study's output folder: meta/gamma_star.json, meta/archive.csv, study.yaml")
    p.add_argument("--variant", default="path", metavar="LIST",
                   help="comma-separated: path, ofat, loco; or all (default: path)")
    p.add_argument("--instances", metavar="SPLIT|IDS",
                   help="evaluated only: test (default), train, all, or comma-separated instance ids")
    p.add_argument("--limit", type=_positive_type, metavar="N", help="evaluated only: the first N of those instances")
    p.add_argument("--seeds", type=_count(1, MAX_SEEDS + 1), metavar="N",
                   help="evaluated only: seeds 1..N per instance (default 1)")
    p.add_argument("--budget", help="evaluated only: the run budget (default: the study's, else 30d)")
    p.add_argument("--race", action="store_true",
                   help="evaluated only: after each seed round, drop candidates clearly worse than the best "
                        "(one-sided paired t-test over instances, alpha 0.05)")
    p.add_argument("--name", help="the ablation's folder name (default: FROM-to-TO-ESTIMATOR)")
    p.add_argument("--out", required=True, metavar="DIR", help="results go to DIR/ablation/NAME/")
    p.add_argument("--workers", type=_positive_type, default=1, help="evaluated: worker processes (a Dask LocalCluster when > 1)")
    p.add_argument("--scheduler", metavar="ADDRESS", help="evaluated: join an existing Dask scheduler")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    _add_data_option(p)
    p.set_defaults(func=cmd_ablate)


def cmd_ablate(args: argparse.Namespace) -> None:
    from metaopt.stages.ablation import ESTIMATORS, VARIANTS, AblationSpec, check_choices, resolve_endpoint, run_ablation
    from metaopt.core.benchmarks import get_benchmark
    from metaopt.core.budget import Budget
    from metaopt.core.executor import check_executor, make_executor
    from metaopt.spaces.resolve import read_config_file
    from metaopt.store.store import StudyStore

    check_writable(args.out, "--out", folder=True)
    check_executor(args.workers, args.scheduler)
    check_choices("--estimator", [args.estimator], ESTIMATORS)
    names = [v.strip() for v in args.variant.split(",")]
    variants = VARIANTS if names == ["all"] else tuple(names)
    check_choices("--variant", variants, VARIANTS)
    bench = get_benchmark(args.benchmark, args.yahpo_data)
    study_output = Path(args.study_output) if args.study_output else None
    study_store = StudyStore(study_output) if study_output is not None else None
    study_budget = None
    if study_output is not None and study_store is not None:
        if not study_output.is_dir():
            raise UsageError(f"--study-output: no such folder: {study_output}")
        if study_store.is_study():
            study = study_store.spec()
            if get_benchmark(study.benchmark, args.yahpo_data).name != bench.name:
                raise UsageError(f"--benchmark: {bench.name} is not the benchmark of {study_output} ({study.benchmark})")
            study_budget = study.budget
    stars = None  # no study: no gamma_star
    if study_store is not None:
        star_file = study_store.gamma_star_json
        wanted = star_file.exists() and "gamma_star" in (args.source, args.target)
        stars = {"gamma_star": read_config_file(star_file, "--study-output") if wanted else None}
    hint = "give --study-output DIR with meta/gamma_star.json" + (f"; not found: {star_file}" if stars else "")
    common = dict(benchmark=bench.name, estimator=args.estimator, variants=variants, yahpo_data=args.yahpo_data,
                  name=args.name,
                  source=resolve_endpoint(args.source, "--from", bench.fidelity, stars, gamma_star_hint=hint),
                  target=resolve_endpoint(args.target, "--to", bench.fidelity, stars, gamma_star_hint=hint))
    if args.estimator == "surrogate":
        given = [flag for flag, value in [("--instances", args.instances), ("--limit", args.limit),
                                          ("--seeds", args.seeds), ("--budget", args.budget), ("--race", args.race)]
                 if value not in (None, False)]
        if given:
            raise UsageError(f"{given[0]}: only with --estimator evaluated (the surrogate predicts the meta-archive's "
                             "objective on the study's training instances at the study's budget)")
        if study_output is None or study_store is None:
            raise UsageError("--estimator surrogate: needs --study-output DIR with meta/archive.csv")
        spec = AblationSpec(**common, budget=Budget.parse(study_budget, bench.d) if study_budget else None,
                            archive=study_store.archive_csv)
        with output_lock(Path(args.out)):
            tables = run_ablation(spec, Path(args.out), None, args.quiet)
    else:
        spec = AblationSpec(**common, instances=tuple(_chosen_instances(bench, args.instances, args.limit)),
                            seeds=tuple(range(1, (args.seeds or 1) + 1)),
                            budget=Budget.parse(args.budget or study_budget or "30d", bench.d), race=args.race)
        with output_lock(Path(args.out)), make_executor(args.workers, args.scheduler) as executor:
            tables = run_ablation(spec, Path(args.out), executor, args.quiet)
    for variant, table in tables.items():
        print(f"\n{variant} ({spec.folder_name}):")
        _print_table(table[["step", "label", "mean", "se", "share", "note"]])


def cmd_presets(args: argparse.Namespace) -> None:
    from metaopt.spaces.presets import PRESETS

    if getattr(args, "name", None) is None:
        _print_table(pd.DataFrame([{"preset": p.name, "description": p.description, "reference": p.reference}
                                   for p in PRESETS.values()]))
        return
    from metaopt.core.benchmarks import get_benchmark
    from metaopt.spaces.resolve import resolve_optimizer

    if args.fidelity is not None:
        fidelity, where = _fidelity_range(args.fidelity), "a problem"
    else:
        fidelity, where = get_benchmark(args.benchmark, args.yahpo_data).fidelity, args.benchmark
    resolved = resolve_optimizer(args.name, fidelity, "presets show")
    preset = PRESETS.get(args.name)
    about = f"{preset.description} ({preset.reference})" if preset else f"the configuration in {args.name}"
    print(f"{resolved.name}: {about}; as used on {where} with the fidelity range "
          f"[{fidelity.r_min:g}, {fidelity.r_max:g}] (mu and the stages depend on the range: "
          "--benchmark or --fidelity R_MIN:R_MAX give another)", file=sys.stderr)
    print(json.dumps(resolved.config, indent=1))


def _fidelity_range(text: str) -> Any:
    """``R_MIN:R_MAX`` of ``presets show --fidelity`` as the Fidelity ``metaopt.minimize`` makes of it."""
    from ConfigSpace import ConfigurationSpace

    from metaopt.core.benchmarks.function import make_fidelity

    low, sep, high = text.partition(":")
    try:
        bounds = [int(v) if v.strip().lstrip("-").isdigit() else float(v) for v in (low, high)]
    except ValueError:
        bounds = []
    if not sep or len(bounds) != 2:
        raise UsageError(f"--fidelity {text}: expected R_MIN:R_MAX, e.g. 1:27 or 0.1:1")
    try:
        return make_fidelity(("fidelity", *bounds), ConfigurationSpace())
    except UsageError as err:
        raise UsageError(f"--fidelity {text}: {str(err).partition(': ')[2]}") from None


def _space(restrict: str | None):
    from metaopt.spaces.design_space import design_space
    from metaopt.spaces.restrictions import get_restriction

    return design_space() if restrict is None else get_restriction(restrict).space()


def cmd_space_show(args: argparse.Namespace) -> None:
    from metaopt.spaces.design_space import describe_hyperparameter

    space = _space(args.restrict)
    parents = {c.child.name: c for c in space.conditions}
    rows = []
    for hp in space.values():
        cond = parents.get(hp.name)
        rows.append({
            "parameter": hp.name,
            "domain": getattr(hp, "value", None) if hp.__class__.__name__ == "Constant" else describe_hyperparameter(hp),
            "default": hp.default_value,
            "active when": "always" if cond is None else str(cond).split(" | ", 1)[1],
        })
    title = "design space" + (f" restricted by {args.restrict}" if args.restrict else "")
    print(f"{title}: {len(space)} hyperparameters, {len(space.conditions)} conditions, "
          f"{len(space.forbidden_clauses)} forbidden clauses")
    _print_table(pd.DataFrame(rows))


def cmd_space_export(args: argparse.Namespace) -> None:
    from io import StringIO

    check_writable(args.out, "--out", folder=False)
    space = _space(args.restrict)
    buffer = StringIO()
    space.to_json(buffer)
    atomic_write_text(Path(args.out), buffer.getvalue())
    print(f"wrote {args.out} ({len(space)} hyperparameters; read it back with ConfigurationSpace.from_json)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        args.func(args)
    except UsageError as err:
        print(f"metaopt: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("metaopt: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into e.g. `head`: not an error
        sys.stdout = open(os.devnull, "w")
    except OSError as err:  # a folder that cannot be written, a full disk, ...: one line naming the path
        print(f"metaopt: error: {describe_os_error(err)}", file=sys.stderr)
        return EXIT_USAGE
    return 0


if __name__ == "__main__":
    sys.exit(main())
