// The page's side of the vault worker (docs/web.md "Worker operations").
//
//   const vault = new VaultClient();
//   vault.on('synced', (e) => ...);          // worker events: loading, ready, kept, failed, synced, online
//   const { entries } = await vault.call('list', { include_unverified: true });
//
// One promise per request id.  Requests are sent one at a time, in order: the vault code
// in the worker is not written for two operations interleaving at its await points
// (add while list is half-way through IndexedDB), so the page never asks for that.
// Nothing here logs, stores or keeps the arguments: a passphrase passes through
// postMessage once and is forgotten with the request.

import { takeWorker, workerUrl } from './early.js';

/** @import { Call, ErrorInfo, Events, OpName } from '../types/protocol' */

export class VaultError extends Error {
  /**
   * @param {string} code
   * @param {string} message
   */
  constructor(code, message) {
    super(message);
    this.name = 'VaultError';
    this.code = code;
  }
}

// An unlock's or a create's Argon2id, on a thread of its own started the moment the passphrase
// is submitted (web/js/argon2-worker.js): the vault worker's thread may still be booting
// Pyodide, and would only start it then.  A create's salt is drawn here (public, 16 random
// bytes), an unlock's is read from IndexedDB by the helper.  -> args with `master` (and a
// create's `salt`), or without `master` if that fails (the vault worker then derives it
// itself).  The master secret is transferred on to the vault worker, so the page keeps no copy.
/**
 * @template {{ passphrase?: unknown, master?: Uint8Array, salt?: Uint8Array }} A
 * @param {A} args
 * @param {boolean} fresh a create: a new salt
 * @returns {Promise<A>}
 */
function withMaster(args, fresh) {
  if (fresh) args = { ...args, salt: crypto.getRandomValues(new Uint8Array(16)) };
  return derive(args.passphrase, args.salt).then((master) => (master ? { ...args, master } : args));
}

/**
 * Argon2id of `passphrase` on a helper thread (argon2-worker.js): with `salt`, or the stored
 * one without.  -> the master secret, or null if the helper failed (the vault worker then
 * derives it itself).
 * @param {unknown} passphrase
 * @param {Uint8Array | undefined} salt
 * @returns {Promise<Uint8Array | null>}
 */
function derive(passphrase, salt) {
  return new Promise((resolve) => {
    /** @type {Worker | undefined} */
    let helper;
    /** @param {unknown} master */
    const done = (master) => {
      mark('argon2-done');
      helper?.terminate();
      resolve(master instanceof Uint8Array ? master : null);
    };
    try {
      helper = new Worker(new URL('./argon2-worker.js', import.meta.url), { type: 'module' });
    } catch {
      done(null);
      return;
    }
    helper.addEventListener('message', (e) => done(e.data?.master));
    helper.addEventListener('error', (e) => {
      e.preventDefault();
      done(null);
    });
    mark('argon2-start');
    helper.postMessage({ passphrase, salt });
  });
}

// A passphrase change: Argon2id of the current passphrase (the stored salt), for the worker to
// check it, then of the new one with a fresh salt, one after the other (64 MiB each).
/**
 * @param {{ current: string, new: string }} args
 * @returns {Promise<{ current: string, new: string, current_master?: Uint8Array, master?: Uint8Array, salt?: Uint8Array }>}
 */
async function withChangeMasters(args) {
  const currentMaster = await derive(args.current, undefined);
  const salt = crypto.getRandomValues(new Uint8Array(16));
  const master = await derive(args.new, salt);
  return { ...args, ...(currentMaster ? { current_master: currentMaster } : {}), ...(master ? { master, salt } : {}) };
}

// Start-up marks on the page's timeline (performance.mark, "ownmem:" names; docs/web.md
// "Start-up"): the page's own steps here, the vault worker's as it sends them (its `marks`
// event, absolute times).  Only until the first list is answered, so a long session does not
// grow the timeline.
let marking = true;
/**
 * @param {string} name
 * @param {number} [at] the worker's absolute time (its performance.timeOrigin + startTime)
 */
function mark(name, at) {
  if (!marking) return;
  try {
    if (at === undefined) performance.mark(`ownmem:${name}`);
    else performance.mark(name, { startTime: at - performance.timeOrigin });
  } catch {
    // an engine without User Timing level 3 (mark with a startTime): no marks, nothing else changes
  }
}

/** @typedef {{ resolve: (result: any) => void, reject: (err: VaultError) => void, op: OpName }} Pending */
/** @typedef {(data: any) => void} Listener */
/** @typedef {{ passphrase?: unknown, master?: Uint8Array, salt?: Uint8Array, current_master?: Uint8Array }} SendArgs what #send reads of an op's args */

