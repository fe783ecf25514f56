// The example's own tests, natively: `node --test policies/example-js/`.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Context, Service } from '../../sdk/js/policy-host.js';
import { HTTPD_CONFIG, webHost } from './policy.js';

test('declares the web host', () => {
  const policy = webHost(new Context({ facts: { 'os.id': 'debian' } }));
  assert.deepEqual(policy.services, [
    new Service('httpd', { enable: true, subscribe: [HTTPD_CONFIG, 'package#httpd'] }),
    new Service('legacy-ftpd', { ensure: 'stopped', enable: false }),
    new Service('metrics-agent'),
  ]);
  assert.deepEqual(policy.leftOut, []);
});

test('a db machine leaves httpd out', () => {
  const policy = webHost(new Context({ facts: { role: 'db' } }));
  assert.deepEqual(policy.services.map((s) => s.name), ['legacy-ftpd', 'metrics-agent']);
  assert.deepEqual(policy.leftOut.map((l) => [l.name, l.why]), [['httpd', 'when role = web (this machine: db)']]);
});

test('settings add extra services', () => {
  const policy = webHost(new Context({ settings: '{"extra": ["cron", "backup.timer"]}' }));
  assert.deepEqual(policy.services.slice(-2), [new Service('cron'), new Service('backup.timer')]);
});
