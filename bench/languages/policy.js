// The example policy's three services, declared in JavaScript: a measuring
// fixture for issue 47 (size, compile, memory, run time), not the SDK.
import { status, start, stop, enable, disable } from 'policy-host:policy/service-provider@0.6.0';

const SERVICES = [
  ['httpd', 'running', true],
  ['legacy-ftpd', 'stopped', false],
  ['metrics-agent', 'running', undefined],
];

function apply(name, ensure, wantEnabled, noop) {
  const event = {
    resource: `service#${name}`, changed: false, refreshed: false, noop, noopMessage: undefined,
    actions: [], failed: false, errors: [], requested: { ensure, enable: wantEnabled }, finalState: undefined,
  };
  try {
    let s = status(name);
    const actions = [];
    if (ensure === 'running' && !s.running) actions.push('started');
    else if (ensure === 'stopped' && s.running) actions.push('stopped');
    if (wantEnabled === true && !s.enabled) actions.push('enabled');
    else if (wantEnabled === false && s.enabled) actions.push('disabled');
    event.changed = actions.length > 0;
    event.actions = actions;
    if (!noop) {
      const ops = { started: start, stopped: stop, enabled: enable, disabled: disable };
      for (const a of actions) ops[a](name);
      s = status(name);
    }
    event.finalState = { ensure: s.running ? 'running' : 'stopped', enabled: s.enabled };
  } catch (e) {
    event.failed = true;
    event.errors.push(`${name}: ${JSON.stringify(e.payload ?? String(e))}`);
  }
  return event;
}

export function run(options) {
  return { events: SERVICES.map(([n, e, en]) => apply(n, e, en, options.noop)), errors: [], leftOut: [] };
}

export function subscriptions(_settings, _facts) {
  return [];
}
