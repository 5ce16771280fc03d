"""The report's figures (seaborn/matplotlib, Agg backend), each rendered to PNG bytes with its caption.

Every function takes tidy data prepared by :mod:`metaopt.analysis.report` and a caption that says what was
run; colours of optimizers come from :func:`optimizer_palette` so they agree across figures.
"""

from __future__ import annotations

import io
import math
import warnings
from dataclasses import dataclass
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib import ticker  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from metaopt.analysis.stats import RankTest  # noqa: E402

DPI = 120


@dataclass(frozen=True)
class Figure:
    """A rendered figure: file stem, title, caption and PNG bytes."""

    name: str
    title: str
    caption: str
    png: bytes


def _render(fig: plt.Figure, name: str, title: str, caption: str) -> Figure:
    buffer = io.BytesIO()
    with warnings.catch_warnings():  # crowded swarms stack their overflow at the edge: fine for these figures
        warnings.filterwarnings("ignore", "(?s).*cannot be placed", UserWarning)
        fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight", metadata={"Software": None})
    plt.close(fig)
    return Figure(name, title, caption, buffer.getvalue())


def _theme() -> None:
    sns.set_theme(style="whitegrid", context="notebook")


def optimizer_palette(names: Sequence[str]) -> dict[str, tuple[float, float, float]]:
    """One colour per optimizer (sorted names): tab20's ten strong colours first, then its ten light ones,
    so that up to ten optimizers never share a hue and up to twenty stay apart."""
    tab20 = sns.color_palette("tab20", 20)
    colours = tab20[0::2] + tab20[1::2]
    names = sorted(set(names))
    return {name: colours[i % len(colours)] for i, name in enumerate(names)}


def anytime(curves: pd.DataFrame, palette: dict, x_label: str, caption: str) -> Figure:
    """Mean normalized regret ± 1 s.e. over instances vs budget (log x), one panel per scenario.

    ``curves``: columns scenario, optimizer, instance, budget, regret (already averaged over seeds).
    Legend order: best final mean regret first.
    """
    _theme()
    scenarios = sorted(curves["scenario"].unique())
    fig, axes = plt.subplots(1, len(scenarios), figsize=(2.5 + 6.5 * len(scenarios), 4.8), squeeze=False)
    for ax, scenario in zip(axes[0], scenarios):
        data = curves[curves["scenario"] == scenario]
        last = data[data["budget"] == data["budget"].max()].groupby("optimizer")["regret"].mean()
        order = list(last.sort_values(kind="stable").index)
        sns.lineplot(data=data, x="budget", y="regret", hue="optimizer", hue_order=order, palette=palette,
                     errorbar="se", ax=ax)
        ax.set_xscale("log")
        ax.set_xlabel(x_label)
        ax.set_ylabel("mean normalized regret")
        ax.set_title(scenario)
        ax.legend(title="optimizer (best final first)", loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  frameon=False, fontsize=9)
    fig.tight_layout()
    return _render(fig, "anytime", "Anytime performance", caption)


def final_boxplots(scores: dict[str, pd.DataFrame], palette: dict, caption: str) -> Figure:
    """Box plots of the per-instance (seed-averaged) regret of each optimizer, one panel per budget.

    ``scores``: budget label -> instances × optimizers table. Rows sorted by the median at the last budget.
    """
    _theme()
    labels = list(scores)
    last = scores[labels[-1]]
    order = list(last.median().sort_values(kind="stable").index)
    fig, axes = plt.subplots(1, len(labels), figsize=(1.5 + 4.2 * len(labels), 0.9 + 0.42 * len(order)),
                             sharey=True, squeeze=False)
    for ax, label in zip(axes[0], labels):
        long = scores[label].melt(var_name="optimizer", value_name="regret", ignore_index=False)
        with warnings.catch_warnings():  # seaborn 0.13 passes matplotlib 3.11's deprecated vert= to bxp
            warnings.filterwarnings("ignore", "vert: bool", matplotlib.MatplotlibDeprecationWarning)
            sns.boxplot(data=long, x="regret", y="optimizer", hue="optimizer", order=order, palette=palette,
                        showfliers=False, width=0.6, ax=ax, legend=False)
        # a swarm, unlike a strip plot's random jitter, is deterministic
        sns.swarmplot(data=long, x="regret", y="optimizer", order=order, color="0.25", size=2.5, alpha=0.7, ax=ax)
        ax.set_title(f"at budget {label}")
        ax.set_xlabel("normalized regret (seed mean per instance)")
        ax.set_ylabel("")
    fig.tight_layout()
    return _render(fig, "final_boxplots", "Final performance per instance", caption)


