"""The layout of a study's output folder: every path of the store, in one place.

A :class:`StudyStore` is one output folder; each stage asks it where to read and write::

    <root>/study.yaml                          the study file, copied when the study first runs
    <root>/.lock                               held by the one process writing the folder (store_utils.output_lock)
    <root>/timings.json                        seconds per stage
    <root>/answer.md                           the study's answer in words (metaopt.analysis.answer)
    <root>/meta/archive.csv                    the meta-archive (metaopt.stages.meta)
    <root>/meta/gamma_star.json                γ* and how it was chosen
    <root>/meta/trials-seed-<m>.jsonl          meta-seed m's trials in SMAC's proposal order
    <root>/meta/runs/<γ hash>/<instance>/seed-<k>.json   one inner run of the meta-optimization
    <root>/meta/.smac/                         SMAC's own files while a meta-seed runs
    <root>/arms/<restriction>/                 a meta-optimization of a list of restrictions: a store of its own
                                               (its meta/ and importance/)
    <root>/eval/runs/<optimizer>/<instance>/seed-<k>/   one held-out run (metaopt.store.run_io)
    <root>/eval/results.csv, table.csv|.md, ...         the evaluation's tables (metaopt.stages.evaluation)
    <root>/ablation/<name>/                    one ablation (metaopt.stages.ablation)
    <root>/importance/                         parameter importance (metaopt.analysis.importance)
    <root>/report/                             the report (metaopt.analysis.report)

Paths are computed, never created: writers create folders as they write (``atomic_write_text``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from metaopt.core.errors import UsageError
from metaopt.store.run_io import UNFINISHED, DamagedRun, RunResult, check_run, has_failed, read_run
from metaopt.core.store_utils import LOCK_NAME, read_text_file
from metaopt.store.study_spec import StudySpec, load_study


def _seed_of(path: Path) -> int:
    """The meta-seed of a ``trials-seed-<m>.jsonl`` file's name (-1 if it is not one)."""
    tail = path.stem.rpartition("-")[2]
    return int(tail) if tail.isdigit() else -1


def run_record_file(runs_dir: Path, name: str, instance: str, seed: int) -> Path:
    """``<runs_dir>/<name>/<instance>/seed-<seed>.json``: where one stored run record lives (the
    meta-optimization's inner runs and the evaluated ablation's runs; ``name`` is a γ hash)."""
    return Path(runs_dir) / name / instance / f"seed-{seed}.json"


def stored_run_records(runs_dir: Path) -> list[Path]:
    """Every run record under ``runs_dir`` (laid out by :func:`run_record_file`), in the order the names
    sort; called by the readers of a runs folder (the meta-optimization's cache, the evaluated ablation,
    the throughput benchmark)."""
    return sorted(Path(runs_dir).glob("*/*/seed-*.json"))


ARCHIVE_COLUMNS = ("instance", "objective")
"""Columns of a meta-archive (:func:`metaopt.store.meta_archive.meta_archive`) that every reader needs (with its `gamma.*` columns)."""


GAMMA_STAR_NAME = "gamma_star.json"
"""γ*'s file, beside the meta-archive in ``meta/``."""


@dataclass(frozen=True)
class EvalFiles:
    """The evaluation's files in one folder (``eval/``; for a store written before ``eval/`` existed, the
    study folder itself): :attr:`StudyStore.eval_files` for writers, :meth:`StudyStore.readable_eval_files`
    for readers."""

    folder: Path

    @property
    def runs_dir(self) -> Path:
        """``runs/<optimizer>/<instance>/seed-<k>/``: the held-out runs (:mod:`metaopt.store.run_io`)."""
        return self.folder / "runs"

    @property
    def results_csv(self) -> Path:
        """One row per finished run (final and intermediate regrets)."""
        return self.folder / "results.csv"

    @property
    def table_csv(self) -> Path:
        return self.folder / "table.csv"

    @property
    def table_md(self) -> Path:
        return self.folder / "table.md"

    @property
    def wall_times_csv(self) -> Path:
        """Mean wall time per run of each optimizer (a measurement, kept apart from the results)."""
        return self.folder / "wall_times.csv"

    @property
    def anytime_csv(self) -> Path:
        return self.folder / "anytime.csv"

    @property
    def anytime_png(self) -> Path:
        return self.folder / "anytime.png"

    @property
    def anytime_clock_csv(self) -> Path:
        """Regret against simulated wall-clock time per worker count (``evaluation.clock``)."""
        return self.folder / "anytime_clock.csv"

    @property
    def anytime_clock_png(self) -> Path:
        return self.folder / "anytime_clock.png"

    @property
    def cost_runs_csv(self) -> Path:
        return self.folder / "cost_runs.csv"

    @property
    def cost_csv(self) -> Path:
        return self.folder / "cost.csv"

    @property
    def cost_md(self) -> Path:
        return self.folder / "cost.md"

    @property
    def termination_runs_csv(self) -> Path:
        return self.folder / "termination_runs.csv"

    @property
    def termination_csv(self) -> Path:
        return self.folder / "termination.csv"

    @property
    def termination_md(self) -> Path:
        return self.folder / "termination.md"


