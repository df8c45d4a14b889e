"""Test-wide settings: keep the dataset parse cache out of the user's home directory."""

import os
import tempfile

# set before any seqrec module reads it; one private cache per test session
os.environ.setdefault("SEQREC_CACHE_DIR", tempfile.mkdtemp(prefix="seqrec-test-cache-"))
