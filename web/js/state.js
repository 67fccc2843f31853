// The page's state, behind named accessors, so that who reads and who changes what can be
// found by name, and one place (endSession) drops every decrypted byte the page holds.
//
//   settings     idle minutes and the last vault name, in localStorage (never a secret)
//   session      unlocked or not, and a counter bumped by every unlock and lock: an answer
//                that arrives for an older session is dropped (isCurrent)
//   boot         what the worker's `boot` told (the vault, the crypto provider)
//   listing      the memories as the last `list` returned them (decrypted text: the only
//                copy the page keeps), their conflicts, how many were refused, the scopes
//   unverified   whether the person asked to see memories that cannot be authenticated
//                (ApertoMemory "Opening a sealed object": only on an explicit opt-in); for
//                this unlocked session only, so every unlock starts with them hidden
//   status       the worker's `status`: pending changes, last sync, server and name
//   connection   online or offline as the live sync last saw it, and a sync under way
//   refusals     what the syncs since the last clean one the person asked for did not
//                apply (SyncReport.refusals: an erasure the owner did not sign, ...)
//   view         the screen shown; editing: the memory whose card is an edit form
//
// Events (on/emit), so that this module and the loaders of vault.js need no view:
//   'open', 'lock'    a session begins or ends (views drop their caches on 'lock')
//   'view', 'status'  another screen, a new status (the top bar renders again)
//   'listing'         a whole new list; 'added': one new memory (the views render again)
//   'refusals'        the syncs' refusals changed (the sync status area shows them)
//   'passphrase-changed' a sync stopped: the passphrase was changed on another device (views/passphrase.js asks)

/** @import { BootResult, Entry, ListResult, Provider, StatusResult } from '../types/protocol' */
/**
 * What the page knows of the vault before `boot` answers (a login, a restore) or from it.
 * @typedef {{ vault?: Partial<NonNullable<BootResult['vault']>> | null, provider?: Provider }} BootInfo
 */

// ------------------------------------------------------------------ settings (never secrets)

const SETTINGS_KEY = 'ownmem.settings';
const DEFAULT_IDLE_MINUTES = 10;

function loadSettings() {
  /** @type {{ idleMinutes?: unknown, vaultName?: unknown }} */
  let s = {};
  try {
    s = JSON.parse(localStorage.getItem(SETTINGS_KEY) || '{}') || {};
  } catch {
    s = {};
  }
  const idle = Number(s.idleMinutes);
  return {
    idleMinutes: Number.isFinite(idle) && idle >= 1 ? Math.min(Math.round(idle), 1440) : DEFAULT_IDLE_MINUTES,
    vaultName: typeof s.vaultName === 'string' ? s.vaultName.slice(0, 64) : '',
  };
}

const settings = loadSettings();

function saveSettings() {
  const { idleMinutes, vaultName } = settings;
  try {
    localStorage.setItem(SETTINGS_KEY, JSON.stringify({ idleMinutes, vaultName }));
  } catch {
    // storage disabled: the settings last for this page only
  }
}

export const idleMinutes = () => settings.idleMinutes;
export const rememberedName = () => settings.vaultName;

/** @param {number} minutes */
export function setIdleMinutes(minutes) {
  settings.idleMinutes = minutes;
  saveSettings();
}

/** @param {string} name */
export function rememberName(name) {
  settings.vaultName = name;
  saveSettings();
}

// ------------------------------------------------------------------ events

/** @typedef {'open' | 'lock' | 'view' | 'status' | 'listing' | 'added' | 'refusals' | 'passphrase-changed'} StateEvent */

/** @type {Map<StateEvent, ((detail: any) => void)[]>} */
const listeners = new Map();

/**
 * @param {StateEvent} event
 * @param {(detail: any) => void} fn
 */
export function on(event, fn) {
  if (!listeners.has(event)) listeners.set(event, []);
  listeners.get(event)?.push(fn);
}

// Synchronous, and a listener's exception reaches the caller: a render that fails inside a
// refresh is reported by that refresh, as when it was called directly.
/**
 * @param {StateEvent} event
 * @param {unknown} [detail]
 */
export function emit(event, detail) {
  for (const fn of listeners.get(event) || []) fn(detail);
}

// ------------------------------------------------------------------ session

let unlocked = false;
let session = 0;
let view = 'memories';
/** @type {string | null} the memory whose card is an edit form */
let editing = null;
/** @type {BootInfo | null} */
let boot = null;

export const isUnlocked = () => unlocked;
export const currentSession = () => session;
export const isCurrent = (/** @type {number} */ s) => s === session;

export const bootInfo = () => boot;
/** @param {BootInfo | null} b */
export function setBootInfo(b) {
  boot = b;
}

export const currentView = () => view;
/** @param {string} v */
export function setView(v) {
  view = v;
  editing = null;
}

export const editingId = () => editing;
/** @param {string | null} id */
export function setEditing(id) {
  editing = id;
}

// ------------------------------------------------------------------ listing

/**
 * @typedef {{ entries: Entry[], byId: Map<string, Entry>, conflicts: string[][], inConflict: Set<string>,
 *             refused: number, scopes: string[], loaded: boolean }} Listing
 */