@dataclass(frozen=True)
class AblationFiles:
    """One ablation's folder (``ablation/<name>/``): its identity, its runs and one table, plot and page per variant."""

    folder: Path

    @property
    def name(self) -> str:
        return self.folder.name

    @property
    def meta_json(self) -> Path:
        """The ablation's identity and settings (checked before a rerun adds to the folder)."""
        return self.folder / "meta.json"

    @property
    def runs_dir(self) -> Path:
        """``runs/``: the evaluated estimator's runs, laid out by :func:`run_record_file`."""
        return self.folder / "runs"

    def variant_csv(self, variant: str) -> Path:
        return self.folder / f"{variant}.csv"

    def variant_md(self, variant: str) -> Path:
        return self.folder / f"{variant}.md"

    def variant_png(self, variant: str) -> Path:
        return self.folder / f"{variant}.png"


@dataclass(frozen=True)
class ImportanceFiles:
    """Parameter importance of one meta-optimization (``importance/``)."""

    folder: Path

    @property
    def meta_json(self) -> Path:
        """Settings, provenance and the digest of the inputs (:func:`metaopt.analysis.importance.inputs_digest`)."""
        return self.folder / "meta.json"

    @property
    def fanova_csv(self) -> Path:
        return self.folder / "fanova.csv"

    @property
    def fanova_png(self) -> Path:
        return self.folder / "fanova.png"

    @property
    def local_csv(self) -> Path:
        return self.folder / "local.csv"

    @property
    def local_png(self) -> Path:
        return self.folder / "local.png"

    def all(self) -> list[Path]:
        """Every file written (a stored importance is complete when all exist)."""
        return [self.meta_json, self.fanova_csv, self.local_csv, self.fanova_png, self.local_png]


@dataclass(frozen=True)
class ReportFiles:
    """A report's folder (``report/``, or the staging folder it is built in)."""

    folder: Path

    @property
    def html(self) -> Path:
        """The self-contained page (figures embedded)."""
        return self.folder / "report.html"

    @property
    def markdown(self) -> Path:
        return self.folder / "report.md"

    @property
    def figures_dir(self) -> Path:
        return self.folder / "figures"

    def figure(self, name: str) -> Path:
        """``figures/<name>.png``."""
        return self.figures_dir / f"{name}.png"

    def figures(self) -> list[Path]:
        """The figures written, by name."""
        return sorted(self.figures_dir.glob("*.png"))


@dataclass(frozen=True)
class StoredRun:
    """Where one held-out run of the evaluation lives: its optimizer, instance, seed and folder."""

    optimizer: str
    instance: str
    seed: int
    folder: Path

    def __str__(self) -> str:
        return f"{self.optimizer} on {self.instance} seed {self.seed}"


@dataclass
class HeldOutRuns:
    """The evaluation's stored runs, validated (:meth:`StudyStore.held_out_runs`): the intact ones with
    their results, and the damaged ones with what is wrong (they are left out, and named)."""

    intact: list[tuple[StoredRun, RunResult]]
    damaged: list[tuple[StoredRun, str]]


