// Services, left-out services and the policy that holds them.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { LeftOut, Policy, RUNNING, STOPPED, Service } from '../policy-host.js';

test('a service defaults to running with its boot setting left alone', () => {
  const service = new Service('web');
  assert.deepEqual([service.ensure, service.enable, service.subscribe], [RUNNING, undefined, []]);
});

test('a service copies its subscriptions and is frozen', () => {
  const subscribe = ['file#/etc/web.conf'];
  const service = new Service('web', { subscribe });
  subscribe.push('package#web');
  assert.deepEqual(service.subscribe, ['file#/etc/web.conf']);
  assert.throws(() => { service.ensure = STOPPED; }, TypeError);
  assert.throws(() => { service.subscribe.push('package#web'); }, TypeError);
});

for (const [args, field] of [
  [[7], "Service: name must be a string, not number"],
  [['web', { ensure: 'started' }], `Service 'web': ensure must be 'running' or 'stopped', not "started"`],
  [['web', { enable: 'yes' }], `Service 'web': enable must be true, false or undefined, not "yes"`],
  [['web', { enable: 1 }], "Service 'web': enable must be true, false or undefined, not 1"],
  [['web', { subscribe: 'file#/etc/web.conf' }], "Service 'web': subscribe must be an array of strings, not string"],
  [['web', { subscribe: ['package#web', 3] }], "Service 'web': subscribe entry must be a string, not number"],
]) {
  test(`a service refuses a bad field naming it: ${field}`, () => {
    assert.throws(() => new Service(...args), { name: 'TypeError', message: field });
  });
}

test('a service does not check names the engine checks', () => {
  // The engine owns name and subscription rules; the SDK must not drift.
  assert.equal(new Service('not a unit!', { subscribe: ['nonsense'] }).name, 'not a unit!');
});

test('a policy keeps declaration order and chains', () => {
  const policy = new Policy().add(new Service('b')).add(new Service('a', { ensure: STOPPED }));
  assert.equal(policy.leaveOut('httpd', 'when role = web (this machine: db)'), policy);
  assert.deepEqual(policy.services.map((s) => s.name), ['b', 'a']);
  assert.deepEqual(policy.leftOut, [new LeftOut('httpd', 'when role = web (this machine: db)')]);
});

test("a policy's lists are copies", () => {
  const policy = new Policy().add(new Service('web'));
  policy.services.length = 0;
  assert.equal(policy.services.length, 1);
});

test('a policy refuses what is not a service', () => {
  assert.throws(() => new Policy().add('web'), { name: 'TypeError', message: 'Policy.add takes a Service, not string' });
});

test('a left-out service needs its reason', () => {
  assert.throws(() => new Policy().leaveOut('httpd'), { name: 'TypeError', message: "LeftOut 'httpd': why must be a string, not undefined" });
});
