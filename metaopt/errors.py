"""Error types that the CLI turns into one clear line and a non-zero exit status."""


class UsageError(Exception):
    """Bad input from a user: a study file, a CLI argument, a configuration, a data path.

    The message names the offending field and what is allowed. The CLI prints it on one line and
    exits with status 2.
    """


class DataError(UsageError):
    """A data directory that is missing or incomplete."""