def read_meta_archive(path: Path) -> tuple[pd.DataFrame | None, str | None]:
    """A meta-archive (``meta/archive.csv``) validated, and a note when rows are missing; (None, None) without one.

    The one reader of a meta-archive (report, importance, the surrogate ablation): a file that does
    not parse as a CSV with :data:`ARCHIVE_COLUMNS` is a one-line UsageError naming it. The note says
    how many rows are missing when the archive holds fewer trials than the ``gamma_star.json`` beside it counted
    (rows deleted after the optimize stage): the readers say it instead of silently showing less.
    """
    path = Path(path)
    if not path.exists():
        return None, None
    rerun = "rerun the optimize stage (metaopt optimize STUDY) to rebuild it"
    try:
        archive = pd.read_csv(path)
    except (ValueError, UnicodeDecodeError, OSError) as err:  # pandas' ParserError and EmptyDataError are ValueErrors
        reason = getattr(err, "strerror", None) or str(err).strip().splitlines()[-1]
        raise UsageError(f"{path} is damaged (not a meta-archive: {reason}); {rerun}") from None
    missing = [column for column in ARCHIVE_COLUMNS if column not in archive.columns]
    if missing:
        raise UsageError(f"{path} is damaged (no column {', '.join(missing)}); {rerun}")
    note = None
    try:
        counted = int(read_gamma_star(path.parent / GAMMA_STAR_NAME)["n_trials"])
    except (OSError, ValueError, KeyError, TypeError):  # a damaged file is a UsageError, a ValueError
        counted = None  # no (readable) gamma* file: nothing to compare with
    if counted is not None and len(archive) < counted:
        note = (f"{path} holds {len(archive)} trials, but gamma_star.json counted {counted}: "
                f"{counted - len(archive)} rows are missing; {rerun}")
    return archive, note


def read_gamma_star(path: Path, field: str | None = None) -> dict[str, Any]:
    """The record in a γ* file (a study's ``meta/gamma_star.json``, or another study's named by
    ``evaluation.gamma_star_from``): a JSON object whose ``config`` is γ*'s configuration, beside how it
    was chosen (``n_trials``, ``known_design``, ...). The one reader of γ* files; called by the stages,
    the importance and the report.

    Without ``field`` (a file the store wrote) it raises FileNotFoundError (an OSError) when the file is
    missing; with ``field`` (a file the user named, e.g. ``"study.yaml: field 'evaluation.gamma_star_from'"``)
    a missing, unreadable or folder path is a one-line UsageError starting with ``field``. A damaged file
    (not JSON, or no ``config`` object; e.g. cut short by a full disk) is a one-line UsageError naming it.
    """
    prefix = f"{field}: " if field else ""
    try:
        text = read_text_file(path, field, "a gamma* file (JSON)") if field else Path(path).read_text()
        record = json.loads(text)
        if isinstance(record, dict) and isinstance(record.get("config"), dict):
            return record
    except UsageError:
        raise
    except ValueError:  # not JSON, or not text
        pass
    raise UsageError(f"{prefix}{path} is damaged (not a complete gamma* file: a JSON object with a \"config\" "
                     "object); rerun the optimize stage of the study that wrote it (metaopt optimize STUDY) to "
                     "recompute it")