/** @type {Listing} */
let listing = {
  entries: [],
  byId: new Map(),
  conflicts: [],
  inConflict: new Set(),
  refused: 0,
  scopes: ['default'],
  loaded: false,
};

export const entries = () => listing.entries;
export const entryById = (/** @type {string} */ id) => listing.byId.get(id);
export const conflictGroups = () => listing.conflicts;
export const isInConflict = (/** @type {string} */ id) => listing.inConflict.has(id);
export const refusedCount = () => listing.refused;
export const scopeNames = () => listing.scopes;
export const isLoaded = () => listing.loaded;

let unverified = false;
export const showsUnverified = () => unverified;
/** @param {unknown} on */
export function setShowUnverified(on) {
  unverified = Boolean(on);
}

/**
 * A `list` result: the whole listing is replaced.
 * @param {Partial<ListResult>} r
 */
export function setListing(r) {
  const all = r.entries || [];
  const conflicts = (r.conflicts || []).filter((g) => g.length > 1);
  listing = {
    entries: all,
    byId: new Map(all.map((e) => [e.id, e])),
    conflicts,
    inConflict: new Set(conflicts.flat()),
    refused: r.refused || 0,
    scopes: r.scopes && r.scopes.length ? r.scopes : ['default'],
    loaded: true,
  };
  emit('listing');
}

// The list's order, as the vault sends it: newest first, then by id.
/**
 * @param {Entry} a
 * @param {Entry} b
 */
function listOrder(a, b) {
  return (b.created || 0) - (a.created || 0) || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/**
 * The vault answers an add with the new memory: it joins the list in its place.
 * @param {Entry} e
 */
export function insertEntry(e) {
  const all = listing.entries;
  const at = all.findIndex((x) => listOrder(e, x) < 0);
  all.splice(at < 0 ? all.length : at, 0, e);
  listing.byId.set(e.id, e);
  emit('added', e);
}

// ------------------------------------------------------------------ status, connection

/** @type {Pick<StatusResult, 'pending' | 'last_sync' | 'server' | 'name'>} */
let status = { pending: 0, last_sync: null, server: null, name: null };
/** @type {{ online: boolean | null, offlineReason: string, syncing: boolean }} */
const connection = { online: null, offlineReason: '', syncing: false };   // online null: not known yet

export const syncStatus = () => status;
export const isLinked = () => Boolean(status.server && status.name);
export const vaultName = () => status.name || boot?.vault?.name || settings.vaultName || 'My vault';

/**
 * The worker's `status` answer.
 * @param {Partial<StatusResult>} s
 */
export function setSyncStatus(s) {
  status = { pending: s.pending || 0, last_sync: s.last_sync || null, server: s.server || null, name: s.name || null };
  emit('status');
}

/** Where the vault syncs, as `boot` tells before the first `status`. */
/**
 * @param {string | null} server
 * @param {string | null} name
 */
export function setLink(server, name) {
  status.server = server;
  status.name = name;
}

/** A sync just ended well (the live loop's event): `pending` as it reported, if it did. */
/** @param {unknown} pending */
export function noteSynced(pending) {
  if (typeof pending === 'number') status.pending = pending;
  status.last_sync = Math.floor(Date.now() / 1000);
}

export const isOnline = () => connection.online;
export const offlineReason = () => connection.offlineReason;
export const isSyncing = () => connection.syncing;

/**
 * @param {boolean | null} online
 * @param {string} [reason]
 */
export function setOnline(online, reason = '') {
  connection.online = online;
  connection.offlineReason = reason;
}

/** @param {boolean} busy */
export function setSyncing(busy) {
  connection.syncing = busy;
}

// One sentence per change not applied, from the vault worker's own sync code; a bound on
// how many are kept, as a hostile server decides how many there are.
const MAX_REFUSALS = 200;
/** @type {{ count: number, sentences: string[] }} */
let refusals = { count: 0, sentences: [] };
export const syncRefusals = () => refusals;

/** A sync's refusals join those not dismissed yet. */
/** @param {unknown} list */
export function noteRefusals(list) {
  if (!Array.isArray(list) || !list.length) return;
  refusals = { count: refusals.count + list.length,
    sentences: [...refusals.sentences, ...list.map(String)].slice(-MAX_REFUSALS) };
  emit('refusals');
}

/** Dismissed, or a clean sync the person asked for: the warning goes. */
export function clearRefusals() {
  if (!refusals.count) return;
  refusals = { count: 0, sentences: [] };
  emit('refusals');
}

// ------------------------------------------------------------------ begin and end

/** The vault is open: a new session, on the memories screen, its list not read yet. */
export function beginSession() {
  unlocked = true;
  session++;
  view = 'memories';
  listing.loaded = false;
  unverified = false;
  connection.online = null;
  emit('open');
}

// Drop every decrypted byte the page holds (the views drop theirs, and their DOM, on
// 'lock'); the worker is asked to drop its keys after this.
export function endSession() {
  if (!unlocked) return false;
  unlocked = false;
  session++;
  listing = { ...listing, entries: [], byId: new Map(), conflicts: [], inConflict: new Set() };
  editing = null;
  unverified = false;
  refusals = { count: 0, sentences: [] };
  emit('lock');
  return true;
}
