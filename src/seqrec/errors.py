"""Typed errors. Every error a user can trigger is a :class:`SeqRecError` with a one-line message
that says what was received and what is allowed."""

import difflib


def did_you_mean(word: str, choices) -> str:
    """' (did you mean 'x'?)' for the closest choice (case ignored), '' when none is close."""
    by_lower = {str(c).lower(): str(c) for c in choices}
    close = difflib.get_close_matches(str(word).lower(), list(by_lower), n=1, cutoff=0.6)
    return f" (did you mean {by_lower[close[0]]!r}?)" if close else ""


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
