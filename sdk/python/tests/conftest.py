"""Test setup: the SDK and the Python example from the working tree, and a
stand-in for the bindings componentize-py generates, so the export glue
runs natively."""

import sys
import types
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "sdk" / "python"))
sys.path.insert(0, str(ROOT / "policies" / "example-python"))


def stand_in_bindings() -> types.SimpleNamespace:
    """The shapes of `wit_world.exports.declare` and of
    `componentize_py_types.Err`, as componentize-py 0.25.1 generates them
    for wit/declaration."""

    class Ensure(Enum):
        RUNNING = 0
        STOPPED = 1

    @dataclass
    class Service:
        name: str
        ensure: Ensure
        enable: bool | None
        subscribe: list[str]

    @dataclass
    class LeftOut:
        name: str
        why: str

    @dataclass
    class Declaration:
        services: list[Service]
        left_out: list[LeftOut]

    @dataclass
    class Fact:
        name: str
        value: str

    @dataclass(frozen=True)
    class Err(Exception):
        value: str

    return types.SimpleNamespace(
        Ensure=Ensure,
        Service=Service,
        LeftOut=LeftOut,
        Declaration=Declaration,
        Fact=Fact,
        Err=Err,
    )


@pytest.fixture
def wit():
    """The stand-in bindings' types."""
    return stand_in_bindings()


@pytest.fixture
def bindings(monkeypatch, wit):
    """The stand-in installed as the modules `declare` imports, as they are
    inside a componentize-py build; returns its types."""
    declare = types.ModuleType("wit_world.exports.declare")
    declare.__dict__.update(vars(wit))
    exports = types.ModuleType("wit_world.exports")
    exports.declare = declare
    world = types.ModuleType("wit_world")
    world.exports = exports
    runtime_types = types.ModuleType("componentize_py_types")
    runtime_types.Err = wit.Err
    for name, module in [
        ("wit_world", world),
        ("wit_world.exports", exports),
        ("wit_world.exports.declare", declare),
        ("componentize_py_types", runtime_types),
    ]:
        monkeypatch.setitem(sys.modules, name, module)
    return wit
