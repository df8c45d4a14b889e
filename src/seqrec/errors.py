"""Typed errors. Every error a user can trigger is a :class:`SeqRecError` with a one-line message
that says what was received and what is allowed."""


class SeqRecError(Exception):
    """Base class of every error seqrec raises on purpose."""


class ConfigError(SeqRecError, ValueError):
    """A configuration value or key is invalid."""


class DataError(SeqRecError, ValueError):
    """Input data is malformed (missing column, bad ids, empty table, unreadable file)."""


class DataUnavailable(DataError):
    """A named dataset's files are not on this machine (not downloaded, not copied there)."""


class NotFittedError(SeqRecError, RuntimeError):
    """A model was used before ``fit`` (or ``load``)."""


class UnknownNameError(ConfigError, KeyError):
    """An unknown dataset, model, metric or option name."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""