export class VaultClient {
  constructor() {
    /** @type {Worker} the vault worker (#start) */
    this.worker;
    this.next = 1;
    /** @type {Map<number, Pending>} */
    this.pending = new Map();
    /** @type {Map<string, Set<Listener>>} */
    this.listeners = new Map();
    /** @type {Promise<unknown>} */
    this.queue = Promise.resolve();
    this.#start();
  }

  #start() {
    // the worker index.html's first script started (early.js), else a new one
    const early = takeWorker();
    if (!early) mark('worker-new');
    const worker = early?.worker ?? new Worker(workerUrl(), { type: 'module' });
    this.worker = worker;
    /** @param {MessageEvent} e */
    const onMessage = (e) => { if (this.worker === worker) this.#receive(e.data); };
    /** @param {ErrorEvent} e */
    const onError = (e) => {
      // A worker that fails to load (a missing file, a CSP refusal) never answers.
      e.preventDefault();
      if (this.worker !== worker) return;
      const message = e.message || 'the vault worker could not start';
      this.#fail(new VaultError('worker', message));
      this.#emit('failed', { message });
    };
    worker.addEventListener('message', onMessage);
    worker.addEventListener('error', onError);
    // what it said before this client existed, once the caller has subscribed (app.js start)
    const events = early?.events ?? [];
    if (events.length) queueMicrotask(() => { for (const e of events) (e.type === 'error' ? onError : onMessage)(/** @type {any} */ (e)); });
  }

  /** A fresh worker (and with it a fresh Pyodide): everything the old one held is gone. */
  restart() {
    this.worker.terminate();
    this.#fail(new VaultError('restarted', 'the vault worker was restarted'));
    this.#start();
  }

  /**
   * Subscribe to worker events; returns the unsubscribe function.
   * @template {keyof Events} E
   * @param {E} event
   * @param {(data: Events[E]) => void} fn
   * @returns {() => void}
   */
  on(event, fn) {
    if (!this.listeners.has(event)) this.listeners.set(event, new Set());
    this.listeners.get(event)?.add(fn);
    return () => this.listeners.get(event)?.delete(fn);
  }

  /**
   * One operation; resolves with its result or rejects with a VaultError {code, message}.
   * The operations, their args and results: web/types/protocol.d.ts.
   * @type {Call}
   */
  call(op, args = {}) {
    const run = () => this.#send(op, /** @type {SendArgs} */ (args));
    const p = this.queue.then(run, run);
    this.queue = p.catch(() => {});
    return p;
  }

  /**
   * @param {OpName} op
   * @param {SendArgs} args
   * @returns {Promise<any>}
   */
  async #send(op, args) {
    if ((op === 'unlock' || op === 'create') && typeof args.passphrase === 'string' && !args.master) {
      args = await withMaster(args, op === 'create');
    } else if (op === 'passphrase_change' && !args.master) {
      args = /** @type {SendArgs} */ (await withChangeMasters(/** @type {any} */ (args)));
    }
    const id = this.next++;
    mark(`${op}-sent`);
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, op });
      try {
        const secrets = [args.master, args.current_master].filter((m) => m instanceof Uint8Array);
        this.worker.postMessage({ id, op, args }, secrets.map((m) => /** @type {Uint8Array} */ (m).buffer));
      } catch (err) {
        this.pending.delete(id);
        reject(new VaultError('bad_request', 'the request could not be sent to the vault worker'));
      }
    });
  }

  /**
   * An answer ({id, ok, result or error}) or an event ({event, ...}, no id) from the worker.
   * @param {{ id: number, ok?: boolean, result?: unknown, error?: ErrorInfo, event?: string,
   *           marks?: [string, number][] } | null} msg
   */
  #receive(msg) {
    if (!msg || typeof msg !== 'object') return;
    if (msg.event === 'marks') {
      for (const [name, at] of msg.marks || []) mark(name, at);
      return;
    }
    if (msg.event) {
      this.#emit(msg.event, msg);
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    this.pending.delete(msg.id);
    mark(`${p.op}-answered`);
    if (p.op === 'list') marking = false;
    if (msg.ok) p.resolve(msg.result);
    else p.reject(new VaultError(msg.error?.code || 'error', msg.error?.message || 'the operation failed'));
  }

  /**
   * @param {string} event
   * @param {unknown} data
   */
  #emit(event, data) {
    for (const fn of this.listeners.get(event) || []) {
      try {
        fn(data);
      } catch (err) {
        // a listener's bug must not stop the others; report without any payload
        reportError(err);
      }
    }
  }

  /** @param {VaultError} err */
  #fail(err) {
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
  }
}
