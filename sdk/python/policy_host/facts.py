"""What the host tells a policy about the machine: the facts it gathers (host
name, operating system, architecture, CPUs, memory, the versions of systemd
and the host) and the labels the operator gave the machine in host.toml
(`role = "web"`). One policy can then serve a whole fleet, each machine
taking its part.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

GATHERED = (
    "hostname",
    "fqdn",
    "os.id",
    "os.version_id",
    "os.version_codename",
    "arch",
    "kernel.release",
    "cpus",
    "memory_mib",
    "systemd.version",
    "host.version",
)
"""The names of the facts the host gathers, in the host's order. Every other
fact is an operator's label. The Rust side keeps the same list
(contract-words' `GATHERED`) and tests that the two agree, so keep this the
one place the names are written."""

FactsInput = Mapping[str, str] | Sequence[tuple[str, str]]


class Facts:
    """The facts of one run, as the host gave them: every gathered fact
    (empty when the host could not tell), then the operator's labels.

    Accepts a mapping or a sequence of `(name, value)` pairs; with pairs,
    the last one given for a name wins, as on the Rust side.
    """

    def __init__(self, facts: FactsInput | None = None) -> None:
        pairs = list(facts.items()) if isinstance(facts, Mapping) else list(facts or ())
        for pair in pairs:
            if (
                not isinstance(pair, tuple)
                or len(pair) != 2
                or not all(isinstance(part, str) for part in pair)
            ):
                raise ValueError(f"facts: expected (name, value) pairs of str, got {pair!r}")
        self._pairs: tuple[tuple[str, str], ...] = tuple(pairs)

    def get(self, name: str) -> str | None:
        """The value of the fact `name` (`os.id`, `role`), or None when the
        host gave no fact of that name."""
        for fact_name, value in reversed(self._pairs):
            if fact_name == name:
                return value
        return None

    def label(self, name: str) -> str | None:
        """The operator's label `name` (host.toml `[labels]`), or None.
        A gathered fact's name is never a label, so `label("os.id")` is None
        even though `get("os.id")` is not."""
        return None if name in GATHERED else self.get(name)

    def labels(self) -> dict[str, str]:
        """Every operator's label, by name, in the host's order."""
        return {name: value for name, value in self._pairs if name not in GATHERED}

    def _text(self, name: str) -> str:
        value = self.get(name)
        return "" if value is None else value

    def _number(self, name: str) -> int | None:
        """The fact `name` as a whole number, or None when the host could not
        tell: a number compares as a number (`cpus >= 4`), which a string
        would not."""
        value = self.get(name)
        return int(value) if value is not None and value.isascii() and value.isdecimal() else None

    @property
    def hostname(self) -> str:
        """The kernel's host name."""
        return self._text("hostname")

    @property
    def fqdn(self) -> str:
        """The fully qualified name when the machine resolves it locally,
        else the host name."""
        return self._text("fqdn")

    @property
    def os_id(self) -> str:
        """os-release's `ID` (`debian`)."""
        return self._text("os.id")

    @property
    def os_version_id(self) -> str:
        """os-release's `VERSION_ID` (`12`; empty on Debian testing)."""
        return self._text("os.version_id")

    @property
    def os_version_codename(self) -> str:
        """os-release's `VERSION_CODENAME` (`bookworm`)."""
        return self._text("os.version_codename")

    @property
    def arch(self) -> str:
        """The architecture by Debian's name (`amd64`, `arm64`)."""
        return self._text("arch")

    @property
    def kernel_release(self) -> str:
        """The running kernel's release."""
        return self._text("kernel.release")

    @property
    def cpus(self) -> int | None:
        """Online logical CPUs; None when the host could not tell."""
        return self._number("cpus")

    @property
    def memory_mib(self) -> int | None:
        """Total memory in MiB; None when the host could not tell."""
        return self._number("memory_mib")

    @property
    def systemd_version(self) -> int | None:
        """systemd's version number (`252`); None when systemd did not say."""
        return self._number("systemd.version")

    @property
    def host_version(self) -> str:
        """The policy host's version."""
        return self._text("host.version")

    def __repr__(self) -> str:
        return f"Facts({list(self._pairs)!r})"
