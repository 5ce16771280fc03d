"""Figures (seaborn, rendered off-screen)."""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from metaopt.core.store_utils import atomic_write_bytes  # noqa: E402


def plot_anytime(curves: pd.DataFrame, path: Path, title: str, caption: str) -> None:
    """Mean normalized regret vs budget (log x), one line per optimizer, s.e. band over instances.

    ``curves`` is the long table of :func:`metaopt.analysis.anytime.anytime_table`.
    """
    per_instance = curves.groupby(["optimizer", "instance", "budget"], as_index=False)["regret"].mean()
    sns.set_theme(style="whitegrid", context="notebook")
    names = sorted(per_instance["optimizer"].unique())
    # seaborn's default palette repeats after 10 colours; tab20 keeps up to 20 optimizers apart
    palette = dict(zip(names, sns.color_palette("tab10" if len(names) <= 10 else "tab20", len(names))))
    fig, ax = plt.subplots(figsize=(9.5, 5.0))
    sns.lineplot(data=per_instance, x="budget", y="regret", hue="optimizer", hue_order=names, palette=palette,
                 errorbar="se", ax=ax)
    ax.legend(title="optimizer", loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_xscale("log")
    ax.set_xlabel("budget spent (full-evaluation equivalents)")
    ax.set_ylabel("mean normalized regret")
    ax.set_title(title)
    save_with_caption(fig, path, caption, fontsize=8)


def save_with_caption(fig: plt.Figure, path: Path, caption: str | None, fontsize: int = 7) -> None:
    """Put ``caption`` (if any) under the figure and write it to ``path`` atomically (a reader never sees
    half a file)."""
    if caption:
        fig.text(0.01, 0.01, caption, fontsize=fontsize, ha="left", va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.06 if caption else 0, 1, 1))
    image = io.BytesIO()
    fig.savefig(image, dpi=120, format=path.suffix.lstrip(".") or None)
    plt.close(fig)
    atomic_write_bytes(path, image.getvalue())


def plot_fidelity_check(rows: pd.DataFrame, path: Path, caption: str | None = None) -> None:
    """``metaopt benchmark fidelity --plot``: the rank correlation of each rung's losses with the full
    fidelity's against the rung's budget share (log x), one line per benchmark (median over its instances,
    band from the lowest to the highest instance); ``rows`` has the columns benchmark, instance,
    budget_share and spearman (:class:`metaopt.core.benchmarks.fidelity_check.RungCheck` rows)."""
    sns.set_theme(style="whitegrid", context="notebook")
    names = list(dict.fromkeys(rows["benchmark"]))
    palette = dict(zip(names, sns.color_palette("tab10" if len(names) <= 10 else "tab20", len(names))))
    fig, ax = plt.subplots(figsize=(8.5, 4.8))
    for name in names:
        at = rows[rows["benchmark"] == name].groupby("rung").agg(
            share=("budget_share", "median"), median=("spearman", "median"), low=("spearman", "min"),
            high=("spearman", "max")).sort_values("share")
        ax.plot(at["share"], at["median"], marker="o", color=palette[name], label=name)
        ax.fill_between(at["share"], at["low"], at["high"], color=palette[name], alpha=0.12, linewidth=0)
    ax.axhline(0, color="0.5", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_ylim(-1.02, 1.02)
    ax.set_xlabel("rung's fidelity r / r_max (what one evaluation there spends of the budget)")
    ax.set_ylabel("Spearman ρ with the losses at r_max")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    save_with_caption(fig, path, caption, fontsize=8)
