"""Average ranks, the Friedman test and the Nemenyi critical difference against hand-computed and published values."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from metaopt.analysis.stats import (
    average_ranks,
    friedman,
    nemenyi_critical_difference,
    nemenyi_groups,
    rank_test,
    scores_by_instance,
)


def test_friedman_statistic_of_a_hand_computed_example():
    # 4 instances, 3 optimizers, always ranked a < b < c: average ranks 1, 2, 3 and
    # chi2 = 12 N / (k (k+1)) * (sum R_j^2 - k (k+1)^2 / 4) = 48 / 12 * (14 - 12) = 8, p = exp(-8/2) (chi2, 2 d.f.)
    scores = pd.DataFrame({"a": [0.1, 0.2, 0.0, 0.3], "b": [0.2, 0.4, 0.1, 0.5], "c": [0.9, 0.5, 0.2, 0.6]})
    assert list(average_ranks(scores).items()) == [("a", 1.0), ("b", 2.0), ("c", 3.0)]
    statistic, p = friedman(scores)
    assert statistic == pytest.approx(8.0)
    assert p == pytest.approx(math.exp(-4))


def test_ties_share_their_mean_rank_and_all_ties_are_no_evidence():
    scores = pd.DataFrame({"a": [0.1, 0.2], "b": [0.1, 0.3], "c": [0.5, 0.3]})
    assert average_ranks(scores).to_dict() == {"a": 1.25, "b": 2.0, "c": 2.75}
    statistic, p = friedman(pd.DataFrame({"a": [1.0, 2.0], "b": [1.0, 2.0], "c": [1.0, 2.0]}))
    assert math.isnan(statistic) and p == 1.0
    with pytest.raises(ValueError, match="at least 3"):
        friedman(scores[["a", "b"]])


def test_nemenyi_critical_difference_matches_demsar_2006():
    # Demšar (2006) Table 5(a): q_0.05 for k = 2..10; CD = q * sqrt(k (k+1) / (6 N))
    q_005 = [1.960, 2.343, 2.569, 2.728, 2.850, 2.949, 3.031, 3.102, 3.164]
    for k, q in zip(range(2, 11), q_005):
        assert nemenyi_critical_difference(k, 7, 0.05) / math.sqrt(k * (k + 1) / 42) == pytest.approx(q, abs=1e-3)
    assert nemenyi_critical_difference(4, 10, 0.05) == pytest.approx(1.483, abs=1e-3)
    # Table 5(b), alpha = 0.10, k = 4: q = 2.291
    assert nemenyi_critical_difference(4, 10, 0.10) == pytest.approx(2.291 * math.sqrt(20 / 60), abs=1e-3)


def test_groups_are_maximal_runs_closer_than_the_critical_difference():
    ranks = pd.Series({"d": 3.0, "a": 1.0, "c": 2.8, "b": 1.5})
    assert nemenyi_groups(ranks, 1.0) == [["a", "b"], ["c", "d"]]
    assert nemenyi_groups(ranks, 1.9) == [["a", "b", "c"], ["b", "c", "d"]]
    assert nemenyi_groups(ranks, 0.1) == []
    assert nemenyi_groups(ranks, 5.0) == [["a", "b", "c", "d"]]


def test_rank_test_separates_a_clearly_better_optimizer():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.2, 0.8, size=(20, 1))
    scores = pd.DataFrame(base + np.array([[0.0, 0.3, 0.31, 0.32]]) + rng.normal(0, 0.01, (20, 4)),
                          columns=["best", "x", "y", "z"])
    test = rank_test(scores, alpha=0.05)
    assert test.rejected and test.n_instances == 20 and test.ranks.index[0] == "best"
    assert test.critical_difference == pytest.approx(nemenyi_critical_difference(4, 20, 0.05))
    assert all("best" not in group for group in test.groups)  # significantly better than all others
    assert "reject equal ranks" in test.describe()


def test_scores_average_seeds_and_drop_instances_an_optimizer_lacks():
    per_run = pd.DataFrame({"optimizer": ["a", "a", "b", "a", "b"], "instance": ["i", "i", "i", "j", "k"],
                            "seed": [1, 2, 1, 1, 1], "regret": [0.1, 0.3, 0.5, 0.7, 0.9]})
    scores = scores_by_instance(per_run, "regret")
    assert list(scores.index) == ["i"]
    assert scores.loc["i"].to_dict() == {"a": pytest.approx(0.2), "b": 0.5}


def test_one_instance_makes_its_seeds_the_replicates_of_every_spread_and_test():
    # nb301 has one instance (CIFAR10): a mean over it has no standard error, so its seeds are the replicates.
    from metaopt.analysis.anytime import mean_se_over_instances
    from metaopt.analysis.stats import replicates_phrase

    per_run = pd.DataFrame({"optimizer": ["a", "a", "a", "b", "b", "b"], "instance": ["CIFAR10"] * 6,
                            "seed": [1, 2, 3, 1, 2, 3], "regret": [0.1, 0.3, 0.2, 0.5, 0.4, 0.9]})
    scores = scores_by_instance(per_run, "regret")
    assert list(scores.index) == ["CIFAR10 seed 1", "CIFAR10 seed 2", "CIFAR10 seed 3"]
    assert scores["b"].tolist() == [0.5, 0.4, 0.9]
    agg = mean_se_over_instances(per_run, ["optimizer"], "regret").set_index("optimizer")
    assert agg.loc["a", "mean"] == pytest.approx(0.2) and agg.loc["a", "n_instances"] == 3
    assert agg.loc["a", "se"] == pytest.approx(np.std([0.1, 0.3, 0.2], ddof=1) / math.sqrt(3))
    assert replicates_phrase(per_run, "held-out ") == "the 3 seeds of its one held-out instance"
    two = pd.concat([per_run, per_run.assign(instance="other")])  # two instances: seeds are averaged again
    assert list(scores_by_instance(two, "regret").index) == ["CIFAR10", "other"]
    assert replicates_phrase(two) == "2 instances"


def test_paired_differences_are_per_instance_differences_with_their_standard_error():
    from metaopt.analysis.stats import paired_differences

    scores = pd.DataFrame({"a": [0.1, 0.2, 0.3, 0.4], "b": [0.2, 0.4, 0.3, 0.7], "c": [0.1, 0.2, 0.3, 0.4]})
    table = paired_differences(scores, "a").set_index("optimizer")
    assert list(table.index) == ["c", "b"]  # sorted by the mean difference
    diff = np.array([0.1, 0.2, 0.0, 0.3])
    assert table.loc["b", "delta"] == pytest.approx(diff.mean())
    assert table.loc["b", "se"] == pytest.approx(diff.std(ddof=1) / 2)
    assert table.loc["b", "reference_better"] == 3 and table.loc["b", "n"] == 4
    assert table.loc["b", "p_wilcoxon"] == pytest.approx(stats.wilcoxon(diff).pvalue)
    assert table.loc["c", "delta"] == 0 and table.loc["c", "p_wilcoxon"] == 1.0  # identical: nothing to test
