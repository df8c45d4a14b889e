"""``python -m seqrec`` (and ``torchrun ... -m seqrec train``): the ``seqrec`` command."""

import sys

from seqrec.cli.main import main

sys.exit(main())
