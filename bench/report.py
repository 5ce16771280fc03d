"""``docs/benchmarks.md`` from the JSON result of ``metaopt bench``: machine and date, one table per
section, and where a peer beats us (found in the data; explained by the notes below)."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import numpy as np

from metaopt.bench.machine import IDLE_BUSY_CORES

PEER_NOTES: dict[tuple[str, str, str], str] = {
    ("smac_hpo", "quality", "*"): (
        "Why: the comparison is with smac_like, the point of our design space closest to SMAC's HPO facade "
        "(random forest of 10 trees on log losses, log-EI maximized by random candidates plus a local search "
        "from the best, 20% random points). What remains different: SMAC starts from a Sobol design of up to "
        "a quarter of the budget, draws 10,000 random challengers (smac_like 2,000), and its forest imputes "
        "inactive hyperparameters and splits differently. Where SMAC leads, those are the candidates. The "
        "Sobol start is in our space since 2026-11-27 (`initial_design_per_dim`); smac_like with it, alone or "
        "with SMAC's retraining every 8 configurations, ended worse at 10d on lcbench and no better at 30d "
        "(the overhead section's note on smac_like)."),
    ("smac_hb", "quality", "*"): (
        "Why: SMAC's HyperbandFacade and hb are the same algorithm (uniform random configurations, "
        "successive-halving brackets with η = 3, the same fidelity range); they differ in their random draws "
        "and bracket bookkeeping, so any gap is luck of the draw until many seeds say otherwise. Nothing to "
        "close; SMAC takes far longer per run for the same evaluations (its intensifier and run history)."),
    ("optuna_tpe", "quality", "*"): (
        "Why: Optuna's TPE spends the whole budget at full fidelity, where bohb spends a large part of it on "
        "the low-fidelity rungs of its Hyperband brackets; that pays only where low fidelities rank "
        "configurations like the full one (on rbv2_xgboost the fidelity is the fraction of the training "
        "set). What would close it: the full-fidelity TPE point of the design space (bohb's kde sampler and "
        "tpe filter with the single schedule), or bohb with fewer, higher rungs on such benchmarks."),
    ("flaml_cfo", "quality", "*"): (
        "Why: the comparison is with cfo_tuned, FLOW² with the paper's step unit (δ_init = √d) and FLAML's random "
        "start of the hyperparameters without a cheap end, which led FLAML's CFO on 26 of 26 held-out lcbench "
        "and rbv2_xgboost instances at 10·d (docs/results/cfo_lcbench, cfo_rbv2_xgboost). A peer win here "
        "would be on instances outside those: check its seeds and instances before reading more into it."),
    ("flaml_cfo", "speed", "*"): (
        "Why: both cost about a millisecond per evaluation, most of it one benchmark call per evaluation "
        "(run / limit is similar); our remainder is SpaceCodec.repair, which projects each step onto the "
        "space through ConfigSpace's per-hyperparameter transforms, and the decoding to dicts. What would "
        "close it: a projection with the clipping and integer snapping precomputed per column. At a few "
        "hundred milliseconds per run this does not matter for a meta-optimization."),
}
"""(peer, "speed" | "quality", benchmark or "*") -> why the peer wins that comparison and what would
close the gap. Shown only for rows where the measured data says the peer wins."""

OVERHEAD_NOTES: dict[str, str] = {
    "bo_gp_ei": (
        "cProfile: the GP is most of it. After every evaluation L-BFGS improves the kernel hyperparameters' "
        "marginal likelihood, warm-started at the previous kernel. scikit-learn computes each gradient from "
        "the kernel's derivatives, an n × n × (p + 2) array (p = features), contracted with an einsum that does "
        "not use BLAS. Since 2026-11-25 the gradient has a closed form in n × n and n × p arrays "
        "(`components/_gp.py`): the likelihood's value is bit for bit scikit-learn's and the gradient the same "
        "up to rounding, which made bo_gp_ei 3.8× faster on lcbench (26 test instances × 3 seeds, old and new "
        "side by side: 31.4 → 8.2 s a run) and 3.9× on rbv2_xgboost (one run, 139 → 36 s), with no effect on "
        "regret (new − old −0.0008 ± 0.0061 at 30d, p = 0.73). Since 2026-11-26 each optimization stops after "
        "one L-BFGS iteration (`gp_lbfgs_iterations` 1: about 3.4 likelihood evaluations a fit instead of 14 on "
        "lcbench): half the run time on lcbench, a quarter on rbv2_xgboost, and better regret than optimizing "
        "to convergence: convergence − one step +0.061 ± 0.015 at 10d (p = 4e-6) and +0.015 ± 0.007 at 30d "
        "(p = 0.019) on 26 lcbench test instances × 3 seeds, +0.026 ± 0.016 at 30d (p = 0.098) on 10 "
        "rbv2_xgboost instances × 3 (`studies/gp_iterations_*.yaml`). Fewer optimizations cost regret "
        "(`gp_refit_growth` g, measured with optimization to convergence: g = 0.03 +0.014 ± 0.008 at 30d, "
        "p = 0.09; g = 0.1 +0.015 ± 0.006, p = 0.007), so the GP presets keep g = 0. What is left (cProfile, "
        "lcbench 30d, then): the likelihood evaluations, a fifth of the run; scikit-learn's regressor around them "
        "(its kernel objects' hyperparameter and bounds bookkeeping, input checks, the kernel recomputed "
        "after the optimization), a third; predicting the 500 candidates, a sixth. Since the evening of "
        "2026-11-26 the regressor is our own (`components/_gp.py` MaternGP): the same closed-form likelihood, "
        "the optimizer's last Cholesky factorization reused at the optimum, predictions by one cross-kernel, a "
        "matrix-vector product and one triangular solve, and no scikit-learn objects in the loop. It equals "
        "scikit-learn's regressor up to rounding, so some runs take another path: against the old one on 26 "
        "held-out lcbench instances × 3 seeds at 30d, 76 of 78 runs end with the same regret, new − old "
        "−0.0008 ± 0.0006 (Wilcoxon p = 0.5; 10d: all 78 the same); on the first 10 held-out rbv2_xgboost "
        "instances × 3 seeds 19 of 30 runs end the same, +0.019 ± 0.014 at 30d (p = 0.16, 5 instances worse, "
        "2 better, 3 equal) and −0.0005 ± 0.0006 at 10d (p = 1). That is the size of a rounding change: the "
        "old regressor alone, with OpenBLAS made to use another CPU's kernels (`OPENBLAS_CORETYPE=Katmai`), "
        "kept 25 of those 30 runs and moved their mean by −0.005 ± 0.006. Either regressor gives the same "
        "bits run after run on one machine (one BLAS thread), but not across BLAS kernels: under that "
        "setting 1 of 8 bo_gp_ei traces at 10d differs, for the old and the new regressor alike. CPU time of a 30d run (one process, "
        "process_time, the first test instance, 2 seeds, loaded machine): 2.16 → 1.64 s on lcbench, 10.5 → "
        "7.8 s on rbv2_xgboost (1.3×). What is left (cProfile, "
        "lcbench 30d): the likelihood evaluations a third of the run, scipy's L-BFGS-B around them a tenth, "
        "predicting the 500 candidates a sixth (the triangular solve and the cross-kernel), sampling and the "
        "benchmark a tenth each. 100× would leave about 2 ms a batch beyond rs's own, less than one "
        "factorization of a few hundred points and one prediction of 500 candidates: what would reach it are "
        "fewer fits (`gp_refit_growth`, whose kept kernels now extend the Cholesky factor by the new rows) "
        "or fewer candidates, design choices whose regret cost was measured before (above). The 300d row "
        "grows faster than linearly because the first fits are the cheap ones: past `max_points` = 500 every "
        "fit works on 500 points. The exact ways left were measured on 2026-11-27 and do not pay: a fit's "
        "time is LAPACK's (at 400 points and 23 features, of 7 to 10 ms a likelihood evaluation: K⁻¹ from the "
        "Cholesky factor for the gradient 2.5 ms, the factorization 1.1 ms, the kernel 1.4 ms, the gradient's "
        "n × n products the rest). Extending the factor by the new rows needs the kernel kept, which "
        "`gp_refit_growth` > 0 already does; bo_gp_ei moves θ at every fit, so every fit factorizes anew. "
        "Other ways to compute the same quantities (fused or reordered sums, solves instead of the inverse) "
        "round differently and would need the regret measurement of a non-exact change. "
        "Since 2026-11-27 bo_gp_ei proposes 8 points per fit (`mu` 8, each the best of 500 random candidates "
        "by EI) and re-optimizes its kernel only when the archive grew by 10% (`gp_refit_growth` 0.1; in "
        "between the kernel is kept and the Cholesky factor extended by the new rows), measured with one L-BFGS "
        "iteration a fit: paired against the preset before, 26 held-out lcbench instances × 6 seeds +0.0046 ± "
        "0.0042 at 30d (Wilcoxon p = 0.10) and +0.0042 ± 0.0063 at 10d (p = 0.53), 10 rbv2_xgboost × 3 +0.0013 "
        "± 0.0024 at 30d (p = 0.91) and −0.0049 ± 0.0052 at 10d (p = 0.36) (`studies/model_speed_*.yaml`); "
        "CPU time of the study's 30d runs 1.5 → 0.6 s on lcbench, 9.4 → 2.8 s on rbv2_xgboost. The 8 best of "
        "one tournament of 500 instead (one prediction of 500 candidates per 8 points) ends worse, +0.046 ± "
        "0.007 at 30d on lcbench (p = 2e-7). What is left on rbv2_xgboost (cProfile): predicting the 4,000 "
        "candidates of a batch, the cross-kernel and the triangular solve of the variance, two thirds of the "
        "run; CPU time over the limit 120× there (about 70× on lcbench), one process, loaded machine; growth "
        "exponent 100d → 300d on lcbench/34539 1.22 (CPU time 5.1 → 19.3 s). SMAC's initial design "
        "(`initial_design_per_dim` 10, 2026-11-27, `studies/initial_design_*.yaml`: the first min(10·d, B/4) "
        "configurations a Sobol design) saves little time, since the early fits are the cheap ones (CPU time "
        "of a 30d run 0.48 → 0.43 s on lcbench, 2.13 → 1.80 s on rbv2_xgboost), and trades regret at 10d for "
        "regret at 30d: variant − bo_gp_ei at 10d / 30d of 30d runs +0.050 ± 0.008 (Wilcoxon p = 1.5e-7) / "
        "−0.011 ± 0.005 (p = 0.048) on 26 lcbench test instances × 3 seeds, +0.036 ± 0.041 (p = 0.064) / "
        "−0.023 ± 0.017 (p = 0.73) on 10 rbv2_xgboost × 3; in runs of 10d on lcbench (17 Sobol points) +0.0002 "
        "± 0.005 (p = 1). Not a speed lever: bo_gp_ei is unchanged. Since the evening of 2026-11-28 the "
        "variance's V = L⁻¹K*ᵀ is one triangular matrix product (BLAS's trmm) with L⁻¹, formed once per fit "
        "(LAPACK's trtri), instead of a triangular solve per prediction, and the cross-kernel is computed in "
        "place (the same bits, tests/test_exact_speedups.py): one prediction of 4,000 candidates with 19 "
        "features 1.5× faster at 100 points, 1.9× at 420 (one thread, alternating in one process). Not exact "
        "in principle: bo_gp_ei's 108 traces of `studies/gp_predict_*.yaml` (26 lcbench test instances × 3 "
        "seeds and 10 rbv2_xgboost × 3, 30d) are byte for byte those of the commit before (a8d1196), but "
        "metaopt_default's (a GP with LCB under a local search) took other paths in 91 of 108 runs, with no "
        "different regret: new − old at 30d −0.0007 ± 0.0031 on lcbench (Wilcoxon p = 0.65) and −0.011 ± "
        "0.009 on rbv2_xgboost (p = 0.69), at 10d −0.0046 ± 0.0036 (p = 0.12) and −0.014 ± 0.009 (p = 0.31). "
        "CPU time of "
        "one rbv2_xgboost run (instance 16, seed 1), the two versions alternating: 2.67 / 2.83 → 1.80 / "
        "2.12 s. What is left there: the cross-kernel (scipy's cdist and the Matern's exp) about half of a "
        "prediction. Three idle runs of the overhead and scaling sections that evening (the table above is "
        "the third): run / limit at 30d 56×, 81×, 70× on lcbench and 107×, 105×, 99× on rbv2_xgboost (114× "
        "that morning), growth exponent 100d → 300d 1.33, 1.26, 1.17."),
    "smashy_lcbench_hb": (
        "The kknn7 surrogate's neighbour query was most of this row: every batch scores the progressive "
        "filter's pool of n'·max(N_s⁰, N_s¹) candidates against the whole archive, so the run grew "
        "quadratically (exponent 1.78 at 300d). Since 2026-11-26 archives of 128 rows or more with at most 32 "
        "features go through scipy's KD-tree, which returns k + 4 neighbours per candidate; they are re-ranked "
        "by their exact distances (the same column-by-column sums as the scan) and then by index, and the "
        "scan answers the queries whose k-th neighbour the tree cannot separate from the next (ties, "
        "duplicates). The archive's fields also stopped being joined anew after every batch. Both are exact: "
        "48 traces (smashy_lcbench_hb, smashy_rbv2_equal, bohb, smac_like × lcbench, rbv2_xgboost, nb301 × "
        "10d, 30d × 2 seeds) are identical before and after. The harness run on the commit before (727d383) "
        "and right after on this one, idle machine: rbv2_xgboost 52× → 32×; lcbench 300d 128× → 46×, growth "
        "exponent 1.79 → 1.25; lcbench 30d 34× → 32× (its archive is small, and the scan was cheap). cProfile of what is left (rbv2_xgboost instance 16, 30d, "
        "2.1 s in the loop under the profiler): the neighbour query 0.59 s, 631 benchmark calls 0.41 s, KDE "
        "sampling 0.41 s, decoding to dicts 0.24 s, repair 0.18 s. On lcbench the row sits at the floor of "
        "a batch-sequential run: rs, one evaluation per batch, is at 32×; what would lower both is a cheaper "
        "benchmark call (yahpo-gym's per-call encoding and ONNX session run) and codec work per batch."),
    "bo_rf_ei": (
        "Growing the forest after every evaluation was three quarters of the run: 50 scikit-learn trees, "
        "8,750 tree fits in a 30d lcbench run (682× on lcbench, 746× on rbv2_xgboost, 2026-11-26 before the "
        "change). Since then bo_rf_ei regrows its trees only when the archive grew by 25% (`rf_refit_growth` "
        "0.25: 18 growths instead of 175 on lcbench) and in between refreshes each tree's leaf values with "
        "every point. That is a design choice, and it does not end worse: against regrowing every time, 26 "
        "held-out lcbench instances × 3 seeds, −0.018 ± 0.007 at 30d (Wilcoxon p = 0.03) and −0.006 ± 0.017 "
        "at 10d (p = 0.50), `studies/rf_refit_lcbench.yaml`; ten trees instead are as fast and end worse "
        "(+0.008 ± 0.005). Exact changes since (the same traces): the random candidates are decoded from one "
        "block of the generator's stream (ConfigSpace's rounds, also on spaces with conditions such as "
        "rbv2_xgboost's), the leaf sums are kept and only the new rows added, each tree's two random streams "
        "come from one re-seeded RandomState instead of two new ones, all trees' sums sit in one array, EI "
        "skips scipy's distribution wrapper and one row is decoded to a dict without column bookkeeping "
        "(170× → 118× on lcbench, 157× → 101× on rbv2_xgboost). Timed by section (lcbench, 30d, 0.75 "
        "s): predicting 500 candidates with 50 trees 0.21 s (scikit-learn's leaf lookup, about 30 µs a "
        "tree), the 18 growths 0.15 s (a third of each tree's fit was scikit-learn checking the bootstrap "
        "weights; since the evening of 2026-11-26 the trees are grown by scikit-learn's tree builder called "
        "directly, the same trees: CPU time of a 30d run 0.98 → 1.10 s on lcbench, within the noise of a loaded "
        "machine, 2.36 → 2.09 s on rbv2_xgboost), sampling 0.09 s, the benchmark 0.08 s, the leaf refresh 0.06 s. The knobs that would reach "
        "100× are design choices, and they cost regret on lcbench: 200 candidates +0.027 ± 0.008 at 30d (p = "
        "0.0008), g = 0.5 +0.012 ± 0.007 (p = 0.12); on rbv2_xgboost neither differs "
        "(`studies/rf_speed_lcbench.yaml`, `studies/rf_speed_rbv2_xgboost.yaml`, 26 × 3 each). So bo_rf_ei "
        "is unchanged. Eight points per fit (`mu` 8: one growth or leaf refresh and one scoring of 8 × 500 "
        "candidates per 8 evaluations; 52× on lcbench and 48× on rbv2_xgboost in CPU time against 93× and 95×, "
        "growth exponent 100d → 300d 1.01) ends worse on the mean as well, 2026-11-27: 26 lcbench instances × 6 "
        "seeds +0.0115 ± 0.0054 at 30d (p = 0.11), 10 rbv2_xgboost × 3 +0.0048 ± 0.0025 at 30d (p = 0.15) and "
        "+0.026 ± 0.019 at 10d (p = 0.055) (`studies/model_speed_*.yaml`), so bo_rf_ei stays as it is. "
        "SMAC's initial design (`initial_design_per_dim` 10, 2026-11-27, `studies/initial_design_*.yaml`: the "
        "first min(10·d, B/4) configurations a Sobol design) ends worse at 10d, alone and with `mu` 8: variant − "
        "bo_rf_ei at 10d / 30d of 30d runs, the design +0.041 ± 0.014 (Wilcoxon p = 0.0002) / +0.009 ± 0.005 "
        "(p = 0.094) on 26 lcbench test instances × 3 seeds, +0.029 ± 0.012 (p = 0.016) / +0.001 ± 0.004 (p = "
        "0.95) on 10 rbv2_xgboost × 3 (CPU time of a 30d run 0.74 → 0.58 s and 1.94 → 1.51 s); with `mu` 8 "
        "+0.035 ± 0.016 (p = 0.007) / +0.022 ± 0.006 (p = 0.002) on lcbench, +0.013 ± 0.007 (p = 0.11) / "
        "−0.002 ± 0.003 (p = 0.74) on rbv2_xgboost (0.30 s and 0.74 s). bo_rf_ei stays as it is."),
    "metaopt_lcbench": (
        "the design the lcbench and rbv2_xgboost studies found (cfo_then_rf): FLOW² for the first half of "
        "the budget, one evaluation per batch, then smac_like's forest of 10 trees on log losses and log-EI "
        "over 2,000 random candidates plus a local search, the forest regrown after every evaluation (every 4 "
        "since 2026-11-27, below). "
        "Drawing the 2,000 candidates was a quarter of its time on lcbench; since 2026-11-26 they are decoded "
        "from one block of the generator's stream, the same numbers (286× → 214× on lcbench; since the same "
        "day also on spaces with conditions, 276× → 242× on rbv2_xgboost, and 173× on lcbench with the "
        "exact changes listed under bo_rf_ei). Since the evening of 2026-11-26 the trees are grown by "
        "scikit-learn's tree builder, splitter and criterion called directly, without the estimator (whose "
        "checks of the bootstrap weights and of its parameters took more time than building a tree of a few "
        "hundred rows), and the local search's pick of the best distinct candidates converts the rows once "
        "per batch: the same traces. CPU time of a 30d run (one process, process_time, the first test "
        "instance, 2 seeds, loaded machine): 1.46 → 1.21 s on lcbench, 5.12 → 4.21 s on rbv2_xgboost (1.2×). "
        "cProfile of what is left (smac_like, lcbench, 30d, under the "
        "profiler): growing the trees a fifth (scikit-learn's builder itself), scoring the candidates and the "
        "local search's neighbours 29% (ten leaf lookups a call 9%, the features 7%, log-EI 7%), the "
        "neighbours' repair onto the space 13%, sampling 12%, the benchmark 7%. "
        "A refit schedule (`rf_refit_growth`, in the design space since then) would cut the first, but that "
        "is another design: the search, not the harness, should pick it. The exact changes of the night of "
        "2026-11-27 (smac_like's note: the repair of the neighbours, the features at one fidelity) apply to "
        "its second half: CPU time of a 30d run 1.29 → 1.07 s on lcbench (1.20×), 4.15 → 3.89 s on "
        "rbv2_xgboost (1.07×; 1.24× in an earlier such measurement), main and the change alternating in "
        "one process, loaded machine. Since 2026-11-27 metaopt_lcbench is a speed variant of the found design "
        "(which stays `cfo_then_rf`): in its second half the forest is refitted and log-EI maximized only every "
        "4 evaluations, and the next end points of that maximization's local searches are evaluated in "
        "between (`lrs_retrain_after` 4; SMAC's HPO facade retrains every 8). Paired against the found design "
        "(`studies/model_speed_*.yaml`; 10d falls in CFO's half, the same runs): 26 held-out lcbench instances "
        "× 6 seeds +0.0005 ± 0.0038 at 30d (Wilcoxon p = 0.37), 10 rbv2_xgboost × 6 +0.0031 ± 0.0034 (p = "
        "0.31); CPU time of the studies' 30d runs 1.1 → 0.4 s on lcbench, 3.7 → 1.5 s on rbv2_xgboost; CPU "
        "time over the limit on the first test instance about 53× and 69× (one process, loaded machine). "
        "Retraining every 8 evaluations ends worse (+0.013 ± 0.004 at 30d on lcbench, p = 0.0007), and so "
        "does regrowing the trees only as the archive grows by 25% on top (`rf_refit_growth` 0.25: +0.024 ± "
        "0.005 with k = 4, p = 6e-7), although that alone would bring the growth exponent below 1.3: with "
        "k = 4 the trees are still grown on the whole archive every 4 evaluations, CPU time 1.8 → 11.8 s from "
        "100d to 300d on lcbench/34539 (exponent 1.70). Since 2026-11-28 its trees are grown on at most 500 "
        "bootstrap draws (`rf_max_samples` 500, as smac_like): the same runs up to 500 evaluations (the 30d "
        "rows), and the exponent from 100d to 300d 1.02 and 1.25 in two idle runs of the scaling section "
        "(d02b08e, b4a2c0c; CPU time on lcbench/34539 at 300d 20 → 11 s); regret at 100d against the design before +0.0001 ± 0.0010 on 26 lcbench instances × 2 "
        "seeds (p = 0.89), +0.005 ± 0.008 on 10 rbv2_xgboost × 2 (p = 0.44); on nb301 at 30d, where its "
        "runs differ from the 501st evaluation on, +0.018 ± 0.011 over 5 seeds (p = 0.19), on a benchmark "
        "where it is not the design to use (smac_like 0.006) (`studies/rf_max_samples_*.yaml`). Since the "
        "evening of 2026-11-28 the cap is 30 draws per feature column instead (`rf_max_samples_per_feature` "
        "30, as smac_like: 240 on lcbench), which leaves nb301's 30d runs as they were without a cap; at 100d "
        "against the 500 draws −0.0008 ± 0.0012 on lcbench (p = 0.88), +0.0004 ± 0.0116 on rbv2_xgboost "
        "(p = 0.44) (`studies/rf_samples_per_feature_*.yaml`)."),
    "smac_like": (
        "the same forest, candidates and local search as metaopt_lcbench, for the whole budget (one evaluation "
        "and one forest of 10 trees a batch, 2,000 random candidates, up to 10 local-search steps of 200 "
        "neighbours each). Exact changes of the evening of 2026-11-26 (24 traces of smac_like, metaopt_lcbench "
        "and bo_rf_ei on two lcbench and two rbv2_xgboost instances × 2 seeds at 10d identical before and "
        "after): the trees grown by scikit-learn's builder without the estimator (growth 0.90 → 0.46 s of a "
        "run under the profiler), the best distinct candidates picked without converting every row anew "
        "(0.27 → 0.03 s), log-EI's σ → 0 branch computed only where it is used. CPU time of a 30d run (one "
        "process, process_time, the first test instance, 2 seeds, loaded machine): 2.69 → 1.94 s on lcbench, "
        "8.49 → 7.18 s on rbv2_xgboost (1.4× and 1.2×; rs: 0.15 and 0.6 s). 100× would leave "
        "about 2 ms a batch beyond rs's own; growing ten trees on a few hundred rows takes about that "
        "already, and the ten leaf lookups of the 10 to 12 scoring calls a batch (the local search is "
        "sequential: each step starts from the last step's best) as much again. What would reach it are "
        "design choices: a refit schedule for the forest (`rf_refit_growth`, bo_rf_ei's 0.25), fewer "
        "candidates or local-search steps. The run grows faster than linearly for the same reason: every "
        "batch grows the trees on the whole archive. CPU time on lcbench/34539 (one seed, one process, "
        "loaded machine) from 100d to 300d: smac_like 9.2 → 58.4 s (growth exponent 1.68), metaopt_lcbench "
        "6.0 → 38.7 s (1.70), bo_rf_ei, whose trees are regrown only when the archive grew by 25%, 3.3 → "
        "11.7 s (1.16). The scaling section of 2026-11-26 evening was measured while the machine's load "
        "average rose past 100: its seconds, and the exponents between them, are not comparable. "
        "Exact changes of the night of 2026-11-27 (70 traces of smac_like, metaopt_lcbench, bo_rf_ei, "
        "bo_gp_ei, cfo_tuned, smashy_lcbench_hb and bohb on two lcbench, two rbv2_xgboost instances and nb301 "
        "× 2 seeds at 10d, and 24 at 30d, identical before and after; tests/test_exact_speedups.py): the "
        "repair of the local "
        "search's neighbours works from a per-column plan (all columns clipped and rounded at once, "
        "InConditions tested by equality instead of np.isin, one unchecked conversion for an integer's legality "
        "and snapping, fresh values from the codec's samplers and one re-seeded RandomState): 0.58 → 0.24 ms a "
        "call on rbv2_xgboost, 0.21 → 0.13 ms on lcbench (CPU time, the calls of a 30d run); the features of "
        "candidates at one fidelity skip np.unique. CPU time of a 30d run, main and the change alternating "
        "in one process (2 rounds × 2 seeds, the first test instance, loaded machine): 2.08 → 1.61 s on "
        "lcbench (1.30×; 1.06× in an earlier such measurement), 7.33 → 6.42 s on rbv2_xgboost (1.14×, "
        "both times); at 10d on nb301 12.6 → 9.5 s (1.33×). One seed on lcbench/34539: 100d 10.5 → 9.1 s, "
        "300d 58.5 → 59.9 s: the 300d run is the trees' growth on up to 2,100 rows, which these changes "
        "leave as it is, so the growth exponent stays above 1.5. "
        "Evaluated and left out: one stacked forest (the ten trees' node arrays concatenated and descended "
        "level by level in numpy for all rows and trees at once) finds the same leaves but is 3 to 7× slower "
        "than scikit-learn's per-tree leaf lookup, which costs about 5 µs a call plus 0.03 to 0.05 µs a row "
        "and tree (10 trees × 2,000 rows: 1.1 ms against 4.5 ms; 10 × 200: 0.09 against 0.59 ms; 50 × 500: "
        "2.5 against 6.7 ms); growing a tree spends about 25 µs outside scikit-learn's builder (its objects "
        "and the bootstrap draw) of 0.4 ms (150 rows, 8 features) to 3.3 ms (300 rows, 30 features). What is "
        "left, CPU time a batch on lcbench / rbv2_xgboost at 30d (loaded machine, ±30% between runs): growing "
        "the ten trees 2.1 / 6.4 ms, the leaf lookups of the 7 to 10 scoring calls 1.5 / 2.3 ms, sampling "
        "the 2,000 candidates 1.2 / 1.6 ms, the neighbours with their repair 1.0 / 2.3 ms, log-EI 0.6 / "
        "0.9 ms, the features 0.5 / 0.9 ms, the pick of the best distinct candidate 0.2 / 0.4 ms: "
        "the first three are scikit-learn's builder, its leaf lookup and the generator's stream, so the "
        "targets (100× at 30d, exponent 1.3) need the design choices above, not exact changes. The "
        "overhead table of 2026-11-27 was measured at a load average of 15 on the 2 cores: its wall-time "
        "ratios move by a third between runs of the same code (smac_like on lcbench 224×, 246×, 266× and "
        "357× in four runs of these changes, 232× and 265× in two of main's that night; on rbv2_xgboost "
        "277× to 340× against 380× and 529×), so the CPU-time ratios above measure the change, and the "
        "targets need a measurement on an idle machine. That measurement (2026-11-27 05:40, load average 0.5, "
        "commit 968fedd, an AMD EPYC machine): smac_like 199× / 265× against the target 100×; the limit "
        "itself, one batched benchmark call, is 2 to 5 times faster on the idle machine than under load, so "
        "the ratios are no lower than the loaded ones. The table above (2026-11-28, idle, an Intel Xeon "
        "machine) has 213× / 355×: the ratios are the machine's too (rs 24× / 23× there against 16× / 17×). The design choices, measured on 2026-11-27 against "
        "smac_like on 26 held-out lcbench instances × 3 seeds (`studies/model_speed_lcbench.yaml`; variant − "
        "smac_like at 10d / 30d, Wilcoxon p): SMAC's HPO facade retrains its forest only every 8 "
        "configurations (its ConfigSelector's `retrain_after` = 8; the black-box facade's is 1) and "
        "evaluates the next challengers of one maximization, the local searches' end points, in between. "
        "That is `lrs_retrain_after` k (since 2026-11-27 in the design space): k = 8 +0.062 ± 0.022 (p = "
        "0.009) / +0.004 ± 0.018 (p = 0.28), 0.41 s of CPU a run instead of 1.74 s; k = 4 +0.038 ± 0.020 (p = "
        "0.008) / +0.014 ± 0.018 (p = 0.11), 68× on lcbench and 107× on rbv2_xgboost in CPU time. Our run "
        "starts from one random point where SMAC spends up to a quarter of the budget on its initial "
        "design, so retraining every k evaluations costs most early (10d). With the forest regrown only as "
        "the archive grows by 25% as well (`rf_refit_growth` 0.25) both are worse (k = 8 +0.077 / +0.039, p = "
        "0.0006 / 0.024; k = 4 +0.075 / +0.056, p = 0.002 / 0.001). Eight points per fit (`mu` 8) takes "
        "the 8 best-scored candidates, mostly one local search's last neighbours: +0.134 ± 0.020 / +0.080 ± "
        "0.020 (p = 9e-8 / 6e-8). So smac_like is unchanged; k = 4 and k = 8 reach its speed targets at 30d "
        "(but not the growth exponent: the trees are still grown on the whole archive, 1.66 from 100d to "
        "300d with k = 4) at a regret cost the 10d numbers show. SMAC's HPO facade starts with an initial "
        "design, which our run did not have: since 2026-11-27 `initial_design_per_dim` n (SMAC: 10) makes the "
        "first min(n·d, B/4) configurations a scrambled Sobol design. Measured the same day, paired against "
        "smac_like (`studies/initial_design_*.yaml`; variant − smac_like at 10d / 30d of 30d runs, Wilcoxon p; "
        "CPU time of a 30d run, one process, loaded machine): SMAC's own settings, the design and k = 8, "
        "+0.136 ± 0.022 (p = 1.5e-7) / +0.012 ± 0.019 (p = 0.067) on 26 lcbench test instances × 3 seeds, "
        "1.58 → 0.28 s, and +0.030 ± 0.032 (p = 0.32) / +0.021 ± 0.031 (p = 0.94) on 10 rbv2_xgboost × 3, "
        "5.28 → 1.03 s; the design and k = 4 +0.109 ± 0.021 (p = 4e-6) / +0.017 ± 0.019 (p = 0.12) on lcbench, "
        "0.45 s, and +0.010 ± 0.035 (p = 0.62) / −0.0004 ± 0.026 (p = 0.94) on rbv2_xgboost, 1.74 s; the "
        "design alone +0.104 ± 0.021 (p = 9e-6) / +0.018 ± 0.024 (p = 0.78) on lcbench, −0.0005 ± 0.014 at "
        "30d on rbv2_xgboost. In a 30d run the design is 52 of lcbench's first 70 evaluations, which smac_like "
        "spends on its forest. In runs of 10d (a design of 17; `studies/initial_design_lcbench_10d.yaml`) the "
        "design alone costs nothing (+0.001 ± 0.016, p = 0.92), but it does not pay for retraining less "
        "often: k = 8 +0.059 ± 0.022 (p = 0.004), k = 4 +0.042 ± 0.021 (p = 0.046), as without it (+0.062 "
        "and +0.038 above). So the initial design does not make SMAC's retraining schedule free on lcbench, "
        "and smac_like is unchanged. A bootstrap of at most 500 draws a tree (`rf_max_samples` 500, "
        "scikit-learn's `max_samples`, in the design space since 2026-11-28) keeps the trees the same up to "
        "500 evaluations (tests/test_exact_speedups.py checks the forest against scikit-learn's with "
        "`max_samples`), and past them a fit costs about what a fit on 700 points did (some 450 distinct "
        "rows a tree) however large the archive grows. On lcbench/34539, seed 1, CPU time (one process, "
        "another study beside it): 100d 12.8 s, of which growing the trees 5.5 s and their leaf lookups "
        "1.8 s; 300d 53.7 s (27.0 s and 7.1 s) against 85 s with the whole archive; the exponent from 100d "
        "to 300d 1.43 (the scaling table of d02b08e, idle), which is the approach to the cap, not its end: a "
        "100d run reaches 500 evaluations only near its end, and a fit at the cap costs 1.6 times the 100d "
        "run's average fit (15.9 against 9.8 ms). Its regret past 500 evaluations, with − without the cap "
        "(`studies/rf_max_samples_*.yaml`): at 100d +0.0003 ± 0.0008 on 26 lcbench instances × 2 seeds "
        "(Wilcoxon p = 0.93), −0.011 ± 0.018 on 10 rbv2_xgboost × 2 (p = 0.84); but on nb301 at 30d "
        "(1,020 evaluations, d = 34) +0.0066 ± 0.0054 over 5 seeds (p = 0.38; 0.0125 against 0.0059, "
        "worse on 3 seeds), where smac_like is the best design we have. So smac_like kept SMAC's "
        "whole-archive bootstrap (and its growth exponent, about 1.8) that morning. Since the evening of "
        "2026-11-28 its trees are grown on at most 30 bootstrap draws per feature column "
        "(`rf_max_samples_per_feature` 30; p columns, at least one per hyperparameter, so k·p ≥ 30·d and "
        "every run up to 30d is the same as with the whole archive on every benchmark, nb301's 1,020 "
        "evaluations against 30 × 235 columns included): 240 draws on lcbench, 570 on rbv2_xgboost. A fit at "
        "the cap on 2,100 rows costs about what one on 240 distinct rows does (10 trees, 8 features: 12 ms "
        "against 6 ms for the whole-archive bootstrap of 210 rows and 97 ms of 2,100; growing the trees on "
        "the drawn rows alone instead of all rows with zero weights gave no measurable gain). At 100d, "
        "against the whole archive (`studies/rf_samples_per_feature_*.yaml`): +0.0075 ± 0.0083 on 26 "
        "lcbench instances × 2 seeds (Wilcoxon p = 0.37; worse on 16, better on 9), −0.017 ± 0.016 on 10 "
        "rbv2_xgboost × 2 (p = 0.84); CPU time a run 11.7 → 8.9 s and 66 → 44 s. One run of lcbench/34539 "
        "(seed 1, CPU time, idle machine): 100d 6.9 s, 300d 28.0 s, exponent 1.27 (with 50 draws per "
        "feature 8.0 → 35.0 s, 1.35: k = 30 keeps the 30d runs whatever the problem, since p > d, and a "
        "larger k misses 1.3). Three idle runs of the overhead and scaling sections that evening (the "
        "tables above are the third): growth exponent 100d → 300d 1.04, 1.27, 1.26 (1.64 that morning); "
        "run / limit at 30d unchanged, 271×, 203×, 193× on lcbench and 329×, 306×, 326× on rbv2_xgboost. "
        "Exact change of 2026-11-28 night: the C library's exp, log, expm1 and log1p (`metaopt.core.libm`, "
        "which log-EI, the features and the codec use so that every CPU gives the same bits) called a Python "
        "function per element, 420,000 calls a 30d lcbench run (a sixth of it under the profiler); they are "
        "now scipy's Box-Cox ufuncs at λ = 0, compiled loops over the same C functions (the same bits: "
        "tests/test_exact_speedups.py against math on random and edge arguments; 80 traces of ten presets × "
        "lcbench, rbv2_xgboost, mlp, rosenbrock × 2 instances at 10d identical before and after). CPU time "
        "of a 30d run on the first lcbench test instance (seed 1, idle machine): 2.86 → 2.45 s. The overhead "
        "section right after (idle, /tmp, not committed): 177× / 298×, within the spread of the runs above."),
    "rs": (
        "one evaluation per batch: its ratio is mostly the price of one benchmark call per evaluation "
        "(a YAHPO ONNX session run costs about a millisecond) against one batched call; every sequential "
        "optimizer pays it."),
    "cfo": (
        "one evaluation per batch, like rs: the ratio is the per-call cost of the benchmark, not the "
        "local search."),
}
"""Optimizer -> what its profile shows; shown under the table for the optimizers measured, slowest first."""


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "(no rows)"
    columns = list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(str(row[c]) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def _seconds(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _mean_se(values: list[float]) -> str:
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if len(v) == 0:
        return "–"
    se = v.std(ddof=1) / np.sqrt(len(v)) if len(v) > 1 else float("nan")
    return f"{v.mean():.4f}" + (f" ± {se:.4f}" if np.isfinite(se) else "")


def _se(values: list[float]) -> float:
    """Standard error of the mean; NaN with fewer than two values."""
    return float(np.std(values, ddof=1) / np.sqrt(len(values))) if len(values) > 1 else float("nan")


def _skipped(section: dict[str, Any]) -> list[str]:
    return [f"- skipped: {s['optimizer']}" + (f" at {s['budget']}" if "budget" in s else "") + f" ({s['reason']})"
            for s in section.get("skipped", [])]


def _groups(rows: list[dict[str, Any]], *keys: str) -> dict[tuple, list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[tuple(row[k] for k in keys)].append(row)
    return groups


def _header(results: dict[str, Any]) -> list[str]:
    m = results["machine"]
    packages = ", ".join(f"{k} {v}" for k, v in m["packages"].items() if v)
    load = m.get("load_average")
    return [
        "# Benchmarks: how fast and how good, side by side with the peers", "",
        f"Measured {m['date']} on {m['cpu']}, {m['cores']} cores"
        + (f" (load average at start {', '.join(map(str, load))}: the machine is shared)" if load else "")
        + f"; Python {m['python']}, {m['platform']}; commit {m.get('git_commit') or 'unknown'}.", "",
        f"Packages: {packages}.", "",
        f"Regenerate (configuration `{results['config']['name']}`, {results['wall_time_s'] / 60:.0f} min):", "",
        f"    {results['command']}", "",
        "Rewrite this file from the JSON alone (e.g. after editing the notes in `bench/report.py`):", "",
        "    metaopt bench --report-only --out bench/results.json --md docs/benchmarks.md", "",
        "Every ratio compares two measurements taken in the same process, one right after the other, "
        "so it holds on a noisy machine even when the absolute seconds do not.", "",
        *_measured_lines(results),
    ]


def section_stamp(results: dict[str, Any]) -> dict[str, Any]:
    """When, on which commit and machine load, and by which command a result's sections were measured
    (stored as each section's ``measured``; results from before the stamps: the result's own)."""
    m = results["machine"]
    return {"date": m["date"], "git_commit": m.get("git_commit"), "load_average": m.get("load_average"),
            "command": results["command"]}


def _measured_lines(results: dict[str, Any]) -> list[str]:
    """When the sections were measured at different times (``--keep-other-sections``): each one's date,
    commit and command; nothing when they all come from the run in the header."""
    stamps = {name: data.get("measured") or section_stamp(results) for name, data in results["sections"].items()}
    if all(stamp["date"] == results["machine"]["date"] for stamp in stamps.values()):
        return []
    lines = ["Sections measured at different times:", ""]
    for name, stamp in stamps.items():
        lines.append(f"- {name}: {stamp['date']}, commit {stamp.get('git_commit') or 'unknown'} "
                     f"(`{stamp['command']}`)")
    return lines + [""]


def _overhead(section: dict[str, Any]) -> list[str]:
    rows = []
    for (benchmark, optimizer), runs in _groups(section["rows"], "benchmark", "optimizer").items():
        run_s = np.mean([r["run_s"] for r in runs])
        batches = np.mean([r["batches"] for r in runs])
        limit_s = np.mean([r["limit_s"] for r in runs])
        rows.append({"benchmark": benchmark, "optimizer": optimizer, "runs": len(runs),
                     "evals": f"{np.mean([r['evals'] for r in runs]):.0f}", "batches": f"{batches:.0f}",
                     "run [s]": _seconds(run_s), "limit [s]": f"{limit_s:.4f}",
                     "run / limit": f"{np.median([r['ratio'] for r in runs]):.0f}",
                     "ms per batch": f"{1000 * (run_s - limit_s) / max(batches, 1):.2f}",
                     "_ratio": float(np.median([r["ratio"] for r in runs]))})
    worst = sorted(rows, key=lambda r: -r["_ratio"])
    lines = [
        "## 1. Inner-run overhead", "",
        f"Wall time per run at {section['budget']} (mean over instances × seeds) and its ratio to the *limit*: "
        "the time the same evaluations take in one batched benchmark call (best of 3), measured right after "
        "the run. `run / limit` is the median of the per-run ratios; `ms per batch` is the optimizer's own time "
        "per batch, (run − limit) / batches.", "",
        _table([{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]), "",
        *_skipped(section),
    ]
    notes = [f"- **{o}**: {OVERHEAD_NOTES[o]}" for o in dict.fromkeys(r["optimizer"] for r in worst)
             if o in OVERHEAD_NOTES]
    if notes:
        lines += ["", "What the profiles show, slowest rows first:", "", *notes]
    return lines + [""]


def peer_comparisons(section: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (benchmark, peer): its time and regret next to its counterpart's, over paired runs.

    Regret differences are paired by (instance, seed), averaged over seeds per instance, and their
    mean ± s.e. is over instances: seeds of one instance are not independent evidence.
    """
    out = []
    by_key = {(r["kind"], r["optimizer"], r["benchmark"], r["instance"], r["seed"]): r for r in section["rows"]}
    for (benchmark, peer), runs in _groups([r for r in section["rows"] if r["kind"] == "peer"],
                                           "benchmark", "optimizer").items():
        ours = section["counterparts"].get(peer)
        pairs = [(r, o) for r in runs if (o := by_key.get(("ours", ours, benchmark, r["instance"], r["seed"])))
                 is not None]
        if not pairs:
            continue
        peer_s, ours_s = np.mean([p["run_s"] for p, _ in pairs]), np.mean([o["run_s"] for _, o in pairs])
        peer_r = np.mean([p["normalized_regret"] for p, _ in pairs])
        ours_r = np.mean([o["normalized_regret"] for _, o in pairs])
        per_instance: dict[str, list[float]] = defaultdict(list)
        for p, o in pairs:
            per_instance[p["instance"]].append(p["normalized_regret"] - o["normalized_regret"])
        deltas = [float(np.mean(v)) for v in per_instance.values()]
        out.append({"benchmark": benchmark, "peer": peer, "ours": ours, "n": len(pairs),
                    "n_instances": len(deltas), "peer_s": peer_s, "ours_s": ours_s, "time_ratio": peer_s / ours_s,
                    "peer_regret": peer_r, "ours_regret": ours_r, "regret_delta": float(np.mean(deltas)),
                    "peer_better": sum(d < 0 for d in deltas),
                    "regret_delta_se": _se(deltas), "p_wilcoxon": _wilcoxon(deltas)})
    return out


