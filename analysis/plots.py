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