class StudyStore:
    """One study output folder: where each stored fact lives, and the stored study's validated spec."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"StudyStore({str(self.root)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StudyStore) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    # -- the study ------------------------------------------------------------------------------

    @property
    def study_file(self) -> Path:
        """The copy of the study file (written by the study's first run; marks a study output folder)."""
        return self.root / "study.yaml"

    def is_study(self) -> bool:
        """True when the folder holds a study's results (its ``study.yaml`` exists)."""
        return self.study_file.exists()

    def study_spec(self) -> StudySpec:
        """:meth:`spec`, or a UsageError saying the folder holds no study (no study.yaml); called by the
        commands that read a study's output folder (``report``, ``study export-runs``)."""
        if not self.is_study():
            raise UsageError(f"{self.root} holds no study results (no study.yaml; run `metaopt study run STUDY` first)")
        return self.spec()

    def spec(self) -> StudySpec:
        """The stored study, validated (:func:`metaopt.store.study_spec.load_study`); called by the readers of
        a finished study (importance, report, answer, ``metaopt ablate --study-output``). UsageError
        naming the file if it is missing or invalid."""
        return load_study(self.study_file).spec

    @property
    def lock_file(self) -> Path:
        return self.root / LOCK_NAME

    @property
    def timings_file(self) -> Path:
        """``timings.json``: seconds per stage, merged over runs of the study."""
        return self.root / "timings.json"

    @property
    def answer_file(self) -> Path:
        return self.root / "answer.md"

    # -- meta-optimization ----------------------------------------------------------------------

    def arm(self, restriction: str) -> StudyStore:
        """The store of the meta-optimization in ``restriction`` when the study meta-optimizes a list of
        restrictions (``arms/<restriction>/``); a single meta-optimization lives in this store itself."""
        return StudyStore(self.root / "arms" / restriction)

    def meta_stores(self, restriction: str | list[str] | None) -> dict[str | None, StudyStore]:
        """The store of each meta-optimization of a study whose ``meta.restriction`` is ``restriction``,
        by restriction: an arm (:meth:`arm`) per restriction of a list, else this store (None: the full
        space). Called by :class:`metaopt.stages.study.StudyContext` and ``metaopt study export-meta``."""
        if isinstance(restriction, list):
            return {name: self.arm(name) for name in restriction}
        return {restriction: self}

    def stored_arms(self) -> list[StudyStore]:
        """The arms found on disk, by name (the report reads whatever is there)."""
        folder = self.root / "arms"
        return [StudyStore(path) for path in sorted(folder.glob("*")) if path.is_dir()]

    @property
    def name(self) -> str:
        """The folder's name (an arm's name is its restriction)."""
        return self.root.name

    @property
    def meta_dir(self) -> Path:
        return self.root / "meta"

    @property
    def archive_csv(self) -> Path:
        return self.meta_dir / "archive.csv"

    def read_archive(self) -> tuple[pd.DataFrame | None, str | None]:
        """:func:`read_meta_archive` of ``meta/archive.csv``."""
        return read_meta_archive(self.archive_csv)

    @property
    def lower_budget_archive_csv(self) -> Path:
        """``meta/archive_lower_budgets.csv``: a multi-fidelity search's trials below the full inner budget."""
        return self.meta_dir / "archive_lower_budgets.csv"

    @property
    def gamma_star_json(self) -> Path:
        return self.meta_dir / GAMMA_STAR_NAME

    @property
    def selection_csv(self) -> Path:
        """``meta/selection.csv``: the top candidates re-run on more seeds, and the paired comparison that chose γ*."""
        return self.meta_dir / "selection.csv"

    def trials_log(self, meta_seed: int) -> Path:
        """``meta/trials-seed-<m>.jsonl``: meta-seed m's trials in proposal order."""
        return self.meta_dir / f"trials-seed-{meta_seed}.jsonl"

    def baseline_trials_log(self, baseline: str, meta_seed: int) -> Path:
        """``meta/baselines/<name>/trials-seed-<m>.jsonl``: a meta-level baseline's trials (metaopt.stages.meta)."""
        return self.meta_dir / "baselines" / baseline / f"trials-seed-{meta_seed}.jsonl"

    def baseline_trials_logs(self) -> dict[str, list[Path]]:
        """The stored baselines' trials logs by baseline name, each list in meta-seed order."""
        folder = self.meta_dir / "baselines"
        if not folder.is_dir():
            return {}
        return {sub.name: sorted(sub.glob("trials-seed-*.jsonl"), key=_seed_of)
                for sub in sorted(folder.iterdir()) if sub.is_dir()}

    def trials_logs(self) -> list[Path]:
        """The search's trials logs, in meta-seed order."""
        return sorted(self.meta_dir.glob("trials-seed-*.jsonl"), key=_seed_of)

    @property
    def noise_csv(self) -> Path:
        """``meta/noise.csv``: γ* and the best known design re-run on more seeds (the meta-objective's noise)."""
        return self.meta_dir / "noise.csv"

    @property
    def meta_runs_dir(self) -> Path:
        """``meta/runs/``: inner runs, laid out by :func:`run_record_file`."""
        return self.meta_dir / "runs"

    def meta_run_file(self, gamma_hash: str, instance: str, seed: int) -> Path:
        return run_record_file(self.meta_runs_dir, gamma_hash, instance, seed)

    @property
    def smac_dir(self) -> Path:
        return self.meta_dir / ".smac"

    # -- evaluation -----------------------------------------------------------------------------

    @property
    def eval_dir(self) -> Path:
        return self.root / "eval"

    @property
    def eval_files(self) -> EvalFiles:
        """The evaluation's files in ``eval/``, where the evaluate stage writes them."""
        return EvalFiles(self.eval_dir)

    def readable_eval_files(self) -> EvalFiles:
        """The evaluation's files to read: in ``eval/``, or in the folder itself for stores written before
        the ``eval/`` subfolder existed (they hold ``runs/`` at the top level); called by the readers
        (report, answer, reproductions)."""
        old = EvalFiles(self.root)
        return self.eval_files if self.eval_dir.is_dir() or not old.runs_dir.is_dir() else old

    def eval_run_dir(self, optimizer: str, instance: str, seed: int) -> Path:
        """The folder of one held-out run (``trace.csv``, ``summary.json`` or ``failed.json``)."""
        return self.eval_files.runs_dir / optimizer / instance / f"seed-{seed}"

    def stored_eval_runs(self) -> list[StoredRun]:
        """Every held-out run folder of the evaluation (``eval/runs/<optimizer>/<instance>/seed-<k>``, or the
        pre-``eval/`` layout), in a fixed order (as the stored names sort)."""
        runs_dir = self.readable_eval_files().runs_dir
        return [StoredRun(path.parts[-3], path.parts[-2], int(path.name.removeprefix("seed-")), path)
                for path in sorted(runs_dir.glob("*/*/seed-*"))
                if path.is_dir() and path.name.removeprefix("seed-").isdigit()]

    @staticmethod
    def run_problem(run: StoredRun) -> str | None:
        """Called before a stored run is used or redone: None when it is finished and intact, else why not
        (:data:`metaopt.store.run_io.UNFINISHED` without a summary; see :func:`metaopt.store.run_io.check_run`)."""
        return check_run(run.folder)

    def held_out_runs(self, optimizers: set[str] | None = None) -> HeldOutRuns:
        """The evaluation's finished runs of ``optimizers`` (all without), validated: the one reader of
        stored held-out runs for evaluate's tables, the report, the answer and the reproductions.

        A run whose summary and trace do not match, or whose trace does not parse, is damaged: it is
        returned with what is wrong, never read as a result (the evaluate stage redoes it). A run
        without a summary is unfinished (interrupted or failed) and is in neither list.
        """
        intact, damaged = [], []
        for run in self.stored_eval_runs():
            if optimizers is not None and run.optimizer not in optimizers:
                continue
            try:
                intact.append((run, read_run(run.folder)))
            except FileNotFoundError:
                continue  # no summary.json: unfinished
            except (DamagedRun, ValueError, UnicodeDecodeError) as err:  # pandas' parser errors are ValueErrors
                damaged.append((run, str(err).splitlines()[0] if str(err) else type(err).__name__))
        return HeldOutRuns(intact, damaged)

    def damaged_eval_runs(self) -> list[tuple[StoredRun, str]]:
        """The held-out runs whose files are there but do not match (:meth:`held_out_runs` without reading
        the intact ones' traces); called by readers of the evaluation's tables (reproductions)."""
        return [(run, problem) for run in self.stored_eval_runs()
                if (problem := self.run_problem(run)) not in (None, UNFINISHED)]

    def failed_eval_runs(self) -> list[StoredRun]:
        """The held-out runs that failed (they left ``failed.json``) and have not finished since."""
        return [run for run in self.stored_eval_runs() if has_failed(run.folder) and check_run(run.folder) is not None]

    # -- explanation ----------------------------------------------------------------------------

    @property
    def ablations_dir(self) -> Path:
        """``ablation/``: one folder per ablation."""
        return self.root / "ablation"

    def ablation(self, name: str) -> AblationFiles:
        """The files of the ablation called ``name`` (``ablation/<name>/``)."""
        return AblationFiles(self.ablations_dir / name)

    def stored_ablations(self) -> list[AblationFiles]:
        """The ablations found on disk, by name (the report and the answer show whatever is there)."""
        return [AblationFiles(path) for path in sorted(self.ablations_dir.glob("*")) if path.is_dir()]

    @property
    def importance_dir(self) -> Path:
        return self.root / "importance"

    @property
    def importance(self) -> ImportanceFiles:
        return ImportanceFiles(self.importance_dir)

    @property
    def report_dir(self) -> Path:
        return self.root / "report"

    @property
    def report(self) -> ReportFiles:
        return ReportFiles(self.report_dir)
