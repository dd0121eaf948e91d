"""The CLI imports only the module of the command it runs: the table naming each command's module must match what
the modules register, and running a command must leave the other modules (and their heavy imports) unloaded."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest

from odradek.client.cli.main import COMMANDS, build_parser, command_modules


def test_the_table_names_exactly_the_commands_each_module_registers() -> None:
    registered: dict[str, str] = {}
    for module in command_modules(["--help"]):
        sub = argparse.ArgumentParser().add_subparsers()
        module.register(sub)
        for name in sub.choices:
            registered[name] = module.__name__.rsplit(".", 1)[1]
    assert registered == COMMANDS


def test_a_command_word_picks_its_module_and_anything_else_all_of_them() -> None:
    assert [m.__name__ for m in command_modules(["--debug", "produce", "t"])] == ["odradek.client.cli.data"]
    everything = len(set(COMMANDS.values()))
    assert len(command_modules([])) == len(command_modules(["--version", "--help"])) == everything
    assert command_modules(["--version"]) == command_modules(["--debug", "--version"]) == []  # the version alone
    assert len(command_modules(["no-such-command"])) == everything


def test_an_unknown_command_is_refused_with_every_choice_listed(capsys) -> None:
    parser = build_parser(["frobnicate"])
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["frobnicate"])
    assert exited.value.code == 2
    message = capsys.readouterr().err
    assert "invalid choice: 'frobnicate'" in message and "'topic'" in message and "'demo'" in message


def test_running_a_command_loads_neither_other_commands_nor_scram_nor_x509() -> None:
    probe = (
        "import json, sys\n"
        "from odradek.client.cli.main import build_parser\n"
        "build_parser(['topic', 'list']).parse_args(['topic', 'list'])\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith(('odradek.client.cli.', 'scramp', "
        "'cryptography', 'odradek.chaos', 'odradek.deploy')))))\n"
    )
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = json.loads(run.stdout)
    assert "odradek.client.cli.topic" in loaded
    assert not [m for m in loaded if m.startswith(("odradek.client.cli.chaos", "odradek.client.cli.deploy"))]
    assert not [m for m in loaded if m.startswith(("scramp", "cryptography", "odradek.chaos", "odradek.deploy"))]
