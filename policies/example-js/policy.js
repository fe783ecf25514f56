// An example policy for a small web host, in JavaScript: the same services
// as the Rust example (policies/example).
//
// - `httpd` must run, start at boot, and restart when its configuration
//   file or package changed. On a machine labelled `role = "db"` it is left
//   out, with the reason in the report.
// - `legacy-ftpd` has been retired: stopped and kept from starting at boot.
// - `metrics-agent` must run, but its boot setting belongs to another team,
//   so the policy leaves it alone.
// - Settings (JSON) may name more services to run: `{"extra": ["cron"]}`.
//
// Build it into a declaration component from the repository's root (the
// module root must contain sdk/js, which the relative import reaches):
//
//   npx componentize-qjs --wit wit/declaration -j policies/example-js/policy.js \
//     --module-root . -n declaration --sync --stub-wasi -o example-js.wasm

import { Policy, RUNNING, STOPPED, Service, declaration } from '../../sdk/js/policy-host.js';

/** The web server's configuration; a change to it restarts `httpd`. */
export const HTTPD_CONFIG = 'file#/etc/httpd/conf/httpd.conf';

/** The names under `extra` in the settings; none without settings. */
function extraServices(ctx) {
  if (ctx.settings === undefined) return [];
  const settings = ctx.settingsJson();
  if (settings === null || typeof settings !== 'object' || Array.isArray(settings)) {
    throw new TypeError('settings: expected a JSON object, like {"extra": ["cron"]}');
  }
  const extra = settings.extra ?? [];
  if (!Array.isArray(extra)) throw new TypeError('settings: extra must be an array of service names');
  return extra;
}

/** The web host's declaration on this machine. */
export function webHost(ctx) {
  const policy = new Policy();
  const role = ctx.facts.label('role');
  if (role === 'db') {
    policy.leaveOut('httpd', `when role = web (this machine: ${role})`);
  } else {
    policy.add(new Service('httpd', {
      ensure: RUNNING,
      enable: true,
      subscribe: [HTTPD_CONFIG, 'package#httpd'],
    }));
  }
  policy
    .add(new Service('legacy-ftpd', { ensure: STOPPED, enable: false }))
    .add(new Service('metrics-agent', { ensure: RUNNING }));
  for (const name of extraServices(ctx)) policy.add(new Service(name, { ensure: RUNNING }));
  return policy;
}

export const declare = declaration(webHost);
