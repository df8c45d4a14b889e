"""One process per run directory: an ``flock`` held for the run's lifetime.

An ``flock`` on an open file, not a pid file: the kernel drops it when its holder exits in any
way (``kill -9`` included), so it can never go stale; the file itself stays, harmless.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import IO

from seqrec.errors import SeqRecError

_TRIES = 5  # 0.1 s apart: a probe (is_locked) holds the lock for microseconds


class RunBusy(SeqRecError):
    """Another process is working in this run directory now."""


def lock_dir(directory: Path, name: str, busy: str) -> IO[str]:
    """Hold ``directory/name`` exclusively (keep the returned file open), or raise ``RunBusy``
    with the message ``busy``."""
    import fcntl

    fh = open(Path(directory) / name, "w")  # noqa: SIM115 - held for the run's lifetime
    for attempt in range(_TRIES):
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fh
        except OSError:
            if attempt + 1 < _TRIES:
                time.sleep(0.1)
    fh.close()
    raise RunBusy(busy)


def is_locked(directory: Path, name: str) -> bool:
    """Whether another process holds ``directory/name`` now. The probe takes the lock for an
    instant; ``lock_dir`` retries, so a run starting then is not refused."""
    import fcntl

    path = Path(directory) / name
    if not path.exists():
        return False
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(fh, fcntl.LOCK_UN)
    return False
