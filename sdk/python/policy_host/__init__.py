"""Policies for the policy host, written in Python.

A policy is a function from a `Context` (the run's settings and the
machine's facts) to a `Policy` (the services in the state they should be
in). `export` turns it into the `declaration` component's export; the
engine it is composed with does the rest (name checks, ordering, two-phase
apply, noop runs, subscriptions), exactly as for a policy written in Rust.

    from policy_host import Context, Policy, Service, STOPPED, export

    def policy(ctx: Context) -> Policy:
        return Policy().add(Service("web", enable=True)).add(Service("ftpd", STOPPED))

    Declare = export(policy)
"""

from .context import Context, SettingsError
from .declaration import RUNNING, STOPPED, LeftOut, Policy, Service
from .export import ERROR_LIMIT, bounded, export, to_wit
from .facts import GATHERED, Facts

__all__ = [
    "ERROR_LIMIT",
    "GATHERED",
    "RUNNING",
    "STOPPED",
    "Context",
    "Facts",
    "LeftOut",
    "Policy",
    "Service",
    "SettingsError",
    "bounded",
    "export",
    "to_wit",
]
