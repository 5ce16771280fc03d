"""Bar charts of parameter importance with error bars (std over trees), seaborn, rendered off-screen."""

from __future__ import annotations


from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from metaopt.analysis.plots import save_with_caption  # noqa: E402

TOP = 15
"""Bars per panel: the most important parameters (or pairs)."""


def _bars(ax: plt.Axes, table: pd.DataFrame, title: str) -> None:
    top = table.nlargest(TOP, "importance")
    sns.barplot(data=top, x="importance", y="parameter", orient="h", color=sns.color_palette()[0], errorbar=None,
                ax=ax)
    ax.errorbar(top["importance"], range(len(top)), xerr=top["std"], fmt="none", ecolor="black", capsize=3, lw=1)
    ax.set_xlim(left=0)
    ax.set_xlabel("fraction of variance (mean ± std over trees)")
    ax.set_ylabel("")
    ax.set_title(title)


def plot_fanova(table: pd.DataFrame, path: Path, title: str) -> None:
    """Main effects (and pair effects, when the table has them) from a ``fanova.csv`` table."""
    sns.set_theme(style="whitegrid", context="notebook")
    panels = [(kind, table[table["kind"] == kind]) for kind in ("main", "pair")]
    panels = [(kind, part) for kind, part in panels if len(part)]
    height = max(3.0, 0.32 * max(min(len(part), TOP) for _, part in panels) + 1.5)
    fig, axes = plt.subplots(1, len(panels), figsize=(7.0 * len(panels), height), squeeze=False)
    for ax, (kind, part) in zip(axes[0], panels):
        _bars(ax, part, "main effects" if kind == "main" else "pairwise interactions")
    fig.suptitle(title)
    save_with_caption(fig, path, None)


def plot_local(table: pd.DataFrame, path: Path, title: str) -> None:
    """Local parameter importance from a ``local.csv`` table."""
    sns.set_theme(style="whitegrid", context="notebook")
    fig, ax = plt.subplots(figsize=(7.5, max(3.0, 0.32 * min(len(table), TOP) + 1.5)))
    if len(table):
        _bars(ax, table, title)
        ax.set_xlabel("share of the local variance (mean ± std over trees)")
    else:
        ax.set_title(title)
        ax.text(0.5, 0.5, "no parameter is active in γ*", ha="center", va="center", transform=ax.transAxes)
    save_with_caption(fig, path, None)