def cd_diagram(test: RankTest, name: str, title: str, caption: str) -> Figure:
    """Demšar's critical-difference diagram: optimizers on an axis of average ranks (1 = best, left);
    thick bars join optimizers whose ranks differ by less than the Nemenyi CD (not significantly different).

    Drawn in inches: y = 0 is the rank axis, the CD bar is above it, the group bars and then the
    optimizers' elbow lines (better half to the left, worse half to the right) below it.
    """
    ranks = test.ranks.sort_values(kind="stable")
    k = max(len(ranks), 2)
    width = 6.0
    n_left = math.ceil(len(ranks) / 2)
    first_row = 0.25 + 0.16 * len(test.groups)
    depth = first_row + 0.28 * (n_left - 1) + 0.2
    fig = plt.figure(figsize=(width, depth + 0.8))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(1, k)
    ax.set_ylim(depth, -0.8)
    ax.set_axis_off()
    ax.hlines(0, 1, k, color="black", lw=1)
    for r in range(1, k + 1):
        ax.vlines(r, -0.07, 0, color="black", lw=1)
        ax.text(r, -0.1, str(r), ha="center", va="bottom", fontsize=10)
    cd = test.critical_difference
    ax.hlines(-0.55, 1, 1 + cd, color="black", lw=1.5)
    ax.vlines([1, 1 + cd], -0.6, -0.5, color="black", lw=1.5)
    ax.text(1 + cd / 2, -0.62, f"CD = {cd:.2f}", ha="center", va="bottom", fontsize=9)
    for g, group in enumerate(test.groups):
        ax.hlines(0.12 + 0.16 * g, ranks[group[0]] - 0.03, ranks[group[-1]] + 0.03, color="black", lw=3.5)
    pad = 0.2 * (k - 1) / width  # 0.2 inch in rank units
    for i, (optimizer, rank) in enumerate(ranks.items()):
        left = i < n_left
        row = first_row + 0.28 * (i if left else len(ranks) - 1 - i)
        edge = 1 - pad if left else k + pad
        ax.plot([rank, rank, edge], [0, row, row], color="black", lw=0.9, clip_on=False)
        ax.text(edge + (-pad if left else pad) / 3, row, f"{optimizer} ({rank:.2f})",
                ha="right" if left else "left", va="center", fontsize=10, clip_on=False)
    return _render(fig, name, title, caption)


def unit_position(values: pd.Series, hp) -> tuple[pd.Series, list[tuple[float, str]]]:
    """Values of one design-space parameter mapped to [0, 1] on its own scale, and axis annotations
    (position, text): the bounds, or each level with how many values take it.

    Numeric: linear or logarithmic between its bounds (parameters named ``log_*`` are labelled with
    exp of the bounds); categorical: its levels evenly spaced. ``hp`` None: the data's own range.
    """
    categorical = hasattr(hp, "choices") if hp is not None else not pd.api.types.is_numeric_dtype(values)
    if categorical:
        levels = [str(c) for c in hp.choices] if hp is not None else sorted(values.dropna().astype(str).unique())
        where = {level: i / max(len(levels) - 1, 1) for i, level in enumerate(levels)}
        counts = values.dropna().astype(str).value_counts()
        return (values.map(lambda v: where.get(str(v), np.nan)),
                [(p, f"{level} ({counts.get(level, 0)})") for level, p in where.items()])
    numeric = pd.to_numeric(values, errors="coerce")
    lower, upper = (float(hp.lower), float(hp.upper)) if hp is not None else (numeric.min(), numeric.max())
    if hp is not None and hp.log:
        position = (np.log(numeric) - math.log(lower)) / (math.log(upper) - math.log(lower))
    else:
        position = (numeric - lower) / ((upper - lower) or 1.0)
    show = np.exp if hp is not None and hp.name.startswith("log_") else (lambda v: v)
    return position, [(0.0, f"{show(lower):.4g}"), (1.0, f"{show(upper):.4g}")]


