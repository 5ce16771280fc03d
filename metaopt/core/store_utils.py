"""Store helpers: atomic file writes, file digests, and the lock that gives one process an output folder.

The lock (:func:`output_lock`) is ``fcntl.flock`` on the output folder itself (``<output>/.lock`` only
records the holder's pid): the kernel releases it when the holding process ends, however it ends
(also SIGKILL), so a crash never leaves a stale lock, and deleting a file does not break it.
Every command that writes into a study output folder takes it once, before writing anything.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

LOCK_NAME = ".lock"


def _new_file_mode() -> int:
    """The mode ``open()`` gives a new file: 0o666 less the process's umask (read once, at import)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_NEW_FILE_MODE = _new_file_mode()


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one, never a part."""
    _atomic_write(path, text, "w")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """:func:`atomic_write_text` for bytes (e.g. a compressed file)."""
    _atomic_write(path, data, "wb")


def _atomic_write(path: Path, content: str | bytes, mode: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, _NEW_FILE_MODE)  # mkstemp makes the file private (0o600); a store is shared like any file
        with os.fdopen(fd, mode) as fh:
            fh.write(content)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def file_digest(data: bytes) -> str:
    """The SHA-256 hex digest of ``data`` (e.g. a stored file's exact bytes)."""
    return hashlib.sha256(data).hexdigest()


@contextmanager
def output_lock(output: Path) -> Iterator[None]:
    """Hold the lock of the output folder ``output`` (created if missing) for the ``with`` block.

    Called once by each command that writes into a study output folder, before it writes. The lock is
    ``flock`` on the folder itself (a descriptor of the directory held open), so deleting a file in
    it (``.lock``, which only tells a waiting process the holder's pid) does not let a second process
    in. A second process asking for a held lock is refused at once: UsageError naming the holder's pid.
    Not reentrant: a process takes it once per folder. When the block fails in a folder this call
    created and nothing else was written there, the folder is removed again (nothing half-written).
    (Hand-written rather than the ``filelock`` package, which is not a dependency, locks a file that
    can be deleted, and does not say who holds a lock; this is a dozen lines of ``fcntl``.)
    """
    from metaopt.core.errors import UsageError

    output = Path(output)
    created = not output.exists()
    output.mkdir(parents=True, exist_ok=True)
    fd = os.open(output, os.O_RDONLY | os.O_DIRECTORY)
    pid_file = output / LOCK_NAME
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                holder = pid_file.read_text().strip() or "unknown"
            except OSError:
                holder = "unknown"
            raise UsageError(f"{output} is in use by another metaopt process (pid {holder}); "
                             "wait for it or use another output folder") from None
        pid_file.write_text(f"{os.getpid()}\n")
        yield
    except BaseException:
        if created and {p.name for p in output.iterdir()} <= {LOCK_NAME}:
            pid_file.unlink(missing_ok=True)
            output.rmdir()
        raise
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def read_text_file(path: str | Path, field: str, kind: str) -> str:
    """The text of ``path``, for the readers of user-given files (study files, JSON, JSONL).

    A missing, unreadable, non-UTF-8 file or a folder is a UsageError naming ``field``; ``kind``
    says what was expected there (e.g. "a JSON file").
    """
    from metaopt.core.errors import UsageError

    try:
        return Path(path).read_text()
    except FileNotFoundError:
        raise UsageError(f"{field}: file not found: {path}") from None
    except IsADirectoryError:
        raise UsageError(f"{field}: {path} is a folder; give {kind}") from None
    except UnicodeDecodeError:
        raise UsageError(f"{field}: {path} is not a UTF-8 text file; give {kind}") from None
    except PermissionError:
        raise UsageError(f"{field}: no permission to read {path}") from None


def read_json_file(path: str | Path, field: str) -> Any:
    """The JSON content of ``path``; a missing or malformed file is a UsageError naming ``field``."""
    import json

    from metaopt.core.errors import UsageError

    text = read_text_file(path, field, "a JSON file")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UsageError(f"{field}: {path} is not valid JSON ({err.msg})") from None


def check_writable(path: str | Path, field: str, folder: bool) -> None:
    """Called before work starts on a path the work will write: UsageError naming ``field`` unless
    ``path`` can be written as a folder (``folder``) or as a file.

    A folder must not be an existing file; a file must not be an existing folder; the nearest
    existing ancestor must be a writable folder (so that the path can be created).
    """
    from metaopt.core.errors import UsageError

    path = Path(path)
    try:
        os.stat(path)  # raises for a symlink loop, a too-long name, ...; FileNotFoundError for a new path
    except FileNotFoundError:
        if path.is_symlink():
            raise UsageError(f"{field}: {path} is a symbolic link to a missing {os.readlink(path)}") from None
    except OSError as err:
        raise UsageError(f"{field}: {describe_os_error(err, path)}") from None
    if folder and path.exists() and not path.is_dir():
        raise UsageError(f"{field}: {path} is an existing file; give a folder")
    if not folder and path.is_dir():
        raise UsageError(f"{field}: {path} is a folder; give a file name")
    ancestor = path if folder else path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{field}: cannot create {path}: {ancestor} is a file, not a folder")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"{field}: cannot create {path}: no permission to write in {ancestor}")
    if Path(os.path.realpath(ancestor)).parts[:2] in (("/", "proc"), ("/", "sys")):
        raise UsageError(f"{field}: {path} is in a kernel file system ({ancestor}); give a folder on a disk")


def describe_os_error(err: OSError, path: str | Path | None = None) -> str:
    """One line for a file-system error: the path (``err.filename`` unless ``path`` is given) and what is
    wrong (``strerror``), e.g. ``results/x/eval: Permission denied``; read by the CLI's last resort."""
    name = path if path is not None else err.filename
    what = err.strerror or type(err).__name__
    if name is None:
        return f"{what} (a file-system error: a full disk or a folder that cannot be written?)"
    other = f" -> {err.filename2}" if getattr(err, "filename2", None) else ""
    return f"{name}{other}: {what}"