def _wilcoxon(deltas: list[float]) -> float:
    """Two-sided Wilcoxon signed-rank p of paired per-instance differences; NaN below 2 instances, 1 if all are 0."""
    from scipy.stats import wilcoxon

    if len(deltas) < 2:
        return float("nan")
    return float(wilcoxon(deltas).pvalue) if any(d != 0 for d in deltas) else 1.0


def _delta(c: dict[str, Any]) -> str:
    """A peer's paired regret difference ± its s.e. over instances (none from a single instance)."""
    if np.isfinite(c["regret_delta_se"]):
        return f"{c['regret_delta']:+.4f} ± {c['regret_delta_se']:.4f}"
    return f"{c['regret_delta']:+.4f} (1 instance: no s.e.)"


def _peers(section: dict[str, Any]) -> list[str]:
    comparisons = {(c["benchmark"], c["peer"]): c for c in peer_comparisons(section)}
    rows = []
    for (benchmark, kind, optimizer), runs in _groups(section["rows"], "benchmark", "kind", "optimizer").items():
        c = comparisons.get((benchmark, optimizer))
        rows.append({"benchmark": benchmark, "optimizer": optimizer, "kind": kind,
                     "compared with": c["ours"] if c else "", "runs": len(runs),
                     "run [s]": _seconds(np.mean([r["run_s"] for r in runs])),
                     "run / limit": f"{np.median([r['ratio'] for r in runs]):.0f}",
                     "time vs ours": f"{c['time_ratio']:.2g}×" if c else "",
                     "normalized regret": _mean_se([r["normalized_regret"] for r in runs]),
                     "Δ regret vs ours (± s.e.)": _delta(c) if c else "",
                     "Wilcoxon p": f"{c['p_wilcoxon']:.2g}" if c and np.isfinite(c["p_wilcoxon"]) else "",
                     "peer better (instances)": f"{c['peer_better']}/{c['n_instances']}" if c else ""})
    status = ", ".join(f"{k}: {v}" for k, v in section["peer_status"].items())
    pairs = ", ".join(f"{p} ↔ {o}" for p, o in section["counterparts"].items())
    return ["## 2. Peers on the same problems", "",
            f"Same instances, seeds and budget ({section['budget']}); final normalized regret of the incumbent "
            "(mean ± s.e. over instances × seeds; 0 = best known loss, 1 = median random configuration). "
            f"Each peer is compared with one of our presets ({pairs}): `time vs ours` = peer time / our time "
            "(< 1: the peer is faster), `Δ regret` = peer − ours (< 0: the peer is better), paired by (instance, "
            "seed), averaged over seeds per instance, mean ± s.e. over instances, with the two-sided Wilcoxon "
            "signed-rank p of those per-instance differences; `peer better` counts the instances where the "
            "peer's seed-mean regret is lower.", "",
            f"Peers: {status}.", "", _table(rows), "", *_skipped(section), ""]


