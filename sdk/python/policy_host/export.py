"""The glue between a policy function and the `declaration` world
(wit/declaration/declaration.wit), as componentize-py expects it: a class
named `Declare` in the app module, whose `declare` method returns the
declaration or raises `componentize_py_types.Err(text)`.

The bindings (`wit_world`, `componentize_py_types`) exist only inside a
componentize-py build, so they are imported when `declare` runs: a policy
and its tests import this module natively without them.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from types import ModuleType, SimpleNamespace
from typing import Any

from .context import Context
from .declaration import RUNNING, Policy

ERROR_LIMIT = 4000
"""How many characters of a traceback the error keeps. The engine bounds
the error again (4096 bytes); the end is kept here because a Python
traceback ends with the exception and the line that raised it."""

PolicyFunction = Callable[[Context], Policy]


def bounded(text: str, limit: int = ERROR_LIMIT) -> str:
    """`text`, or its last `limit` characters after a line saying how many
    were cut."""
    if len(text) <= limit:
        return text
    cut = len(text) - limit
    return f"... ({cut} characters not shown)\n{text[-limit:]}"


def to_wit(policy: Policy, wit: ModuleType | SimpleNamespace) -> Any:
    """`policy` as the bindings' `Declaration`, built with the types of
    `wit` (the generated `wit_world.exports.declare`, or a stand-in with
    `Service`, `LeftOut`, `Declaration` and `Ensure` in tests)."""
    return wit.Declaration(
        services=[
            wit.Service(
                name=service.name,
                ensure=wit.Ensure.RUNNING if service.ensure == RUNNING else wit.Ensure.STOPPED,
                enable=service.enable,
                subscribe=list(service.subscribe),
            )
            for service in policy.services
        ],
        left_out=[wit.LeftOut(name=left.name, why=left.why) for left in policy.left_out],
    )


def export(policy_fn: PolicyFunction) -> type:
    """The class componentize-py exports for `policy_fn`; bind it in the app
    module as `Declare = export(policy)`.

    Any exception from the policy function, or from turning its result into
    the declaration, becomes the declaration's error: the formatted
    traceback (bounded, see ERROR_LIMIT), so the run's report shows the
    author where it failed. The run then applies nothing.
    """
    if not callable(policy_fn):
        raise TypeError(f"export takes the policy function, not {type(policy_fn).__name__}")
    name = getattr(policy_fn, "__name__", repr(policy_fn))

    class Declare:
        """The `declare` export of the `declaration` world."""

        def declare(self, settings: str | None, facts: list[Any]) -> Any:
            from componentize_py_types import Err
            from wit_world.exports import declare as wit

            try:
                ctx = Context(settings, [(fact.name, fact.value) for fact in facts])
                policy = policy_fn(ctx)
                if not isinstance(policy, Policy):
                    raise TypeError(
                        f"{name} returned {type(policy).__name__}, not a policy_host.Policy"
                    )
                return to_wit(policy, wit)
            except Exception:
                raise Err(bounded(traceback.format_exc())) from None

    return Declare
