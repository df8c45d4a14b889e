"""When a peer worker should stop after the epoch it just finished (imported by the
``peer_<library>.py`` workers, which run with their peer's interpreter: standard library only).

The harness passes a ``deadline`` (Unix seconds: its time budget) and, when it is asked to stop
(a signal), writes a ``STOP`` file into the run directory. A SIGINT / SIGTERM sent to the worker
itself (Ctrl-C reaches the whole process group) is caught here, so that it too ends the epoch
and saves it instead of killing the worker mid-epoch; a second one kills it as usual. (In
RecTools' worker Lightning adds its own SIGTERM handler, which ends training after the current
batch without saving it: there a SIGTERM to the worker itself loses the epoch in progress; the
stop file and SIGINT do not.)
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

STOP_FILE = "STOP"  # seqrec_lab.peers.STOP_FILE
_signals: list[int] = []


def _on_signal(signum, frame) -> None:
    if _signals:  # a second signal: the default behaviour
        signal.signal(signum, signal.SIG_DFL)
        signal.raise_signal(signum)
    _signals.append(signum)


def install() -> None:
    """Catch SIGINT / SIGTERM: the first one only asks for a stop after the current epoch."""
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _on_signal)


def reason(run_dir: Path, deadline: float | None) -> str | None:
    """``"interrupted"`` (a signal or the harness's stop file), ``"deadline"``, or None."""
    if _signals or (Path(run_dir) / STOP_FILE).exists():
        return "interrupted"
    if deadline and time.time() >= deadline:
        return "deadline"
    return None