def _peer_wins(section: dict[str, Any]) -> list[str]:
    lines = ["## Where a peer beats us, and why", ""]
    wins = []
    for c in peer_comparisons(section):
        where = f"{c['peer']} vs {c['ours']} on {c['benchmark']}"
        if c["time_ratio"] < 1:
            close = " (within 10%: timing noise on a shared machine)" if c["time_ratio"] > 0.9 else ""
            wins.append((c["peer"], "speed", c["benchmark"], f"**{where}: faster**, {_seconds(c['peer_s'])} s vs "
                                             f"{_seconds(c['ours_s'])} s per run ({c['time_ratio']:.2g}×){close}."))
        if c["regret_delta"] < 0:
            se = c["regret_delta_se"]
            instances = f"{c['n_instances']} instance" + ("s" if c["n_instances"] > 1 else "")
            significant = np.isfinite(c["p_wilcoxon"]) and c["p_wilcoxon"] < 0.05
            noise = (f" Paired over {instances}: {c['regret_delta']:+.4f} ± {se:.4f}, Wilcoxon p = "
                     f"{c['p_wilcoxon']:.2g}." if significant else
                     f" On {instances} this is not distinguishable from instance-to-instance variation"
                     + (f" (difference {c['regret_delta']:+.4f} ± {se:.4f} s.e., Wilcoxon p = {c['p_wilcoxon']:.2g})."
                        if np.isfinite(se) else "."))
            wins.append((c["peer"], "quality", c["benchmark"], f"**{where}: lower regret**, {c['peer_regret']:.4f} vs "
                                               f"{c['ours_regret']:.4f} (better on {c['peer_better']} of "
                                               f"{instances}).{noise}"))
    if not wins:
        return lines + ["No peer is faster or better than its counterpart in these measurements.", ""]
    for peer, aspect, benchmark, text in wins:
        note = PEER_NOTES.get((peer, aspect, benchmark)) or PEER_NOTES.get((peer, aspect, "*"))
        lines.append(f"- {text}" + (f" {note}" if note else ""))
    return lines + [""]


