"""seqrec.allocator: freed memory is reused, not faulted in again (glibc), and the opt-out."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

glibc = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="glibc only"
)

# an evaluation-like pattern: a few large transients at once, all freed, again and again
PROBE = """
import json, resource
import numpy as np
from seqrec.allocator import describe, retain_freed_memory

def faults():
    start = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(20):
        blocks = [np.ones(2 << 20, dtype=np.float32) for _ in range(4)]  # 4 x 8 MiB
        del blocks
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - start

said_before = describe()
before = faults()
applied = retain_freed_memory()
faults()  # the heap grows once
print(json.dumps({"before": before, "applied": applied, "after": faults(),
                  "again": retain_freed_memory(), "said_before": said_before,
                  "said": describe()}))
"""


def _probe(**env: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


@glibc
def test_freed_blocks_are_reused_without_page_faults():
    res = _probe(SEQREC_MALLOC="")
    assert res["applied"] and res["again"]
    assert res["said_before"].startswith("glibc's defaults")
    assert res["said"].startswith("freed memory kept for reuse")
    # by default the heap top is trimmed after every round and faulted in again, page by page
    assert res["before"] > 20 * 1000
    assert res["after"] < res["before"] / 20


@glibc
def test_system_allocator_on_request():
    res = _probe(SEQREC_MALLOC="system")
    assert not res["applied"]
    assert res["said"] == "the C library's defaults (SEQREC_MALLOC=system)"
    assert res["after"] > res["before"] / 2  # unchanged: the pages are faulted in every round
