// The JavaScript example (policies/example-js), through the export, as the
// engine would ask it.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { declare } from '../../../policies/example-js/policy.js';

const facts = (object) => Object.entries(object).map(([name, value]) => ({ name, value }));

test('declares the same services as the Rust example', () => {
  assert.deepEqual(declare.declare(null, facts({ hostname: 'web1' })), {
    services: [
      { name: 'httpd', ensure: 'running', enable: true, subscribe: ['file#/etc/httpd/conf/httpd.conf', 'package#httpd'] },
      { name: 'legacy-ftpd', ensure: 'stopped', enable: false, subscribe: [] },
      { name: 'metrics-agent', ensure: 'running', enable: null, subscribe: [] },
    ],
    leftOut: [],
  });
});

test('leaves httpd out on a db machine', () => {
  const wire = declare.declare(null, facts({ role: 'db' }));
  assert.deepEqual(wire.services.map((s) => s.name), ['legacy-ftpd', 'metrics-agent']);
  assert.deepEqual(wire.leftOut, [{ name: 'httpd', why: 'when role = web (this machine: db)' }]);
});

test('settings declare extra services running', () => {
  const wire = declare.declare('{"extra": ["cron", "backup.timer"]}', []);
  assert.deepEqual(wire.services.slice(3).map((s) => [s.name, s.ensure, s.enable]), [
    ['cron', 'running', null],
    ['backup.timer', 'running', null],
  ]);
});

test("bad settings are the policy's error", () => {
  assert.throws(() => declare.declare('{"extra": ["cron"', []), (thrown) => {
    assert.match(thrown, /^SettingsError: settings: not valid JSON/);
    assert.match(thrown, /at extraServices /);
    return true;
  });
});
