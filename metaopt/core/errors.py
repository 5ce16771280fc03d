"""Error types that the CLI turns into one clear line and a non-zero exit status."""


class UsageError(ValueError):
    """Bad input from a user: a study file, a CLI argument, a configuration, a data path, an argument
    of the Python API (``metaopt.minimize``, ask/tell).

    The message names the offending field and what is allowed. The CLI prints it on one line and
    exits with status 2. A ``ValueError``, so that Python callers can catch it as one.
    """


class DataError(UsageError):
    """A data directory that is missing or incomplete."""


class NoSuccessfulEvaluation(RuntimeError):
    """``metaopt.minimize`` ended without one successful evaluation (every evaluation failed, or
    the budget held none): there is no best configuration to return. The message says why."""
