"""Keep freed memory in the process for reuse instead of handing it back to the OS (glibc).

glibc's ``malloc`` serves a large request (above a threshold that starts at 128 KiB and rises
on its own up to 32 MiB) with fresh pages from ``mmap``, returns them with ``munmap`` when the
block is freed, and trims the top of its heap once more than twice that threshold lies free
there. Each page handed out again costs a minor page fault (the kernel zeroes 4 KiB). Training
allocates the same shapes every step and soon reuses its heap; full-ranking evaluation does
not: its batches change shape with the histories' lengths, so its largest transients (HSTU's
``[B, H, L, L]`` attention terms, LRURec's ``[B, L, 2N]`` states, the score matrices) are
returned and faulted in again, batch after batch.

:func:`retain_freed_memory` fixes both thresholds (``mallopt``): blocks up to
``MMAP_THRESHOLD`` come from the heap, and up to ``TRIM_THRESHOLD`` of free heap top is kept.
The price is a resident size that stays near the process's peak rather than falling back
between batches; larger blocks still come from and go back to ``mmap``. The figures are in
``docs/decisions/retain-freed-memory.md``.

Process-wide, so applied where seqrec owns the process: the ``seqrec`` command (training,
evaluation, the reproduction harness, the server) calls it first. A program that imports seqrec
as a library may call it itself. ``SEQREC_MALLOC=system`` leaves the allocator as it is;
elsewhere than glibc (macOS, Windows, musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform

log = logging.getLogger(__name__)

MMAP_THRESHOLD = 32 << 20
"""Requests above this go to ``mmap`` (glibc's largest allowed value on 64-bit systems)."""
TRIM_THRESHOLD = 256 << 20
"""Free heap top kept before the heap is trimmed: room for an evaluation batch's transients."""

# mallopt's parameter numbers (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

_applied: bool | None = None


def _left_alone() -> str | None:
    """Why the allocator is not to be touched here (a ``describe`` line), or None."""
    if os.environ.get("SEQREC_MALLOC", "").strip().lower() == "system":
        return "the C library's defaults (SEQREC_MALLOC=system)"
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return "the C library's defaults (not glibc: nothing to set)"
    return None


def retain_freed_memory() -> bool:
    """Fix glibc's mmap and trim thresholds for this process (once); True where glibc took
    both settings, False where it did nothing (another C library, ``SEQREC_MALLOC=system``,
    or glibc refused a value)."""
    global _applied
    if _applied is not None:
        return _applied
    _applied = False
    if _left_alone() is not None:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    ok = mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and ok
    if not ok:
        log.warning("glibc refused the malloc thresholds; the allocator keeps its defaults")
    _applied = ok
    return ok


def describe() -> str:
    """One line on the allocator setting of this process (``seqrec doctor``)."""
    if _applied:
        return (
            f"freed memory kept for reuse (glibc: mmap threshold {MMAP_THRESHOLD >> 20} MiB, "
            f"trim threshold {TRIM_THRESHOLD >> 20} MiB; SEQREC_MALLOC=system turns it off)"
        )
    reason = _left_alone()
    if reason is not None:
        return reason
    if _applied is False:
        return "glibc's defaults (glibc refused the thresholds)"
    return "glibc's defaults (retain_freed_memory() not called in this process)"
