"""Commands of other packages (entry point group ``seqrec.commands``): how ``seqrec reproduce``
reaches the CLI without the library importing the research layer."""

from __future__ import annotations

import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from seqrec.cli import plugins
from seqrec.cli.main import main

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


class Hello:
    help = "say hello"

    @staticmethod
    def add_arguments(parser):
        parser.add_argument("name")

    @staticmethod
    def run(args) -> int:
        print(f"hello {args.name}")
        return 7


def _entry_points(monkeypatch, *eps: EntryPoint) -> None:
    import importlib.metadata

    monkeypatch.setattr(
        importlib.metadata,
        "entry_points",
        lambda group=None: [ep for ep in eps if ep.group == group],
    )


def test_an_entry_point_becomes_a_command(monkeypatch, capsys):
    monkeypatch.setattr(sys.modules[__name__], "HELLO", Hello(), raising=False)
    _entry_points(monkeypatch, EntryPoint("hello", f"{__name__}:HELLO", plugins.GROUP))
    assert main(["hello", "world"]) == 7
    assert capsys.readouterr().out == "hello world\n"


def test_a_broken_or_shadowing_plugin_is_left_out_and_the_cli_still_works(
    monkeypatch, capsys, caplog
):
    _entry_points(
        monkeypatch,
        EntryPoint("broken", "no_such_module_anywhere:COMMAND", plugins.GROUP),
        EntryPoint("half", "seqrec.cli.plugins:GROUP", plugins.GROUP),  # a str: no run()
        EntryPoint("train", f"{__name__}:Hello", plugins.GROUP),
    )
    assert plugins.discover().keys() == {"train"}
    assert "could not be loaded" in caplog.text and "lacks help" in caplog.text
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "broken" not in out and "half" not in out
    assert "shadows a built-in" in caplog.text  # `seqrec train` stays the library's


def test_reproduce_without_its_entry_point_says_to_reinstall(monkeypatch, capsys):
    _entry_points(monkeypatch)
    with pytest.raises(SystemExit) as exit_:
        main(["reproduce", "sasrec"])
    assert exit_.value.code == 2
    assert "reinstall seqrec" in capsys.readouterr().err


def test_the_distribution_declares_reproduce_and_it_loads():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"]
    (value,) = declared[plugins.GROUP].values()
    assert declared[plugins.GROUP] == {"reproduce": "seqrec_lab.cli:COMMAND"}
    command = EntryPoint("reproduce", value, plugins.GROUP).load()
    assert callable(command.run) and callable(command.add_arguments) and command.help


def test_the_installed_metadata_has_the_reproduce_command():
    """Fails in an editable install made before the entry point was declared: reinstall it
    (pip install -e .; scripts/bootstrap.sh does when the command is missing)."""
    assert "reproduce" in plugins.discover()


def test_the_peer_workers_ship_inside_the_research_package():
    import seqrec_lab
    from seqrec_lab import peers

    folder = peers.worker_dir()
    assert folder.parent == Path(seqrec_lab.__file__).resolve().parent
    for library in peers.PEERS:
        assert (folder / f"peer_{library}.py").is_file()
    assert (folder / "peer_stop.py").is_file() and (folder / "__init__.py").is_file()