def _meta(section: dict[str, Any]) -> list[str]:
    rows = [{"workers": r["workers"],
             "trials": f"{r['trials']} ({r['failed']} failed)" if r["failed"] else r["trials"],
             "wall [s]": _seconds(r["wall_s"]), "inner runs / s": f"{r['runs_per_s']:.3f}",
             "busy cores before": "?" if r.get("busy_cores_before") is None else f"{r['busy_cores_before']:.2f}",
             "speed-up": (f"{r['speedup']:.2f}×" if r.get("speedup_valid", True)
                          else f"not reported ({r['speedup']:.2f}× under load)"),
             "mean inner run [s]": f"{r['inner_run_s_mean']:.2f}",
             "worker time outside inner loops": f"{100 * r['outside_inner_share']:.0f}%",
             "cluster start [s]": f"{r['startup_s']:.1f}",
             "projected study [h]": f"{r['projected_study_h']:.1f}"} for r in section["rows"]]
    return ["## 3. Meta-optimization throughput", "",
            f"The optimize stage of `{section['study']}` ({section['benchmark']}, inner budget {section['budget']}, "
            f"design space {section['restriction'] or 'full'}, {len(section['instances'])} training instances): "
            f"{_meta_seeds_text(section)} run {section['rows'][0]['trials']} SMAC trials (inner runs) per "
            f"worker count, each into an empty store. The projected study is its {section['study_meta_seeds']} "
            f"meta-seeds × {section['study_trials']} trials = {section['study_runs']} inner runs at the measured "
            f"throughput{_projection_caveat(section)}. `worker time outside "
            "inner loops` is 1 − Σ inner-loop time / (workers × wall): SMAC, the scheduler, trace building, "
            "storing results and idle workers.", "", _table(rows), "", *_meta_remarks(section), "",
            *_evaluate_throughput(section)]


