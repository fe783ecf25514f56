"""What a policy function is given: the run's settings and the machine's
facts."""

from __future__ import annotations

import json
from typing import Any

from .facts import Facts, FactsInput

MISSING_SETTINGS = "no settings given: run with --settings FILE (JSON)"


class SettingsError(ValueError):
    """The settings could not be read: none were given, or they are not
    JSON. `line` and `column` (1-based) say where, when the parser knows."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        super().__init__(message)
        self.line = line
        self.column = column


class Context:
    """The inputs of one run. The same inputs must give the same
    declaration: the engine asks for it more than once in a run.

    Build one directly in tests: `Context(settings='{"extra": ["web"]}',
    facts={"role": "db"})`.
    """

    def __init__(
        self,
        settings: str | None = None,
        facts: FactsInput | Facts | None = None,
        noop: bool = False,
    ) -> None:
        if settings is not None and not isinstance(settings, str):
            raise ValueError(f"settings must be a str or None, not {type(settings).__name__}")
        self._settings = settings
        self._facts = facts if isinstance(facts, Facts) else Facts(facts)
        self._noop = bool(noop)

    @property
    def settings(self) -> str | None:
        """The settings document as text (`host run --settings FILE`), or
        None when the run was given none."""
        return self._settings

    @property
    def facts(self) -> Facts:
        """The machine's facts and the operator's labels."""
        return self._facts

    @property
    def noop(self) -> bool:
        """True in a noop (dry) run. The declaration contract does not carry
        it (the engine makes no change in a noop run whatever is declared,
        and a declaration must not depend on it), so a policy running as a
        component always sees False; it is here for tests and for parity
        with the Rust SDK's Context."""
        return self._noop

    def settings_json(self) -> Any:
        """The settings parsed as JSON.

        Raises SettingsError when the run was given no settings (check
        `settings is None` first to make them optional), or when they are not
        JSON, naming the line and column.
        """
        if self._settings is None:
            raise SettingsError(MISSING_SETTINGS)
        try:
            return json.loads(self._settings)
        except json.JSONDecodeError as error:
            raise SettingsError(
                f"settings: not valid JSON at line {error.lineno} column {error.colno}: {error.msg}",
                line=error.lineno,
                column=error.colno,
            ) from None