def beeswarm(configs: pd.DataFrame, highlight: dict, space, caption: str) -> Figure:
    """Paper 004 Fig. 1: the top meta-archive configurations, one row per parameter, each on [0, 1]
    of its own range (log parameters on a log scale); the large red diamond is γ*.

    ``configs``: one row per configuration, one column per parameter of ``space`` (NaN where inactive);
    ``space``: the design space giving each parameter's range. Points sharing a categorical level
    are spread a little sideways so that the swarm fits its row.
    """
    _theme()
    rows, notes, labels = [], {}, []
    for param in configs.columns:
        hp = space[param]
        position, note = unit_position(configs[param], hp)
        if hasattr(hp, "choices"):
            order = position.groupby(position).cumcount() / position.groupby(position).transform("size")
            position = position + 0.05 * (order - 0.5)
        rows.append(pd.DataFrame({"parameter": param, "position": position}).dropna())
        notes[param] = (note, unit_position(pd.Series([highlight.get(param)]), hp)[0].iloc[0])
        name = param.removeprefix("log_")
        labels.append(name + (" (log)" if getattr(hp, "log", False) or name != param else ""))
    long = pd.concat(rows, ignore_index=True)
    params = list(configs.columns)
    fig, ax = plt.subplots(figsize=(9.5, 0.8 + 0.6 * len(params)))
    sns.swarmplot(data=long, x="position", y="parameter", order=params, size=3.0, color="#4c72b0", ax=ax)
    for y, param in enumerate(params):
        note, star = notes[param]
        for position, text in note:
            ax.text(position, y - 0.3, text, ha="center", va="bottom", fontsize=7, color="0.3")
        if not pd.isna(star):
            ax.scatter([star], [y], marker="D", s=70, color="#c44e52", edgecolor="white", zorder=5)
    ax.set_yticks(range(len(params)), labels)
    ax.set_xlim(-0.08, 1.08)
    ax.set_xlabel("position within the parameter's range (log scale for (log) parameters)")
    ax.set_ylabel("")
    if highlight:
        marker = plt.Line2D([], [], marker="D", ls="", ms=8, color="#c44e52", label="γ*")
        ax.legend(handles=[marker], loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.tight_layout()
    return _render(fig, "beeswarm", "Top configurations of the meta-archive", caption)


def _log_x_axis(ax) -> None:
    """A log x axis labelled at 1, 2 and 5 of each decade in plain numbers, minor ticks unlabelled
    (matplotlib's default labels minor ticks of short ranges too, and they overlap)."""
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda value, _: f"{value:g}"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())


def cost_accuracy(points: pd.DataFrame, palette: dict, caption: str) -> Figure:
    """Relative cost spent vs final regret per optimizer (± 1 s.e. over instances both ways), log cost axis.

    ``points``: columns optimizer, cost, cost_se, regret, regret_se.
    """
    _theme()
    fig, ax = plt.subplots(figsize=(8.5, 5.0))
    for row in points.sort_values("regret").itertuples():
        ax.errorbar(row.cost, row.regret, xerr=row.cost_se, yerr=row.regret_se, fmt="o", ms=7, capsize=3,
                    color=palette.get(row.optimizer, "0.5"), label=row.optimizer)
    _log_x_axis(ax)
    ax.set_xlabel("cost spent per run (relative to the instance's median run)")
    ax.set_ylabel("final normalized regret")
    ax.legend(title="optimizer (best first)", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False,
              fontsize=9)
    fig.tight_layout()
    return _render(fig, "cost_accuracy", "Cost versus accuracy", caption)


STOPPING_THRESHOLDS = {"regret_bound": "stop_regret_epsilon", "conv": "stop_conv_patience",
                       "ei_threshold": "stop_ei_threshold", "pi_threshold": "stop_pi_threshold"}
"""Stopping rule -> the parameter that sets how early it stops (paper 002's thresholds)."""


