"""Comparing optimizers over instances: average ranks, the Friedman test and the Nemenyi post-hoc test.

Demšar (2006), "Statistical comparisons of classifiers over multiple data sets", Sec. 3.2.2:
rank the k optimizers on each of the N instances (1 = lowest regret, ties get the mean rank),
test with Friedman's χ² whether the average ranks differ at all, and call two optimizers
significantly different when their average ranks differ by at least the critical difference
CD = q_α · sqrt(k(k+1) / (6N)), q_α being the studentized range quantile / √2.

The Nemenyi CD is implemented here (a few lines with ``scipy.stats.studentized_range``) rather
than taken from scikit-posthocs: that package does not expose the critical difference (its
``posthoc_nemenyi_friedman`` gives pairwise p-values and its diagram joins optimizers by those),
and it would add statsmodels, patsy and formulaic to the dependencies for this one formula.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats


def seeds_are_replicates(n_instances: int) -> bool:
    """Whether a comparison's replicates are seeds rather than instances: when every run is on one
    instance (a scenario with a single instance, such as nb301's CIFAR10) the seeds are the only
    repeats, and a spread over one instance would be undefined (NaN). The rule of every mean ± s.e.,
    rank and paired test here (:func:`replicate_columns`) and of the evaluated ablation's estimates."""
    return n_instances == 1


def replicate_columns(per_run: pd.DataFrame) -> list[str]:
    """The columns whose values name one replicate of a comparison: ``["instance"]`` (seeds are averaged
    per instance), or ``["instance", "seed"]`` when every run is on one instance
    (:func:`seeds_are_replicates`). Called by every mean ± s.e., rank and paired test over instances."""
    return ["instance", "seed"] if seeds_are_replicates(per_run["instance"].nunique()) else ["instance"]


def replicates_phrase(per_run: pd.DataFrame, kind: str = "") -> str:
    """How captions name the replicates of :func:`replicate_columns`: "10 instances" or "the 5 seeds of
    its one instance" (``kind`` goes before "instance", e.g. "held-out ")."""
    if replicate_columns(per_run) == ["instance"]:
        return f"{per_run['instance'].nunique()} {kind}instances"
    return f"the {per_run['seed'].nunique()} seeds of its one {kind}instance"


def scores_by_instance(per_run: pd.DataFrame, value: str) -> pd.DataFrame:
    """Replicates × optimizers table of ``value``: instances, averaged over seeds, or, when every run is on
    one instance, its seeds (rows "<instance> seed <s>", see :func:`replicate_columns`). Replicates some
    optimizer lacks are dropped."""
    keys = replicate_columns(per_run)
    table = per_run.groupby([*keys, "optimizer"])[value].mean().unstack("optimizer")
    if len(keys) == 2:
        table.index = [f"{instance} seed {seed}" for instance, seed in table.index]
        table.index.name = "instance"
    return table.dropna(axis=0, how="any")


def empty_runs(per_run: pd.DataFrame) -> str:
    """A sentence naming the runs (rows of ``per_run``, one per run, with ``optimizer`` and ``n_evals``)
    that finished no evaluation within the budget, per optimizer; "" when there are none.

    Under a cost budget an evaluation that would end after the budget is spent is not counted, so a
    run whose first evaluation costs more than the whole budget has no incumbent and no regret: its
    cells are missing from the means and the paired tests, which the tables and the report say.
    """
    counts = per_run[per_run["n_evals"] == 0].groupby("optimizer").size()
    if counts.empty:
        return ""
    totals = per_run.groupby("optimizer").size()
    listed = ", ".join(f"{name} {n} of {totals[name]}" for name, n in counts.items())
    return (f"Runs that finished no evaluation within the budget (the first cost more than all of it), so have "
            f"no regret and are left out of the means: {listed}")


def average_ranks(scores: pd.DataFrame) -> pd.Series:
    """Mean rank of each optimizer (column) over instances (rows); lower scores rank first, ties share ranks."""
    return scores.rank(axis=1, method="average").mean(axis=0).sort_values(kind="stable")


def friedman(scores: pd.DataFrame) -> tuple[float, float]:
    """Friedman's χ² statistic (with scipy's tie correction) and its p-value; needs at least 3 optimizers.

    When every instance ties all optimizers the statistic is undefined: (NaN, 1.0).
    """
    if scores.shape[1] < 3:
        raise ValueError("the Friedman test needs at least 3 optimizers")
    if (scores.nunique(axis=1) == 1).all():
        return math.nan, 1.0
    result = stats.friedmanchisquare(*(scores[c].to_numpy() for c in scores.columns))
    return float(result.statistic), float(result.pvalue)


def nemenyi_critical_difference(k: int, n: int, alpha: float = 0.05) -> float:
    """CD = q_α · sqrt(k(k+1) / (6N)) for k optimizers on N instances (Demšar 2006, Eq. 5)."""
    q_alpha = stats.studentized_range.ppf(1 - alpha, k, np.inf) / math.sqrt(2)
    return float(q_alpha * math.sqrt(k * (k + 1) / (6 * n)))


def nemenyi_groups(ranks: pd.Series, cd: float) -> list[list[str]]:
    """Maximal runs of optimizers (sorted by rank) whose average ranks differ by less than ``cd``.

    These are the bars of a critical-difference diagram; optimizers in no common group differ
    significantly. Groups of one optimizer are left out.
    """
    ranks = ranks.sort_values(kind="stable")
    names, values = list(ranks.index), ranks.to_numpy()
    groups: list[list[str]] = []
    last_end = 0
    for start in range(len(values)):
        end = start
        while end + 1 < len(values) and values[end + 1] - values[start] < cd:
            end += 1
        if end > start and end > last_end:  # not contained in the previous group
            groups.append(names[start:end + 1])
            last_end = end
    return groups


@dataclass(frozen=True)
class RankTest:
    """The outcome of Friedman + Nemenyi on one instances × optimizers table."""

    ranks: pd.Series
    n_instances: int
    statistic: float
    p_value: float
    alpha: float
    critical_difference: float
    groups: list[list[str]]

    @property
    def rejected(self) -> bool:
        """Whether the Friedman test rejects "all optimizers rank alike" at level α."""
        return self.p_value < self.alpha

    def describe(self) -> str:
        verdict = "reject" if self.rejected else "cannot reject"
        return (f"Friedman χ² = {self.statistic:.2f}, p = {self.p_value:.3g} ({verdict} equal ranks at α = "
                f"{self.alpha:g}); Nemenyi CD = {self.critical_difference:.2f} for {len(self.ranks)} optimizers "
                f"on {self.n_instances} instances")


def rank_test(scores: pd.DataFrame, alpha: float = 0.05) -> RankTest:
    """Average ranks, Friedman test and Nemenyi groups of an instances × optimizers table (lower is better)."""
    ranks = average_ranks(scores)
    statistic, p_value = friedman(scores)
    cd = nemenyi_critical_difference(len(ranks), len(scores), alpha)
    return RankTest(ranks, len(scores), statistic, p_value, alpha, cd, nemenyi_groups(ranks, cd))


def paired_differences(scores: pd.DataFrame, reference: str) -> pd.DataFrame:
    """``reference`` against every other optimizer (column) of an instances × optimizers table.

    One row per other optimizer, sorted by ``delta``: ``delta`` = mean over instances of (other −
    reference) (> 0: the reference is better), ``se`` its standard error, ``reference_better`` the
    number of instances where the reference scores lower, ``n`` the instances, and ``p_wilcoxon`` the
    two-sided Wilcoxon signed-rank p-value of the differences (1.0 when all are zero).
    """
    rows = []
    for other in scores.columns:
        if other == reference:
            continue
        diff = (scores[other] - scores[reference]).to_numpy()
        n = len(diff)
        se = float(diff.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
        p = float(stats.wilcoxon(diff).pvalue) if n > 0 and np.any(diff != 0) else 1.0
        rows.append({"optimizer": other, "delta": float(diff.mean()) if n else math.nan, "se": se,
                     "reference_better": int((diff > 0).sum()), "n": n, "p_wilcoxon": p})
    return pd.DataFrame(rows).sort_values("delta", kind="stable").reset_index(drop=True)
