"""The example policy's three services, declared in Python: a measuring
fixture for issue 47 (size, compile, memory, run time), not the SDK."""
from typing import List, Optional
import wit_world
from wit_world.imports import service_provider as host
from wit_world.imports import types as t
from componentize_py_types import Err

SERVICES = [
    ("httpd", t.Ensure.RUNNING, True),
    ("legacy-ftpd", t.Ensure.STOPPED, False),
    ("metrics-agent", t.Ensure.RUNNING, None),
]


def apply(name, ensure, enable, noop) -> t.Event:
    event = t.Event(f"service#{name}", False, False, noop, None, [], False, [],
                    t.RequestedState(ensure, enable), None)
    try:
        s = host.status(name)
        want_running = ensure == t.Ensure.RUNNING
        actions = []
        if want_running and not s.running:
            actions.append(t.Action.STARTED)
        elif not want_running and s.running:
            actions.append(t.Action.STOPPED)
        if enable is True and not s.enabled:
            actions.append(t.Action.ENABLED)
        elif enable is False and s.enabled:
            actions.append(t.Action.DISABLED)
        event.changed = bool(actions)
        event.actions = actions
        if not noop:
            for a in actions:
                {t.Action.STARTED: host.start, t.Action.STOPPED: host.stop,
                 t.Action.ENABLED: host.enable, t.Action.DISABLED: host.disable}[a](name)
            s = host.status(name)
        event.final_state = t.FinalState(t.Ensure.RUNNING if s.running else t.Ensure.STOPPED, s.enabled)
    except Err as e:
        event.failed = True
        event.errors.append(f"{name}: {e.value}")
    return event


class WitWorld(wit_world.WitWorld):
    def run(self, options: t.RunOptions) -> t.Report:
        events = [apply(n, e, en, options.noop) for (n, e, en) in SERVICES]
        return t.Report(events, [], [])

    def subscriptions(self, settings: Optional[str], facts: List[t.Fact]) -> List[t.Subscription]:
        return []
