"""A study's finished held-out runs: read from its store, gathered for the report (:class:`Evaluation`),
and written to (and read from) one small file.

A companion study (``report_with``) can take far longer than the study that names it (SMAC's facades
take 25-70 s a run), so the two may not fit one session, and a study's store does not outlive the
machine it ran on. ``metaopt study export-runs`` writes a finished study's runs to a *runs file*
(``runs.jsonl.gz``), small enough to commit beside its report under ``docs/results/``; a
``report_with`` entry naming that file (``runs:``) is read from it when the companion's own store
holds none of the runs it adds. The report says which of the two it read.

A runs file is gzip-compressed JSON lines, written with a fixed header time so that the same runs
give the same bytes. Its first line describes it (``format``, ``study``, ``benchmark``,
``budget_spec``, ``optimizers``, ``runs``); every other line is one run: ``optimizer``, ``instance``,
``seed``, its ``summary`` (summary.json without the trace digest) and its ``trace`` reduced to
:data:`TRACE_COLUMNS` on the rows where the incumbent's normalized regret changes, plus the first and
the last row (for a run on the simulated clock also :data:`CLOCK_COLUMNS`, and the rows where the best
loss in by the row's simulated time changes). The incumbent's regret after any budget or simulated
time, which is all the report and the answer read from a trace, is the same from the reduced trace
as from the whole one (:func:`reduced_trace`).
"""

from __future__ import annotations

import gzip
import io
import json
import math
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from metaopt.analysis.anytime import regret_at
from metaopt.analysis.clock_curves import best_by_arrival
from metaopt.core.budget import Budget
from metaopt.core.errors import UsageError
from metaopt.store.run_io import TRACE_DIGEST, RunResult, jsonable
from metaopt.store.store import StudyStore
from metaopt.core.store_utils import atomic_write_bytes

FORMAT = "metaopt held-out runs v1"
"""The ``format`` of a runs file's first line; a file without it is refused."""
TRACE_COLUMNS = ("budget_used", "cost_used", "normalized_regret")
"""The trace columns a runs file keeps: the budget axes of both units and the incumbent's regret."""
CLOCK_COLUMNS = ("sim_time", "loss")
"""The trace columns a runs file keeps besides, for a run on the simulated clock: what its curve
against simulated time is read from (:func:`metaopt.analysis.clock_curves.regret_by_time`)."""


@dataclass
class HeldOutRun:
    """One finished held-out run: its keys, its summary and its (possibly reduced) trace."""

    optimizer: str
    instance: str
    seed: int
    result: RunResult


@dataclass
class Evaluation:
    """Finished held-out runs: one summary row per run and each run's regret trace."""

    runs: pd.DataFrame  # optimizer, instance, seed + the summary fields
    traces: dict[tuple[str, str, int], pd.DataFrame]  # columns spent (on the budget axis), normalized_regret
    configs: dict[str, dict[str, object]]  # optimizer -> its configuration (peers: their description)
    budget: Budget
    n_failed: int
    read_from: dict[str, str] = field(default_factory=dict)
    """Companion study name -> where its runs were read: its store folder or its runs file."""
    damaged: list[str] = field(default_factory=list)
    """Stored runs left out because their files are damaged, each with what is wrong (named in the
    report and the answer)."""
    clock: pd.DataFrame | None = None
    """The runs on the simulated clock (``evaluation.clock``, their companions' too) as curves against
    simulated time (:func:`metaopt.analysis.clock_curves.clock_curves`); None without any."""
    untimed: list[str] = field(default_factory=list)
    """Optimizers on the clock without a curve: their runs come from a runs file written before runs
    files kept the simulated times."""

    def damage_note(self) -> str | None:
        """One sentence naming the damaged runs left out (None without any)."""
        if not self.damaged:
            return None
        shown = "; ".join(self.damaged[:10]) + (f"; ... and {len(self.damaged) - 10} more" if len(self.damaged) > 10
                                               else "")
        return (f"{len(self.damaged)} damaged run(s) left out of every table (their files do not match; "
                f"`metaopt evaluate STUDY` redoes them): {shown}")

    def regret_at(self, budget: Budget) -> pd.DataFrame:
        """Per run: the incumbent's normalized regret after spending ``budget`` (NaN before the first evaluation)."""
        rows = [{"optimizer": o, "instance": i, "seed": s,
                 "regret": regret_at(t["spent"].to_numpy(), t["normalized_regret"].to_numpy(),
                                     np.array([budget.amount]))[0] if len(t) else math.nan}
                for (o, i, s), t in self.traces.items()]
        return pd.DataFrame(rows)


def stored_runs(output: Path, optimizers: Collection[str], damaged: list[str] | None = None) -> Iterator[HeldOutRun]:
    """The finished, intact runs of ``optimizers`` under the study folder ``output`` (its ``eval/runs``),
    in a fixed order (optimizer, instance, seed as stored names sort), validated by
    :meth:`metaopt.store.store.StudyStore.held_out_runs`. Damaged runs are left out; each is appended to
    ``damaged`` (as "optimizer on instance seed k (what is wrong)") so that the caller names it.
    Called by the report and by :func:`write_runs_file`."""
    runs = StudyStore(output).held_out_runs(set(optimizers))
    if damaged is not None:
        damaged.extend(f"{run} ({problem})" for run, problem in runs.damaged)
    for run, result in runs.intact:
        yield HeldOutRun(run.optimizer, run.instance, run.seed, result)


