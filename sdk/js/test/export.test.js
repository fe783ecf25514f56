// The glue between a policy function and the componentize-qjs export.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { ERROR_LIMIT, Policy, STOPPED, Service, bounded, declaration, describe, toWire } from '../policy-host.js';

/** The string `declare` throws (componentize-qjs makes it the `err`). */
function err(policyFn, settings = null, facts = []) {
  try {
    declaration(policyFn).declare(settings, facts);
  } catch (thrown) {
    assert.equal(typeof thrown, 'string', 'only a thrown string is the err case');
    return thrown;
  }
  assert.fail('declare did not throw');
}

test('toWire converts every field, option none as null', () => {
  const policy = new Policy()
    .add(new Service('web', { enable: true, subscribe: ['file#/etc/web.conf'] }))
    .add(new Service('ftpd', { ensure: STOPPED, enable: false }))
    .add(new Service('agent'))
    .leaveOut('db', 'when role = db (this machine: web)');
  assert.deepEqual(toWire(policy), {
    services: [
      { name: 'web', ensure: 'running', enable: true, subscribe: ['file#/etc/web.conf'] },
      { name: 'ftpd', ensure: 'stopped', enable: false, subscribe: [] },
      { name: 'agent', ensure: 'running', enable: null, subscribe: [] },
    ],
    leftOut: [{ name: 'db', why: 'when role = db (this machine: web)' }],
  });
});

test('declare gives the policy its settings and facts', () => {
  const seen = {};
  const { declare } = declaration((ctx) => {
    seen.settings = ctx.settings;
    seen.role = ctx.facts.label('role');
    return new Policy().add(new Service('web'));
  });
  const wire = declare('{"a": 1}', [{ name: 'os.id', value: 'debian' }, { name: 'role', value: 'web' }]);
  assert.deepEqual(seen, { settings: '{"a": 1}', role: 'web' });
  assert.deepEqual(wire.services.map((s) => s.name), ['web']);
});

test('a thrown error becomes the err string with its stack', () => {
  function failingPolicy() {
    throw new Error('no web for you');
  }
  const text = err(failingPolicy);
  assert.match(text, /^Error: no web for you\n/);
  assert.match(text, /at failingPolicy /);
});

test('a stack without the message gets the message first (QuickJS)', () => {
  const error = new TypeError('bad');
  error.stack = '    at webHost (/policies/example-js/policy.js:3:5)\n';
  assert.equal(describe(error), 'TypeError: bad\n    at webHost (/policies/example-js/policy.js:3:5)\n');
  assert.equal(describe('plain text'), 'plain text');
});

test('a settings error becomes the err string', () => {
  assert.match(err((ctx) => ctx.settingsJson()), /^SettingsError: no settings given/);
});

test('a result that is not a Policy becomes the err string', () => {
  function forgetful() {
    new Policy().add(new Service('web'));
  }
  assert.match(err(forgetful), /^TypeError: forgetful returned undefined, not a Policy/);
  async function eager() {
    return new Policy();
  }
  assert.match(err(eager), /^TypeError: eager returned a Promise: a policy function must not be async/);
});

test('a long error is bounded, keeping its start', () => {
  const text = err(function verbosePolicy() {
    throw new Error(`the top ${'word '.repeat(1000)}`);
  });
  const [kept, tail] = [text.slice(0, ERROR_LIMIT), text.slice(ERROR_LIMIT)];
  assert.match(kept, /^Error: the top word/);
  assert.match(tail, /^\n\.\.\. \(\d+ characters not shown\)$/);
  const cut = Number(/\((\d+) characters/.exec(tail)[1]);
  assert.ok(cut > 0);
});

test('bounded leaves short text alone and counts what it cuts', () => {
  assert.equal(bounded('short'), 'short');
  assert.equal(bounded('abcdef', 2), 'ab\n... (4 characters not shown)');
});

test('declaration needs a function', () => {
  assert.throws(() => declaration(new Policy()), { name: 'TypeError', message: 'declaration takes the policy function, not object' });
});