def termination_frontier(table: pd.DataFrame, rules: dict[str, tuple[str, float | None]], caption: str) -> Figure:
    """RYC against RTC per optimizer (± 1 s.e. both ways), one colour and line per stopping rule
    through its thresholds (paper 002, Fig. 3-5): up and to the right is better.

    ``table``: columns optimizer, ryc, ryc_se, rtc, rtc_se; ``rules``: optimizer -> (stopping rule,
    its threshold or None).
    """
    _theme()
    fig, ax = plt.subplots(figsize=(8.5, 5.0))
    colours = dict(zip(sorted({rule for rule, _ in rules.values()}), sns.color_palette("tab10", 10)))
    for rule, colour in colours.items():
        points = table[table["optimizer"].map(lambda name, rule=rule: rules.get(name, ("", None))[0] == rule)]
        points = points.assign(threshold=points["optimizer"].map(lambda name: rules[name][1])).sort_values("rtc")
        ax.plot(points["rtc"], points["ryc"], "-", color=colour, alpha=0.6)
        ax.errorbar(points["rtc"], points["ryc"], xerr=points["rtc_se"], yerr=points["ryc_se"], fmt="o", ms=6,
                    capsize=3, color=colour, label=rule)
        for row in points.itertuples():
            if row.threshold is not None:
                ax.annotate(f"{row.threshold:g}", (row.rtc, row.ryc), textcoords="offset points", xytext=(5, 4),
                            fontsize=8, color=colour)
    ax.axhline(0, color="black", lw=0.8)
    ax.set_xlabel("RTC: share of the full run's cost saved")
    ax.set_ylabel("RYC: relative change of the final loss")
    ax.legend(title="stopping rule (labels: threshold)", loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False, fontsize=9)
    fig.tight_layout()
    return _render(fig, "termination_frontier", "Automatic termination: RYC against RTC per threshold", caption)


def termination_bars(table: pd.DataFrame, palette: dict, caption: str) -> Figure:
    """RYC and RTC (paper 002, Eq. 11-12) per optimizer: mean ± 1 s.e.

    ``table``: columns optimizer, ryc, ryc_se, rtc, rtc_se (one row per optimizer).
    """
    _theme()
    table = table.sort_values("optimizer")
    colours = [palette.get(name, "0.5") for name in table["optimizer"]]
    fig, axes = plt.subplots(1, 2, figsize=(10, 0.9 + 0.45 * len(table)), sharey=True)
    for ax, metric, label in [(axes[0], "ryc", "RYC: relative change of the final loss"),
                              (axes[1], "rtc", "RTC: share of the full run's cost saved")]:
        ax.barh(table["optimizer"], table[metric], xerr=table[f"{metric}_se"], color=colours, capsize=3)
        ax.axvline(0, color="black", lw=0.8)
        ax.set_xlabel(label)
    axes[0].invert_yaxis()
    fig.tight_layout()
    return _render(fig, "termination", "Automatic termination: RYC and RTC", caption)


def search_progress(curves: pd.DataFrame, bands: pd.DataFrame, caption: str) -> Figure:
    """The meta-level picture: best mean objective on the training instances so far against meta-trials
    (left) and CPU-hours (right), one line per search and meta-seed (colour: the search), with each
    noise band (a design's mean objective ± 1 s.d. over re-run seeds) as a shaded horizontal band.

    ``curves``: columns search, meta_seed, trial, cpu_hours, best (:mod:`metaopt.analysis.search_curves`);
    ``bands``: columns design, mean, std, count (may be empty).
    """
    _theme()
    searches = list(dict.fromkeys(curves["search"]))
    colours = dict(zip(searches, sns.color_palette("deep", len(searches))))
    band_colours = sns.color_palette("muted", 8)[3:]
    fig, axes = plt.subplots(1, 2, figsize=(14.0, 4.8), sharey=True)
    for ax, x, label in ((axes[0], "trial", "meta-trials (inner runs)"), (axes[1], "cpu_hours", "CPU-hours")):
        for (search, _), data in curves.groupby(["search", "meta_seed"], sort=False):
            ax.step(data[x], data["best"], where="post", color=colours[search], alpha=0.85, lw=1.6)
        for k, band in enumerate(bands.itertuples(index=False)):
            std = 0.0 if pd.isna(band.std) else band.std
            ax.axhspan(band.mean - std, band.mean + std, color=band_colours[k % len(band_colours)], alpha=0.25)
            ax.axhline(band.mean, color=band_colours[k % len(band_colours)], lw=1.0, ls="--")
        _log_x_axis(ax)
        ax.set_xlabel(label)
    axes[0].set_ylabel("best mean objective on the training instances")
    handles: list[Any] = [plt.Line2D([], [], color=colours[s], lw=2, label=s) for s in searches]
    handles += [Patch(color=band_colours[k % len(band_colours)], alpha=0.4,
                                         label=f"{band.design}: ± 1 s.d. over {band.count} seeds")
                for k, band in enumerate(bands.itertuples(index=False))]
    axes[1].legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=9)
    fig.tight_layout()
    return _render(fig, "search_progress", "The search at the meta level", caption)