def _projection_caveat(section: dict[str, Any]) -> str:
    """Empty when the measurement ran the whole stage, else what the projection assumes."""
    if section["rows"][0]["trials"] >= section["study_runs"]:
        return " (the measurement is the whole stage)"
    return ("; these are SMAC's first trials, so the projection assumes later trials cost the same (SMAC's own "
            "model grows with the run history)")


def _evaluate_throughput(section: dict[str, Any]) -> list[str]:
    """The evaluate stage's runs per second per worker count (results from before it was measured: nothing)."""
    rows = section.get("evaluate_rows")
    if not rows:
        return []
    table = [{"workers": r["workers"], "runs": f"{r['runs']} ({r['failed']} failed)" if r["failed"] else r["runs"],
              "wall [s]": _seconds(r["wall_s"]), "runs / s": f"{r['runs_per_s']:.3f}",
              "busy cores before": "?" if r["busy_cores_before"] is None else f"{r['busy_cores_before']:.2f}",
              "speed-up": (f"{r['speedup']:.2f}×" if r["speedup_valid"]
                           else f"not reported ({r['speedup']:.2f}× under load)")} for r in rows]
    return ["The evaluate stage: the same list of runs (presets × test instances × seeds of the study, nothing "
            "stored) per worker count.", "", _table(table), ""]


