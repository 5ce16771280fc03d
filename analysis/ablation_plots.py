"""Ablation figures (rendered off-screen): the greedy path, and one-factor / leave-one-out bars.

Input: a table of ``metaopt.stages.ablation.ablation_table`` (columns step, label, mean, se, share, ...).
"""

from __future__ import annotations


from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from metaopt.analysis.plots import save_with_caption  # noqa: E402


def plot_ablation(table: pd.DataFrame, path: Path, variant: str, title: str, caption: str) -> None:
    """``path``: performance along the path with error bars, one tick per step labelled with its
    parameter(s) and share; ``ofat``/``loco``: one bar per change, with the two endpoints as lines."""
    sns.set_theme(style="whitegrid", context="notebook")
    n = len(table)
    if variant == "path":
        fig, ax = plt.subplots(figsize=(max(7.0, 0.7 * n + 3), 5.5))
        x = np.arange(n)
        ax.errorbar(x, table["mean"], yerr=table["se"].fillna(0), marker="o", capsize=3, color="C0")
        ax.set_xticks(x, [lbl if k == 0 else f"{lbl}\n{share:+.0%}" if pd.notna(share) else lbl
                          for k, (lbl, share) in enumerate(zip(table["label"], table["share"]))],
                      rotation=40, ha="right", fontsize=8)
        ax.set_xlabel("ablation step (parameter flipped; share of the total improvement)")
        ax.set_ylabel("mean normalized regret")
    else:
        middle = table.iloc[1:-1]
        fig, ax = plt.subplots(figsize=(8.5, max(3.5, 0.4 * len(middle) + 2)))
        y = np.arange(len(middle))
        ax.barh(y, middle["mean"], xerr=middle["se"].fillna(0), color="C0", alpha=0.8, capsize=3)
        ax.set_yticks(y, [f"{lbl} ({share:+.0%})" if pd.notna(share) else lbl
                          for lbl, share in zip(middle["label"], middle["share"])], fontsize=8)
        ax.invert_yaxis()
        for row, color in ((table.iloc[0], "C2"), (table.iloc[-1], "C3")):
            ax.axvline(row["mean"], color=color, linestyle="--", label=f"{row['label']}: {row['mean']:.3f}")
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
        ax.set_xlabel("mean normalized regret")
    ax.set_title(title, fontsize=11)
    save_with_caption(fig, path, caption)
