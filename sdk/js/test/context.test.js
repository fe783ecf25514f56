// Settings and facts.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Context, Facts, GATHERED, SettingsError } from '../policy-host.js';

test('settings are given as text', () => {
  assert.equal(new Context({ settings: 'extra: [cron]' }).settings, 'extra: [cron]');
  assert.equal(new Context().settings, undefined);
  assert.equal(new Context({ settings: null }).settings, undefined, 'the wire gives none as null');
});

test('settingsJson parses', () => {
  assert.deepEqual(new Context({ settings: '{"extra": ["cron"]}' }).settingsJson(), { extra: ['cron'] });
});

test('settingsJson names line and column from an offset (Node)', () => {
  const ctx = new Context({ settings: '{\n  "extra" ["cron"]\n}' });
  const error = captured(() => ctx.settingsJson());
  assert.ok(error instanceof SettingsError);
  assert.deepEqual([error.line, error.column], [2, 11]);
  assert.match(error.message, /^settings: not valid JSON at line 2 column 11: /);
});

test('settingsJson names line and column from a QuickJS stack', (t) => {
  // Inside the component JSON.parse is QuickJS's: the place is in the stack.
  t.mock.method(JSON, 'parse', () => {
    const error = new SyntaxError("unexpected token: ']'");
    error.stack = '    at <input>:2:10\n    at parse (native)\n';
    throw error;
  });
  const error = captured(() => new Context({ settings: '{\n "a": [1,]}' }).settingsJson());
  assert.deepEqual([error.line, error.column], [2, 10]);
  assert.equal(error.message, "settings: not valid JSON at line 2 column 10: unexpected token: ']'");
});

test('settingsJson without settings says how to give them', () => {
  const error = captured(() => new Context().settingsJson());
  assert.ok(error instanceof SettingsError);
  assert.match(error.message, /^no settings given: run with --settings FILE/);
  assert.equal(error.line, undefined);
});

// That the names are the host's is tested on the Rust side, against
// contract-words (tests/tests/languages.rs); here, that no policy can change them.
test('the gathered names cannot be changed by a policy', () => {
  assert.ok(Object.isFrozen(GATHERED));
});

test('the last fact given wins', () => {
  const facts = new Facts([['role', 'web'], ['os.id', 'debian'], ['role', 'db']]);
  assert.equal(facts.get('role'), 'db');
  assert.equal(facts.get('nothing'), undefined);
});

test('labels are the facts not gathered, in the shape the host gives them', () => {
  const { facts } = new Context({
    facts: [{ name: 'os.id', value: 'debian' }, { name: 'role', value: 'web' }, { name: 'zone', value: 'b' }],
  });
  assert.equal(facts.label('role'), 'web');
  assert.equal(facts.label('os.id'), undefined);
  assert.equal(facts.get('os.id'), 'debian');
  assert.deepEqual(facts.labels(), { role: 'web', zone: 'b' });
});

test('typed getters read the gathered facts', () => {
  const facts = new Facts({
    hostname: 'web1', fqdn: 'web1.example.org', 'os.id': 'debian', 'os.version_id': '12',
    'os.version_codename': 'bookworm', arch: 'amd64', 'kernel.release': '6.1.0-18-amd64',
    cpus: '16', memory_mib: '2048', 'systemd.version': '', 'host.version': '0.1.0',
  });
  assert.deepEqual([facts.hostname, facts.fqdn], ['web1', 'web1.example.org']);
  assert.deepEqual([facts.osId, facts.osVersionId, facts.osVersionCodename], ['debian', '12', 'bookworm']);
  assert.deepEqual([facts.arch, facts.kernelRelease, facts.hostVersion], ['amd64', '6.1.0-18-amd64', '0.1.0']);
  assert.deepEqual([facts.cpus, facts.memoryMib], [16, 2048]);
  assert.equal(facts.systemdVersion, undefined, 'not told: not a number');
});

test('absent facts read empty', () => {
  const facts = new Facts(new Map());
  assert.equal(facts.osId, '');
  assert.equal(facts.cpus, undefined);
  assert.deepEqual(facts.labels(), {});
});

test('facts refuse what is not names and values of text', () => {
  assert.throws(() => new Facts([['cpus', 4]]), { name: 'TypeError', message: /expected names and values that are strings/ });
});

/** The error `fn` throws. */
function captured(fn) {
  try {
    fn();
  } catch (error) {
    return error;
  }
  assert.fail('nothing was thrown');
}