def _meta_seeds_text(section: dict[str, Any]) -> str:
    """Which meta-seeds the measurement ran: all of the study's side by side (``meta_seeds``), or, in
    results written before they ran side by side, its first one (``meta_seed``)."""
    if "meta_seeds" in section:
        return f"its meta-seeds {', '.join(map(str, section['meta_seeds']))}, side by side,"
    return f"meta-seed {section['meta_seed']} alone"


def _meta_remarks(section: dict[str, Any]) -> list[str]:
    """What the numbers say about parallel speed-up (generated from the data)."""
    base = section["rows"][0]
    lines = []
    for row in section["rows"][1:]:
        if not row.get("speedup_valid", True):
            lines.append(f"The speed-up of {row['workers']} workers is not reported: other work kept "
                         f"{max(base['busy_cores_before'] or 0, row['busy_cores_before'] or 0):.2f} cores busy right "
                         f"before a measurement (more than {IDLE_BUSY_CORES}), so it would measure the free cores. "
                         "Rerun the section on an idle machine.")
            continue
        slower = row["inner_run_s_mean"] / base["inner_run_s_mean"]
        where = ("in this process, where one worker runs them without Dask" if base["workers"] == 1
                 else f"with {base['workers']} workers")
        own_share = row["own_cpu_s"] / row["wall_s"] if row.get("own_cpu_s") is not None else None
        if (row["speedup"] < 0.9 * row["workers"] / base["workers"] and base["workers"] == 1 and own_share
                and own_share > 0.1):
            lines.append(f"With {row['workers']} workers the throughput is {row['speedup']:.2f}× that of 1. "
                         f"This process, which runs SMAC (its model fit and acquisition search at every ask), "
                         f"the scheduler and the storing, used {row['own_cpu_s']:.1f} CPU seconds in the "
                         f"{row['wall_s']:.1f} s, {100 * own_share:.0f}% of a core, on the same cores as the "
                         f"workers, and each inner run took {slower:.2f}× as long as in the serial measurement. "
                         "Taking that share from the workers' cores slows them by at most "
                         f"{1 / (1 - own_share / row['workers']):.2f}×; the rest of the slowdown is the inner runs "
                         "themselves running side by side (these trials are SMAC's designs, some of them long GP or "
                         "neighbour-model runs; the evaluate stage's presets below, where this process only "
                         "schedules, show how far the workers scale on lighter runs).")
        elif row["speedup"] < 0.9 * row["workers"] / base["workers"] and slower > 1.2:
            lines.append(f"With {row['workers']} workers the throughput is {row['speedup']:.2f}× that of "
                         f"{base['workers']}, and each inner run (the same trials in both measurements) took "
                         f"{slower:.1f}× as long on average, although other work kept at most "
                         f"{max(base['busy_cores_before'] or 0, row['busy_cores_before'] or 0):.2f} cores busy "
                         "before the measurements: the worker processes did not get a core's worth of compute "
                         "each. The schedule is not the limit (worker time outside inner loops is small); the "
                         f"inner runs themselves take longer in the Dask worker processes than {where}.")
    return lines


