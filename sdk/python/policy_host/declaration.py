"""What a policy declares: services in the state they should be in, and the
services it leaves out on this machine.

These types only hold the declaration. Whether a name is a valid unit, a
subscription a valid `type#name`, or a service declared twice is the
engine's to check (it checks a Rust policy's the same way), so that the
rules live in one place and cannot drift between languages. What is checked
here is only the Python type of each field, at construction, where a
mistake points at the author's line rather than at the engine's report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

RUNNING = "running"
"""The service should be running."""

STOPPED = "stopped"
"""The service should be stopped."""

_ENSURES = (RUNNING, STOPPED)


def _text(owner: str, field: str, value: object) -> None:
    """Raises ValueError naming `field` unless `value` is a str."""
    if not isinstance(value, str):
        raise ValueError(f"{owner}: {field} must be a str, not {type(value).__name__}")


@dataclass(frozen=True)
class Service:
    """One service in the state it should be in.

    `name` is the unit (`web` or `web.service`; other unit types by suffix,
    `backup.timer`). `ensure` is `RUNNING` (the default) or `STOPPED`.
    `enable` says whether it starts at boot; `None` (the default) leaves the
    boot setting alone, for when another team owns it. `subscribe` lists
    `type#name` references (`file#/etc/web.conf`, `package#nginx`,
    `service#db`): a change to one restarts this service.

    Frozen, and `subscribe` is kept as a tuple, so a declared service cannot
    change behind the policy's back.
    """

    name: str
    ensure: str = RUNNING
    enable: bool | None = None
    subscribe: Sequence[str] = ()

    def __post_init__(self) -> None:
        _text("Service", "name", self.name)
        owner = f"Service {self.name!r}"
        if self.ensure not in _ENSURES:
            raise ValueError(
                f"{owner}: ensure must be {RUNNING!r} or {STOPPED!r}, not {self.ensure!r}"
            )
        if self.enable is not None and not isinstance(self.enable, bool):
            raise ValueError(
                f"{owner}: enable must be True, False or None, not {self.enable!r}"
            )
        # A lone string is a sequence of characters: refuse it rather than
        # subscribe to "f", "i", "l", "e", ...
        if isinstance(self.subscribe, str) or not isinstance(self.subscribe, Sequence):
            raise ValueError(
                f"{owner}: subscribe must be a list of str, not {type(self.subscribe).__name__}"
            )
        for reference in self.subscribe:
            _text(owner, "subscribe entry", reference)
        object.__setattr__(self, "subscribe", tuple(self.subscribe))


@dataclass(frozen=True)
class LeftOut:
    """A service declared for other machines and not applied on this one,
    with the author's reason (`when role = web (this machine: db)`): the
    report shows it, so a reader knows the policy did not forget it."""

    name: str
    why: str

    def __post_init__(self) -> None:
        _text("LeftOut", "name", self.name)
        _text(f"LeftOut {self.name!r}", "why", self.why)


class Policy:
    """The declaration of one run: services in the order they are applied,
    and the services left out on this machine."""

    def __init__(self) -> None:
        self._services: list[Service] = []
        self._left_out: list[LeftOut] = []

    def add(self, service: Service) -> Policy:
        """Declares `service`, after those already added; returns the policy
        so that declarations can be chained."""
        if not isinstance(service, Service):
            raise TypeError(f"Policy.add takes a Service, not {type(service).__name__}")
        self._services.append(service)
        return self

    def leave_out(self, name: str, why: str) -> Policy:
        """Notes that the service `name` is not applied on this machine, and
        `why`; returns the policy so that calls can be chained."""
        self._left_out.append(LeftOut(name, why))
        return self

    @property
    def services(self) -> list[Service]:
        """The declared services, in declaration order (a copy)."""
        return list(self._services)

    @property
    def left_out(self) -> list[LeftOut]:
        """The services left out, in the order they were noted (a copy)."""
        return list(self._left_out)

    def __repr__(self) -> str:
        return f"Policy(services={self._services!r}, left_out={self._left_out!r})"
