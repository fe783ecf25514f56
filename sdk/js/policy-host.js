// Policies for the policy host, written in JavaScript.
//
// A policy is a function from a Context (the run's settings and the
// machine's facts) to a Policy (the services in the state they should be
// in). `declaration` turns it into the export of the `declaration` world
// (wit/declaration/declaration.wit); the engine it is composed with does
// the rest (name checks, ordering, two-phase apply, noop runs,
// subscriptions), exactly as for a policy written in Rust. So this module
// holds declarations and reads inputs; it checks only the JavaScript type of
// each field, where a mistake points at the author's line, and leaves every
// rule about names to the engine, so that the rules cannot drift.
//
// No dependencies, no Node APIs: the same file runs under Node (tests) and
// inside the component (QuickJS, via componentize-qjs).

/** The service should be running. */
export const RUNNING = 'running';
/** The service should be stopped. */
export const STOPPED = 'stopped';

/**
 * The names of the facts the host gathers, in the host's order. Every other
 * fact is an operator's label. The Rust side keeps the same list
 * (contract-words' `GATHERED`) and tests that the lists agree.
 */
export const GATHERED = Object.freeze([
  'hostname',
  'fqdn',
  'os.id',
  'os.version_id',
  'os.version_codename',
  'arch',
  'kernel.release',
  'cpus',
  'memory_mib',
  'systemd.version',
  'host.version',
]);

/**
 * How many characters of a thrown error's text the declaration's error
 * keeps. The engine bounds the error again (4096 bytes).
 */
export const ERROR_LIMIT = 4000;

/** What a value is, for error messages: `number`, `null`, `array`. */
function kind(value) {
  if (value === null) return 'null';
  return Array.isArray(value) ? 'array' : typeof value;
}

function text(owner, field, value) {
  if (typeof value !== 'string') {
    throw new TypeError(`${owner}: ${field} must be a string, not ${kind(value)}`);
  }
}

/**
 * One service in the state it should be in.
 *
 * `name` is the unit (`web` or `web.service`; other unit types by suffix,
 * `backup.timer`). `ensure` is RUNNING (the default) or STOPPED. `enable`
 * says whether it starts at boot; left undefined, the boot setting is left
 * alone, for when another team owns it. `subscribe` lists `type#name`
 * references (`file#/etc/web.conf`, `package#nginx`, `service#db`): a
 * change to one restarts this service. Frozen, so a declared service cannot
 * change behind the policy's back.
 */
export class Service {
  constructor(name, { ensure = RUNNING, enable, subscribe = [] } = {}) {
    text('Service', 'name', name);
    const owner = `Service '${name}'`;
    if (ensure !== RUNNING && ensure !== STOPPED) {
      throw new TypeError(`${owner}: ensure must be 'running' or 'stopped', not ${JSON.stringify(ensure)}`);
    }
    if (enable !== undefined && enable !== null && typeof enable !== 'boolean') {
      throw new TypeError(`${owner}: enable must be true, false or undefined, not ${JSON.stringify(enable)}`);
    }
    // A lone string would subscribe to nothing sensible: ask for the array.
    if (!Array.isArray(subscribe)) {
      throw new TypeError(`${owner}: subscribe must be an array of strings, not ${kind(subscribe)}`);
    }
    subscribe.forEach((reference) => text(owner, 'subscribe entry', reference));
    this.name = name;
    this.ensure = ensure;
    this.enable = enable ?? undefined;
    this.subscribe = Object.freeze([...subscribe]);
    Object.freeze(this);
  }
}

/**
 * A service declared for other machines and not applied on this one, with
 * the author's reason (`when role = web (this machine: db)`): the report
 * shows it, so a reader knows the policy did not forget it.
 */
export class LeftOut {
  constructor(name, why) {
    text('LeftOut', 'name', name);
    text(`LeftOut '${name}'`, 'why', why);
    this.name = name;
    this.why = why;
    Object.freeze(this);
  }
}

/** The declaration of one run: services in the order they are applied, and the services left out on this machine. */
export class Policy {
  #services = [];
  #leftOut = [];

  /** Declares `service` after those already added; returns the policy, to chain. */
  add(service) {
    if (!(service instanceof Service)) {
      throw new TypeError(`Policy.add takes a Service, not ${kind(service)}`);
    }
    this.#services.push(service);
    return this;
  }

  /** Notes that the service `name` is not applied on this machine, and why; returns the policy, to chain. */
  leaveOut(name, why) {
    this.#leftOut.push(new LeftOut(name, why));
    return this;
  }