def _scaling(section: dict[str, Any]) -> list[str]:
    rows = []
    for (optimizer, budget), runs in _groups(section["rows"], "optimizer", "budget").items():
        growth = runs[0]["growth_exponent"]
        rows.append({"optimizer": optimizer, "budget": budget, "full evals": f"{runs[0]['full_evals']:.0f}",
                     "evals": f"{np.mean([r['evals'] for r in runs]):.0f}", "runs": len(runs),
                     "run [s]": _seconds(np.mean([r["run_s"] for r in runs])),
                     "ms per eval": f"{1000 * np.mean([r['run_s'] / max(r['evals'], 1) for r in runs]):.2f}",
                     "run / limit": f"{np.median([r['ratio'] for r in runs]):.0f}",
                     "growth exponent": "" if growth is None else f"{growth:.2f}"})
    return ["## 4. Scaling with the budget", "",
            f"Wall time per run on {section['benchmark']}/{section['instance']} at growing budgets. The growth "
            "exponent k between a budget and the previous one is log(t₂/t₁) / log(B₂/B₁): 1 = linear in the "
            "budget, 2 = quadratic. A budget whose run is projected (from the last exponent, at least 1) to take "
            f"longer than {section['max_run_s']:.0f} s is skipped.", "",
            _table(rows), "", *_skipped(section), ""]


def _commit_label(rev: str, commit: str) -> str:
    """``rev`` as given, with the commit it named unless ``rev`` is already that commit's hash."""
    return f"`{rev}`" if commit.startswith(rev) else f"`{rev}` ({commit[:7]})"


def _baseline(section: dict[str, Any]) -> list[str]:
    rows = [{"code": _commit_label(section["baseline"], r["commit"]) if r["code"] == "baseline" else "this checkout",
             "run": r["repeat"] + 1, "trials timed": r["timed_trials"], "start-up [s]": f"{r['startup_s']:.1f}",
             "wall [s]": _seconds(r["wall_s"]), "trials / s": f"{r['trials_per_s']:.3f}",
             "busy cores before": "?" if r["busy_cores_before"] is None else f"{r['busy_cores_before']:.2f}"}
            for r in section["rows"]]
    low, high = section["speedup_range"]
    if section["speedup_valid"]:
        verdict = (f"**Speed-up: {section['speedup']:.2f}×** (this checkout's mean trials per second over the "
                   f"baseline's; {low:.2f}× to {high:.2f}× between the slowest and fastest runs).")
    else:
        verdict = (f"The speed-up ({section['speedup']:.2f}×) is not reported: other work kept cores busy "
                   "right before a run. Rerun the section on an idle machine.")
    return ["## 6. The optimize stage against an older commit", "",
            f"`metaopt optimize {section['study']} --workers {section['workers']}` under the commit "
            f"`{section['baseline']}` (its package built into a temporary folder, this environment's libraries) "
            f"and under this checkout, alternating, each run with its own copy of the study file and an empty "
            f"output folder, until {section['trials']} trials (inner runs, over the study's meta-seeds side by "
            "side) have finished. `wall` runs from the first finished trial to the last timed one; `start-up` "
            "(imports, references, the cluster) is before it. Several runs per version, since an older commit "
            "need not be deterministic (before 61ba438 the meta-seeds shared one generator, in the order their "
            "batches finished, so each run tries other designs).", "", _table(rows), "", verdict, ""]


def _api(section: dict[str, Any]) -> list[str]:
    rows = []
    for (benchmark, optimizer), runs in _groups(section["rows"], "benchmark", "optimizer").items():
        own_run = [r["run_s"] - r["batched_limit_s"] for r in runs]
        own_api = [r["minimize_s"] - r["per_config_limit_s"] for r in runs]
        rows.append({"benchmark": benchmark, "optimizer": optimizer, "runs": len(runs),
                     "run [s]": _seconds(float(np.mean([r["run_s"] for r in runs]))),
                     "minimize [s]": _seconds(float(np.mean([r["minimize_s"] for r in runs]))),
                     "minimize / run": f"{np.median([r['minimize_s'] / r['run_s'] for r in runs]):.2f}",
                     "own time: run [s]": _seconds(float(np.mean(own_run))),
                     "own time: minimize [s]": _seconds(float(np.mean(own_api))),
                     "own-time ratio": f"{np.mean(own_api) / np.mean(own_run):.2f}" if np.mean(own_run) > 0 else "",
                     "max Δ loss": f"{max(r['max_loss_difference'] for r in runs):.1e}"})
    return ["## 5. The Python API (ask/tell) against the batched loop", "",
            f"The same problem and seeds at {section['budget']}: `run` answers each batch with one batched benchmark "
            "call, `metaopt.minimize` calls a function once per configuration through the same ask/tell loop. "
            "`own time` subtracts each driver's evaluation limit (the batched call, or one call per "
            "configuration) from its wall time: what the optimizer and the driver cost. An own-time ratio "
            "near 1: asking and telling add nothing to the loop. `max Δ loss` compares the two traces row by row: 0 on "
            "the synthetic benchmarks; on YAHPO, whose ONNX surrogates compute in float32 with batch-size-dependent "
            "kernels, one configuration alone and inside a batch can differ in the last bits (about 1e-6), and the "
            "runs may part from there: the benchmark, not the driver.", "", _table(rows), ""]


