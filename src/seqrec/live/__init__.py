"""Live recommendations: an event store (:mod:`seqrec.live.store`, SQLite or Redis) and
per-user incremental encoder states (:mod:`seqrec.live.session`) behind ``POST /events``,
``seqrec recommend --events`` and ``run.session()``."""
