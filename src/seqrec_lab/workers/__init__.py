"""Peer worker scripts: each ``peer_<library>.py`` is run by :func:`seqrec_lab.peers.run_worker`
as a script with the interpreter of that library's own virtual environment, where neither seqrec
nor seqrec_lab is importable (standard library, NumPy and the peer library only; ``peer_stop``
is imported from beside them). They ship inside the package so that an installed seqrec runs a
peer row; nothing imports them as modules."""
