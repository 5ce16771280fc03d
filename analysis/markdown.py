"""Markdown tables for the stores' ``*.md`` files and the report."""

from __future__ import annotations

import numpy as np
import pandas as pd


def markdown_table(df: pd.DataFrame) -> str:
    """``df`` as a GitHub Markdown table, floats with 3 significant digits (pandas' to_markdown needs
    the extra package tabulate for the same)."""
    def fmt(v: object) -> str:
        return f"{v:.3g}" if isinstance(v, (float, np.floating)) else str(v)

    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)