def reduced_trace(trace: pd.DataFrame) -> pd.DataFrame:
    """``trace``'s :data:`TRACE_COLUMNS` on its first and last rows and every row where the
    normalized regret differs from the row before (NaN counts as a change); for a run on the
    simulated clock (a ``sim_time`` column) also its :data:`CLOCK_COLUMNS`, and the rows that arrive
    first or with a loss below every loss in before them.

    Why this loses nothing the report reads: the regret after spending ``b`` is the regret on the
    last row with spent <= b (:func:`metaopt.analysis.anytime.regret_at`); between two kept rows the
    regret does not change, so the last kept row at or before that row has the same regret. The
    regret at simulated time t is that of the lowest loss among the rows in by t
    (:func:`metaopt.analysis.clock_curves.regret_by_time`), and the row that first reached that loss
    is kept; so is the first row in, where the curves start.
    """
    regret = trace["normalized_regret"]
    keep = regret.ne(regret.shift())  # the first row (shift gives NaN) and every change
    if len(trace):
        keep.iloc[-1] = True
    columns = list(TRACE_COLUMNS)
    if "sim_time" in trace.columns and len(trace):
        order, best = best_by_arrival(trace)  # as the curves read it
        record = np.concatenate([[True], best[1:] < best[:-1]])  # the first in, and each new lowest loss
        keep |= pd.Series(record[np.argsort(order, kind="stable")], index=trace.index)
        columns += CLOCK_COLUMNS
    return trace.loc[keep, columns].reset_index(drop=True)


def write_runs_file(output: Path, target: Path, optimizers: list[str] | None = None) -> int:
    """Write the finished runs of the study folder ``output`` (of ``optimizers``, default: all the
    study evaluates) to the runs file ``target``; returns how many. Called by ``metaopt study
    export-runs``. Raises UsageError, writing nothing, when the folder is not a study's or when it
    holds no finished run of an optimizer asked for."""
    spec = StudyStore(output).study_spec()
    evaluated = spec.evaluation.optimizer_names() if spec.evaluation else []
    for name in optimizers or []:
        if name not in evaluated:
            raise UsageError(f"--optimizers: {output} does not evaluate {name!r} (it evaluates "
                             f"{', '.join(evaluated) or 'nothing'})")
    wanted = optimizers or evaluated
    damaged: list[str] = []
    runs = list(stored_runs(output, wanted, damaged))
    if damaged:
        raise UsageError(f"{output} holds {len(damaged)} damaged run(s) ({'; '.join(damaged[:3])}"
                         f"{' ...' if len(damaged) > 3 else ''}); `metaopt evaluate` on its study redoes them; "
                         "nothing exported")
    missing = sorted(set(wanted) - {run.optimizer for run in runs})
    if missing:
        raise UsageError(f"{output} holds no finished run of {', '.join(missing)}: nothing to export for them")
    header = {"format": FORMAT, "study": spec.name, "benchmark": spec.benchmark,
              "budget_spec": spec.budget, "optimizers": wanted, "runs": len(runs)}
    lines = [json.dumps(header)]
    for run in runs:
        summary = {k: v for k, v in run.result.summary.items() if k != TRACE_DIGEST}
        trace = reduced_trace(run.result.trace)
        lines.append(json.dumps({"optimizer": run.optimizer, "instance": run.instance, "seed": run.seed,
                                 "summary": summary,
                                 "trace": {c: jsonable(trace[c].tolist()) for c in trace.columns}}))
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as packed:  # no time in the header: same bytes
        packed.write(("\n".join(lines) + "\n").encode())
    atomic_write_bytes(target, buffer.getvalue())
    return len(runs)


def read_runs_file(path: Path, benchmark: str, budget_spec: str, optimizers: Collection[str],
                   field: str) -> list[HeldOutRun]:
    """The runs of ``optimizers`` in the runs file ``path``, which must hold runs on ``benchmark`` at
    ``budget_spec`` (the companion study's); called by the report for a ``report_with`` entry whose
    store holds none of them. ``field`` names the entry in errors (UsageError: missing, unreadable
    or for another problem)."""
    try:
        lines = gzip.decompress(path.read_bytes()).decode().splitlines()
        header = json.loads(lines[0]) if lines else {}
    except FileNotFoundError:
        raise UsageError(f"{field}: no such runs file: {path} (write it with `metaopt study export-runs`)") from None
    except (OSError, EOFError, UnicodeDecodeError, ValueError) as err:
        raise UsageError(f"{field}: {path} is not a runs file written by `metaopt study export-runs` ({err})") from None
    if header.get("format") != FORMAT:
        raise UsageError(f"{field}: {path} is not a runs file written by `metaopt study export-runs`")
    for key, expected in (("benchmark", benchmark), ("budget_spec", budget_spec)):
        if header.get(key) != expected:
            raise UsageError(f"{field}: {path} holds runs with {key} {header.get(key)!r}, the companion study "
                             f"{expected!r}; export its runs again")
    runs = []
    for line in lines[1:]:
        item = json.loads(line)
        if item["optimizer"] in optimizers:
            trace = pd.DataFrame({c: np.array(item["trace"][c], dtype=float)  # None: NaN
                                  for c in (*TRACE_COLUMNS, *CLOCK_COLUMNS) if c in item["trace"]})
            runs.append(HeldOutRun(item["optimizer"], str(item["instance"]), int(item["seed"]),
                                   RunResult(trace, item["summary"])))
    return runs
