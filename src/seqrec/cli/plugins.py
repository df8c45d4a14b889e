"""Commands that other packages add to ``seqrec``: entry points of group ``seqrec.commands``.

An entry point's name is the command (``seqrec <name>``); it points to an object with

- ``help``: the one-line summary shown by ``seqrec --help``,
- ``add_arguments(parser)``: the command's arguments on its ``argparse`` sub-parser,
- ``run(args) -> int``: the command itself (its exit code; a ``SeqRecError`` it raises is
  printed as one line like any command's).

The library finds them through package metadata only, never by importing a package by name:
this is how the research layer (``seqrec reproduce``, declared in ``pyproject.toml``) reaches
the CLI while the library does not depend on it. An entry point appears once the distribution
is (re)installed: an editable install made before a new entry point was declared does not see it.
"""

from __future__ import annotations

import logging
from typing import Any

GROUP = "seqrec.commands"
log = logging.getLogger(__name__)


def discover() -> dict[str, Any]:
    """Command name -> command object of every installed ``seqrec.commands`` entry point; one
    that fails to load is left out with a warning (a broken plugin must not break ``seqrec``)."""
    from importlib.metadata import entry_points

    found: dict[str, Any] = {}
    for ep in entry_points(group=GROUP):
        if ep.name in found:
            continue
        try:
            command = ep.load()
        except Exception as exc:  # noqa: BLE001 - any failure of a third-party import
            log.warning(
                "seqrec command %r (%s) could not be loaded: %s: %s",
                ep.name,
                ep.value,
                type(exc).__name__,
                exc,
            )
            continue
        if not all(hasattr(command, a) for a in ("help", "add_arguments", "run")):
            log.warning(
                "seqrec command %r (%s) lacks help / add_arguments / run: left out",
                ep.name,
                ep.value,
            )
            continue
        found[ep.name] = command
    return found


def add_commands(sub: Any) -> None:
    """Add every discovered command to ``sub`` (the CLI's sub-parsers); a name a built-in
    command already has is left to the built-in."""
    for name, command in sorted(discover().items()):
        if name in sub.choices:
            log.warning(
                "seqrec command %r from an entry point shadows a built-in one: left out", name
            )
            continue
        parser = sub.add_parser(name, help=command.help)
        command.add_arguments(parser)
        parser.set_defaults(plugin_command=command)