  /** The declared services, in declaration order (a copy). */
  get services() {
    return [...this.#services];
  }

  /** The services left out, in the order they were noted (a copy). */
  get leftOut() {
    return [...this.#leftOut];
  }
}

/**
 * The facts of one run, as the host gave them: every gathered fact (empty
 * when the host could not tell), then the operator's labels.
 *
 * Accepts what the host gives (an array of `{ name, value }`), an array of
 * `[name, value]` pairs, a Map or a plain object; the last value given for
 * a name wins, as on the Rust side.
 */
export class Facts {
  #pairs;

  constructor(facts = []) {
    let pairs;
    if (facts instanceof Map) pairs = [...facts];
    else if (Array.isArray(facts)) pairs = facts.map((f) => (Array.isArray(f) ? f : [f?.name, f?.value]));
    else if (facts && typeof facts === 'object') pairs = Object.entries(facts);
    else throw new TypeError(`facts must be an array, a Map or an object, not ${kind(facts)}`);
    for (const [name, value] of pairs) {
      if (typeof name !== 'string' || typeof value !== 'string') {
        throw new TypeError(`facts: expected names and values that are strings, got ${JSON.stringify([name, value])}`);
      }
    }
    this.#pairs = Object.freeze(pairs.map(([name, value]) => Object.freeze([name, value])));
  }

  /** The value of the fact `name` (`os.id`, `role`), or undefined when the host gave none. */
  get(name) {
    for (let i = this.#pairs.length - 1; i >= 0; i--) {
      if (this.#pairs[i][0] === name) return this.#pairs[i][1];
    }
    return undefined;
  }

  /**
   * The operator's label `name` (host.toml `[labels]`), or undefined. A
   * gathered fact's name is never a label: `label('os.id')` is undefined
   * even though `get('os.id')` is not.
   */
  label(name) {
    return GATHERED.includes(name) ? undefined : this.get(name);
  }

  /** Every operator's label, as an object by name, in the host's order. */
  labels() {
    return Object.fromEntries(this.#pairs.filter(([name]) => !GATHERED.includes(name)));
  }

  #text(name) {
    return this.get(name) ?? '';
  }

  // A number compares as a number (`cpus >= 4`); undefined when not told.
  #number(name) {
    const value = this.get(name);
    return value !== undefined && /^[0-9]+$/.test(value) ? Number(value) : undefined;
  }

  /** The kernel's host name. */
  get hostname() { return this.#text('hostname'); }
  /** The fully qualified name when the machine resolves it locally, else the host name. */
  get fqdn() { return this.#text('fqdn'); }
  /** os-release's `ID` (`debian`). */
  get osId() { return this.#text('os.id'); }
  /** os-release's `VERSION_ID` (`12`; empty on Debian testing). */
  get osVersionId() { return this.#text('os.version_id'); }
  /** os-release's `VERSION_CODENAME` (`bookworm`). */
  get osVersionCodename() { return this.#text('os.version_codename'); }
  /** The architecture by Debian's name (`amd64`, `arm64`). */
  get arch() { return this.#text('arch'); }
  /** The running kernel's release. */
  get kernelRelease() { return this.#text('kernel.release'); }
  /** Online logical CPUs; undefined when the host could not tell. */
  get cpus() { return this.#number('cpus'); }
  /** Total memory in MiB; undefined when the host could not tell. */
  get memoryMib() { return this.#number('memory_mib'); }
  /** systemd's version number (`252`); undefined when systemd did not say. */
  get systemdVersion() { return this.#number('systemd.version'); }
  /** The policy host's version. */
  get hostVersion() { return this.#text('host.version'); }
}

export const MISSING_SETTINGS = 'no settings given: run with --settings FILE (JSON)';

/**
 * The settings could not be read: none were given, or they are not JSON.
 * `line` and `column` (1-based) say where, when the parser's message tells.
 */
export class SettingsError extends Error {
  constructor(message, { line, column } = {}) {
    super(message);
    this.name = 'SettingsError';
    this.line = line;
    this.column = column;
  }
}

/**
 * Where a JSON.parse error says the problem is, as 1-based line and column.
 * Engines tell it differently: QuickJS (inside the component) in the stack
 * (`at <input>:2:10`), newer V8 in the message (`line 2 column 10`), Node
 * 20's V8 as an offset (`at position 17`) or not at all; each is tried.
 */
function whereInJson(error, source) {
  const message = String(error?.message ?? error);
  const lineColumn = /line (\d+) column (\d+)/.exec(message)
    ?? /<input>:(\d+):(\d+)/.exec(String(error?.stack ?? ''));
  if (lineColumn) return { line: Number(lineColumn[1]), column: Number(lineColumn[2]) };
  const position = /position (\d+)/.exec(message);
  if (!position) return {};
  const lines = source.slice(0, Number(position[1])).split('\n');
  return { line: lines.length, column: lines[lines.length - 1].length + 1 };
}

/**
 * The inputs of one run. The same inputs must give the same declaration:
 * the engine asks for it more than once in a run. Build one directly in
 * tests: `new Context({ settings: '{"extra": ["web"]}', facts: { role: 'db' } })`.
 */
export class Context {
  #settings;
  #facts;
  #noop;

  constructor({ settings, facts, noop = false } = {}) {
    if (settings !== undefined && settings !== null && typeof settings !== 'string') {
      throw new TypeError(`settings must be a string or undefined, not ${kind(settings)}`);
    }
    this.#settings = settings ?? undefined;
    this.#facts = facts instanceof Facts ? facts : new Facts(facts ?? []);
    this.#noop = Boolean(noop);
  }

  /** The settings document as text (`host run --settings FILE`), or undefined when the run was given none. */
  get settings() {
    return this.#settings;
  }

  /** The machine's facts and the operator's labels. */
  get facts() {
    return this.#facts;
  }

  /**
   * True in a noop (dry) run. The declaration contract does not carry it
   * (the engine makes no change in a noop run whatever is declared, and a
   * declaration must not depend on it), so a policy running as a component
   * always sees false; it is here for tests and for parity with the Rust SDK.
   */
  get noop() {
    return this.#noop;
  }

  /**
   * The settings parsed as JSON. Throws SettingsError when the run was given
   * no settings (check `settings === undefined` first to make them
   * optional), or when they are not JSON, with the line and column when the
   * engine's message gives them.
   */
  settingsJson() {
    if (this.#settings === undefined) throw new SettingsError(MISSING_SETTINGS);
    try {
      return JSON.parse(this.#settings);
    } catch (error) {
      const where = whereInJson(error, this.#settings);
      const at = where.line === undefined ? '' : ` at line ${where.line} column ${where.column}`;
      throw new SettingsError(`settings: not valid JSON${at}: ${error?.message ?? error}`, where);
    }
  }
}

/**
 * `text`, or its first `limit` characters followed by a line saying how
 * many were cut. The start is kept: a JavaScript stack begins with the
 * message and the frame that threw (a Python traceback ends with them, so
 * the Python SDK keeps the end).
 */
export function bounded(text, limit = ERROR_LIMIT) {
  if (text.length <= limit) return text;
  return `${text.slice(0, limit)}\n... (${text.length - limit} characters not shown)`;
}

/**
 * A thrown value as the author would read it: the stack when there is one,
 * preceded by the message when the engine's stack leaves it out.
 */
export function describe(error) {
  try {
    const head = String(error);
    const stack = error?.stack;
    if (typeof stack !== 'string' || stack === '') return head;
    return stack.includes(head) ? stack : `${head}\n${stack}`;
  } catch {
    return 'the policy threw a value that cannot be shown as text';
  }
}

/** `policy` in the shape the `declare` export returns (option none is null). */
export function toWire(policy) {
  return {
    services: policy.services.map((s) => ({
      name: s.name,
      ensure: s.ensure,
      enable: s.enable ?? null,
      subscribe: [...s.subscribe],
    })),
    leftOut: policy.leftOut.map((l) => ({ name: l.name, why: l.why })),
  };
}

/**
 * The `declare` export for `policyFn`; the policy module exports it as
 * `export const declare = declaration(policy);`.
 *
 * Whatever the policy function throws, or returns that is not a Policy,
 * becomes the declaration's error: componentize-qjs turns a string thrown
 * from an export returning `result` into its `err`. The text is the stack
 * (bounded, see ERROR_LIMIT), so the run's report shows the author where it
 * failed; the run then applies nothing.
 */
export function declaration(policyFn) {
  if (typeof policyFn !== 'function') {
    throw new TypeError(`declaration takes the policy function, not ${kind(policyFn)}`);
  }
  const name = policyFn.name || 'the policy function';
  return {
    declare(settings, facts) {
      try {
        const policy = policyFn(new Context({ settings, facts }));
        if (typeof policy?.then === 'function') {
          // The component runs the policy once, synchronously: nothing would await it.
          throw new TypeError(`${name} returned a Promise: a policy function must not be async`);
        }
        if (!(policy instanceof Policy)) {
          throw new TypeError(`${name} returned ${kind(policy)}, not a Policy`);
        }
        return toWire(policy);
      } catch (error) {
        throw bounded(describe(error));
      }
    },
  };
}
