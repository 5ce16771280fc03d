"""Atomic file writes: a temporary file in the same directory, then an atomic rename."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one, never a part."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_json_file(path: str | Path, field: str) -> Any:
    """The JSON content of ``path``; a missing or malformed file is a UsageError naming ``field``."""
    import json

    from metaopt.errors import UsageError

    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise UsageError(f"{field}: file not found: {path}") from None
    except json.JSONDecodeError as err:
        raise UsageError(f"{field}: {path} is not valid JSON ({err.msg})") from None