def _replay(section: dict[str, Any]) -> list[str]:
    rows = [{"arm": r["arm"], "run": r["repeat"], "trials": r["trials"], "wall [s]": _seconds(r["wall_s"]),
             "CPU [s]": _seconds(r["cpu_s"]), "ms per trial": f"{r['ms_per_trial']:.0f}",
             "busy cores before": f"{r['busy_cores_before']:.2f}"} for r in section["rows"]]
    def ratios(field: str) -> str:
        """SMAC as shipped over fast_asks in ``field``, each run against the one right after it."""
        shipped = [r[field] for r in section["rows"] if r["arm"] == "SMAC 2.4 as shipped"]
        fast = [r[field] for r in section["rows"] if r["arm"] == "fast_asks"]
        return ", ".join(f"{a / b:.2f}×" for a, b in zip(shipped, fast))

    busy = max(r["busy_cores_before"] for r in section["rows"])
    return ["## 8. The meta-optimizer's own time: a search replayed from its archive", "",
            f"The first {section['trials']} of the {section['study_trials']} trials of `{section['study']}` "
            f"(SMAC's algorithm-configuration facade racing designs of `{section['restriction']}` over "
            f"{section['instances']} training instances × {section['inner_seeds']} seeds), replayed from "
            f"`{section['archive']}` in one process: SMAC is asked for each trial and told its archived result, "
            "nothing runs, so the time is SMAC's and the meta-optimizer's own. This is what a slice of a long "
            "search spends before its first new trial, and what every new trial costs beside its inner runs. "
            "`fast_asks` (`metaopt.core.smac_utils`) is what the meta-optimizer runs: the predicted best "
            "configuration (the acquisition function's incumbent) from one batched forest prediction where SMAC "
            "2.4 makes one per configuration after every retraining, and `in` on the lists of processed and "
            "rejected configurations through an index of their values where SMAC compares with every element "
            "(`==` on two Configurations builds two dicts). Both arms proposed the same trials (checked); "
            f"{section.get('from_archive', section['trials'])} of the {section['trials']} were the archive's (SMAC's "
            "proposals depend on numpy's vector kernels: on a CPU with other kernels than the archive's machine the "
            "search leaves the archive, and an untimed first pass runs the rest once).", "", _table(rows), "",
            f"SMAC as shipped over fast_asks, each run against the one right after it: CPU time "
            f"{ratios('cpu_s')}, wall time {ratios('wall_s')}"
            + (f" (other work held up to {busy:.1f} cores before a run: the CPU time, this process's own, measures the "
               "change; the wall time depends on what else ran)." if busy > 0.5 else "."), ""]


def _meta_fidelity(section: dict[str, Any]) -> list[str]:
    arms = section["arms"]
    one, others = arms[0], arms[1:]
    rows = []
    for arm in arms:
        star = arm["gamma_star"] + (f" ({arm['gamma_star_known_design']})" if arm["gamma_star_known_design"] else "")
        rows.append({
            "study": f"`{arm['study']}`", "search": arm["search"],
            "trials per meta-seed": "/".join(map(str, arm["trials_finished"]))
                                    + (" (stopped at the time)" if arm["stopped_at_time"] else ""),
            "inner runs (by inner budget)": f"{arm['inner_runs']} ("
                                            + ", ".join(f"{n} at {b}" for b, n in arm["by_inner_budget"].items()) + ")",
            "full-run equivalents": f"{arm['full_equivalents']:.0f}",
            "inner CPU [h]": f"{arm['inner_cpu_s'] / 3600:.3f}", "wall [s]": _seconds(arm["wall_s"]),
            "inner runs per CPU-hour": f"{arm['runs_per_cpu_hour']:.0f}",
            "selection runs": arm["selection_runs"], "γ*": star,
            "γ* on the judge's runs": _mean_se(arm["judged"]),
        })
    ratios = []
    for arm in others:
        deltas = [b - a for a, b in zip(one["judged"], arm["judged"])]
        quality = ("the same γ* as the one-fidelity search" if arm["same_gamma_star"] else
                   f"γ* − the one-fidelity search's γ* on the judge's runs {np.mean(deltas):+.4f} ± {_se(deltas):.4f} "
                   f"over {len(deltas)} instances (Wilcoxon p = {_wilcoxon(deltas):.2g}; < 0: this search's γ* is better)")
        runs_ratio = arm["runs_per_cpu_hour"] / one["runs_per_cpu_hour"]
        ratios.append(f"- `{arm['study']}`: inner runs per CPU-hour **{runs_ratio:.2f}×** (full-run equivalents per CPU-hour "
                      f"{arm['full_equivalents_per_cpu_hour'] / one['full_equivalents_per_cpu_hour']:.2f}×); its inner CPU "
                      f"{arm['inner_cpu_s'] / one['inner_cpu_s']:.2f}× the one-fidelity search's; {quality}.")
    busy = max(arm["busy_cores_before"] for arm in arms)
    selections = [f"- `{arm['study']}`: " + "; ".join(
        f"{c['known_design'] or c['hash']} {c['search_mean']:.4f} → {c['selection_mean']:.4f}" for c in arm["candidates"])
        for arm in arms if arm.get("candidates")]
    return (["## 9. Cheaper meta-trials: one inner budget against the multi-fidelity search, on one CPU budget", "",
            f"{section['benchmark']} at {section['budget']}, {len(section['instances'])} training instances, "
            f"{section['workers']} worker(s), every search in this process from an empty store. The first study's "
            "search runs its trials; each other's (SMAC's multi-fidelity facade over the inner budget: a design "
            "is run on every training instance at a fraction of the inner budget and the best are promoted; the "
            "known designs enter its brackets first) runs for as long as the first took, and is stopped there. "
            "Each then selects its γ* by its study's rule. "
            "A meta-trial is an inner run (a design on one instance and seed) at any inner budget; its CPU time is "
            "the run's own. Every γ* is then re-run on the same "
            f"{len(section['judge_seeds'])} fresh seed(s) of every training instance (the meta-objective: mean over "
            "instances of the per-instance mean over those seeds).", "", _table(rows), "",
            "Against the one-fidelity search:", "", *ratios, ""]
            + ([f"Other work held up to {busy:.1f} cores before a search: the ratios of CPU time hold, the wall "
                "times and therefore the CPU budget the other searches got depend on it.", ""] if busy > 0.5 else [])
            + (["Each selection's candidates (a known design by its name, a proposal by its hash): mean objective in "
                "the search → on the selection's fresh seeds. A search chooses only among designs it ran at the full "
                "inner budget on every training instance (and the best known design it ran there):", "",
                *selections, ""] if selections else []))


def _clock(section: dict[str, Any]) -> list[str]:
    synchronous, asynchronous = [], []
    for (optimizer,), runs in _groups(section["overhead"], "optimizer").items():
        row = {"optimizer": optimizer, "runs": len(runs), "evals": f"{np.mean([r['evals'] for r in runs]):.0f}",
               "on the clock [ms/eval]": f"{1e3 * np.mean([r['clock_s'] / r['evals'] for r in runs]):.2f}"}
        if "today_s" in runs[0]:
            synchronous.append({**row, "today [ms/eval]": f"{1e3 * np.mean([r['today_s'] / r['evals'] for r in runs]):.2f}",
                                "clock / today": f"{np.median([r['clock_s'] / r['today_s'] for r in runs]):.2f}",
                                "same trace": "yes" if all(r["same_trace"] for r in runs) else "no"})
        else:
            asynchronous.append({**row, "benchmark alone, one call per evaluation [ms/eval]":
                                 f"{1e3 * np.mean([r['per_config_limit_s'] / r['evals'] for r in runs]):.2f}"})
    fractions = section["time_fractions"]
    curves = []
    for (optimizer,), runs in _groups(section["anytime"], "optimizer").items():
        row = {"optimizer": optimizer, "runs": len(runs),
               "simulated time to spend the budget [h]": f"{np.mean([r['sim_time'] for r in runs]) / 3600:.2f}",
               "utilization": f"{np.mean([r['utilization'] for r in runs]):.2f}"}
        for k, fraction in enumerate(fractions):
            row[f"regret at {fraction:g}·T"] = _mean_se([r["regret"][k] for r in runs])  # None: no result in yet
        curves.append(row)
    return ["## 7. The simulated clock: parallel runs against simulated wall-clock time", "",
            f"{section['benchmark']} at {section['budget']}, {section['workers']} simulated workers "
            "(`metaopt.engine.simclock`): an evaluation occupies a worker for its predicted runtime; synchronous designs "
            "wait for their whole batch, asynchronous ones (asha, async_bohb) propose whenever a worker frees.", "",
            "Cost per evaluation: the synchronous designs run as today (`run`) and on the clock, back to back, "
            "and evaluate the same configurations (`same trace`); an asynchronous design exists only on the clock "
            "and calls the benchmark once per configuration, so it is also set against that limit.", "",
            _table(synchronous), "", _table(asynchronous) if asynchronous else "", "",
            "Normalized regret (any fidelity; mean ± standard error over instances × seeds) of the best result in by "
            "simulated time T·fraction, T the longest simulated time any design of the instance and seed needed "
            "to spend the budget:", "", _table(curves), ""]


def markdown(results: dict[str, Any]) -> str:
    """The whole report; sections that were not run are left out."""
    sections = results["sections"]
    lines = _header(results)
    if "overhead" in sections:
        lines += _overhead(sections["overhead"])
    if "peers" in sections:
        lines += _peers(sections["peers"])
    if "meta" in sections:
        lines += _meta(sections["meta"])
    if "scaling" in sections:
        lines += _scaling(sections["scaling"])
    if "api" in sections:
        lines += _api(sections["api"])
    if "baseline" in sections:
        lines += _baseline(sections["baseline"])
    if "clock" in sections:
        lines += _clock(sections["clock"])
    if "replay" in sections:
        lines += _replay(sections["replay"])
    if "meta_fidelity" in sections:
        lines += _meta_fidelity(sections["meta_fidelity"])
    if "peers" in sections:
        lines += _peer_wins(sections["peers"])
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).rstrip() + "\n"  # one blank line between blocks
