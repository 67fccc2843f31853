// The vault worker's protocol, typed once (docs/web.md "Worker operations"): each operation's
// name, the args the page sends and the result it gets back.  client.js's call() and
// worker.js's call() take their types from here, so a misspelt operation or a wrong argument
// is a type error in every caller; tests/web/test_worker_protocol.py checks that
// PythonOperations names exactly the op_* methods of ownmem.web.api.App.

/** One enrolled device of the vault (ownmem.web.api ``op_devices``; docs/decisions.md "15.7"). */
export interface DeviceRow {
  id: string;
  label: string;
  added_at: number;
  last_sync: number;
  this_device: boolean;
}

/** A memory as the list shows it (Entry.to_json, with the worker's agent_id and agent_confirmed). */
export interface Entry {
  id: string;
  content: string;
  tags: string[];
  type: string;
  confidence: number;
  scope: string;
  trust: string;
  authorship: string;
  author_key_id: string | null;
  created: number | null;
  updated: number | null;
  supersedes: string | null;
  superseded_by: string[];
  source: string | null;
  schema_violations: string[];
  agent_id: string | null;
  agent_confirmed: boolean;
}

/** A staged agent write: its Entry with the agent that wrote it. */
export interface StagedWrite extends Entry {
  agent_id: string;
}

export interface SyncResult {
  pushed: number;
  pulled: number;
  erased_remote: number;
  erased_here: number;
  pending: number;
  /** what the server sent that this device did not apply, one sentence each */
  refusals: string[];
}

export interface StatusResult {
  pending: number;
  last_sync: number | null;
  server: string | null;
  name: string | null;
  unlocked: boolean;
  count: number;
}

/** The crypto provider's feature detection (glue.js and glue-sync.js features, ownmem.web.provider):
 *  which implementation does each primitive ("webcrypto", "noble", ...). */
export interface Provider {
  jspi?: boolean;
  argon2?: string;
  mldsa?: string;
  ed25519?: string;
  x25519?: string;
  aes?: string;
  hkdf?: string;
  sync_steps?: unknown;
  [feature: string]: unknown;
}

export interface BootResult {
  vault: { count: number; server: string | null; name: string | null; salt: string } | null;
  provider: Provider;
}

export interface ListResult {
  entries: Entry[];
  refused: number;
  conflicts: string[][];
  scopes: string[];
}

export interface ImportResult {
  imported: number;
  imported_ids: string[];
  skipped: [string, string][];
  refused: [string, string][];
  scopes_added: string[];
  scopes_refused: [string, string][];
  keys_added: string[];
  keys_held_back: string[];
  identity_adopted: boolean;
  metadata_signed: boolean;
}

/** ReceiptView.to_json: one receipt of the public log, checked here. */
export interface Receipt {
  object_id: string;
  cell_id: string;
  receipt_id: string;
  operation: string;
  timestamp: number | null;
  index: number | null;
  verified: boolean;
  problem: string | null;
}

export interface LogStatus {
  origin: string;
  size: number;
  root_hash: string;
  checked_at: number | null;
  problem: string | null;
  compared_devices: number;
}

/** ownmem.web.shares.share_json: a contract offered by this vault or to it. */
export interface Share {
  contract_id: string;
  holder_id: string;
  holder_name: string | null;
  grantee: string;
  state: string;
  revoked: boolean;
  expired: boolean;
  active: boolean;
  mode: string;
  expires_at: number | null;
  timestamp: number;
  cells: string[];
  memories: string[];
}

/** ownmem.web.shares.shared_json: a memory shared with this vault, fetched now. */
export interface Shared {
  cell_id: string;
  object_id: string;
  content: string;
  tags: string[];
  type: string;
  created: number | null;
  owner_holder_id: string;
  owner_name: string | null;
  contract_id: string;
}

/** What a session or an agent may read or write (UOMP scopes). */
export interface Scope {
  tags?: string[];
  keys?: string[];
  deny_tags?: string[];
  deny_keys?: string[];
}

/** PublishedSession.to_json: the session record as published, its status as of now. */
export interface Session {
  session_id: string;
  agent_id: string;
  agent_name?: string;
  status: string;
  created_at?: number;
  expires_at?: number;
  closed_at?: number | null;
  granted?: string[];
  scopes?: { read?: Scope; write?: Scope };
  aggregation_only?: boolean;
  task_bound?: boolean;
  allowed_fields?: string[];
  max_read_queries?: number | null;
  max_write_queries?: number | null;
  deletion_proof?: { required?: boolean; accepted?: string[]; missing?: string[] };
  published_at?: number;
  seq?: number;
  /** the session's kind: "saihm" an MCP host on the agent's machine, "mcp-remote" a remote MCP host
   * (OAuth), absent a UOMP agent (ownmem.uomp.usage.KIND_WORDS) */
  binding?: string;
  /** a remote host's OAuth client id, when the record carries it */
  client_id?: string;
  record_id: string;
  revocation_sent: boolean;
  [field: string]: unknown;
}

/** A registered agent's record. */
export interface Agent {
  agent_id: string;
  agent_name?: string;
  version?: string;
  publisher?: string;
  publisher_verified?: boolean;
  publisher_summary?: string;
  retention?: unknown;
  retention_text?: string;
  retention_warning?: string | null;
  requested?: { read?: Scope; write?: Scope };
  [field: string]: unknown;
}

/** An agent's forget or share request waiting for the person (agent_requests.to_json). */
export interface AgentRequest {
  id: string;
  agent_id: string;
  /** forget | share */
  kind: string;
  created: number;
  objects: string[];
  cells: string[];
  /** a share request's terms (ShareTerms.to_json) */
  share: { grantees: string[]; type: string; scope: string; expiryEpoch: string | null } | null;
  /** what confirming would do, one sentence */
  description: string;
}

/** One audit entry (the UOMP 18.1 fields) with the batch it came in. */
export interface AuditRow {
  session_id: string;
  agent_id: string;
  action: string;
  allowed: boolean;
  /** ISO 8601 */
  timestamp: string;
  reason: string;
  key?: string | null;
  tag?: string | null;
  tags?: string[];
  batch: { stream: string; seq: number; problem: string | null; anchor_checked: boolean };
  [field: string]: unknown;
}

export interface AuditResult {
  entries: AuditRow[];
  /** session id -> Unix time of its newest audit entry of the agent's own (ownmem.uomp.usage.last_use) */
  last_use: Record<string, number>;
  warnings: string[];
  batches: number;
  anchored: number;
}

/** What an agent write or request confirmation or discard did, synced at once or not. */
export interface SyncedChange {
  synced: boolean;
  problem: string | null;
  pending: number;
}

/** ownmem.uomp.records.Checked.to_json: one record of a records file. */
export interface RecordRow {
  number: number;
  key: string | null;
  value: unknown;
  tags: string[];
  sensitivity: string | null;
  sensitivity_defaulted: boolean;
  action: string;
  problems: string[];
}

/** The page's choices for a records file (the CLI's records import options). */
export interface RecordsArgs {
  data: Uint8Array;
  name?: string;
  format?: string;
  map?: string[];
  sensitivity?: string;
  replace?: boolean;
}

export interface RecordsPreview {
  format: string;
  fields: [string, string][];
  rows: RecordRow[];
  total: number;
  valid: number;
  replacing: number;
  missing_sensitivity: number[];
  problems: [number, string][];
  refused: boolean;
  digest: string;
}

/** ownmem.web.api.App.op_import_from: a preview of memories from ChatGPT, Claude or Gemini, or what was written. */
export interface ImportFromResult {
  source: string;
  shape: "json" | "html" | "text";
  tag: string;
  new: number;
  /** [where, text] of the first memories it would write */
  first: [string, string][];
  skipped: number;
  /** [where, text, why] of the first 200 skipped */
  skips: [string, string, string][];
  digest: string;
  imported: number;
  ids: string[];
}

type Empty = Record<string, never>;

/** An operation: the args the page sends, the result it gets. */
/** An unlock slot as the page sees it (App.op_slots): ids and ref in hex, never the wrap. */
export interface UnlockSlot {
  id: string;
  kind: "recovery" | "passkey";
  label: string;
  ref: string;
  created: number;
}

interface Op<A, R> {
  args: A;
  result: R;
}

/** The operations ownmem.web.api answers (App.op_<name>), in docs/web.md's order. */
export interface PythonOperations {
  boot: Op<Empty, BootResult>;
  /** the page sends the passphrase with a fresh salt and its Argon2id master (client.js), else worker.js adds them */
  create: Op<{ passphrase: string; master?: Uint8Array; salt?: Uint8Array }, { key_id: string }>;
  /** master: the Argon2id output, when client.js derived it */
  unlock: Op<{ passphrase: string; master?: Uint8Array }, { count: number }>;
  login: Op<{ server: string; name: string; passphrase: string; master?: Uint8Array; label?: string }, SyncResult>;
  link: Op<{ server: string; name: string; label?: string }, { name: string }>;
  list: Op<{ include_unverified?: boolean }, ListResult>;
  add: Op<{ content: string; tags?: string[]; type?: string; confidence?: number; scope?: string },
    { id: string; entry: Entry }>;
  /** the list screen's search: the listed memories its filters admit that answer query, best first */
  search: Op<{ query: string; tag?: string; type?: string; scope?: string; trust?: string; include_unverified?: boolean },
    { ids: string[] }>;
  edit: Op<{ id: string; content?: string; tags?: string[]; type?: string; confidence?: number }, { id: string }>;
  resolve: Op<{ id: string }, { id: string }>;
  forget: Op<{ id: string }, { erased: number }>;
  import: Op<{ data: Uint8Array; accept_container_keys?: boolean; passphrase?: string }, ImportResult>;
  /** data: the .amem file (bytes cross postMessage in an ArrayBuffer of their own) */
  export: Op<Empty, { data: Uint8Array<ArrayBuffer>; count: number; memories: number; versions: number; other: number }>;
  sync: Op<Empty, SyncResult>;
  token: Op<Empty, { token: string; url: string }>;
  status: Op<Empty, StatusResult>;
  lock: Op<Empty, Empty>;
  /** the unlock slots (vault/slots.py), also while locked: the unlock screen offers its passkeys */
  slots: Op<Empty, { slots: UnlockSlot[] }>;
  /** ref: a passkey's credential id (b"" for recovery); secret: the slot secret (16+ bytes) */
  slot_add: Op<{ kind: "recovery" | "passkey"; label: string; ref: Uint8Array | string; secret: Uint8Array | string },
    UnlockSlot>;
  slot_remove: Op<{ slot_id: string }, Empty>;
  /** {} if the passphrase is this unlocked vault's, else wrong_passphrase (asked before a passkey is added) */
  passphrase_check: Op<{ passphrase: string }, Empty>;
  /** as unlock, with a slot's secret in place of the passphrase */
  unlock_slot: Op<{ slot_id: string; secret: Uint8Array | string }, { count: number }>;
  /** current_master: Argon2id of `current` (the stored salt); master: of `new`, with a fresh salt; client.js derives both */
  passphrase_change: Op<{ current: string; new: string; master?: Uint8Array; salt?: Uint8Array; current_master?: Uint8Array },
    { server: string | null; key_id: string; scopes: number }>;
  /** after a sync stopped with passphrase_changed: the passphrase set on another device */
  passphrase_update: Op<{ new: string }, SyncedChange>;
  /** a new recovery kit (the last one stops working): its 12 words, shown once */
  recovery_create: Op<Empty, { words: string[] }>;
  /** unlock with the kit's words, the new passphrase set at once, and a new kit */
  recovery_use: Op<{ words: string; passphrase: string }, { count: number; words: string[] }>;
  /** a browser with no vault: fetched with the vault name and the kit's words, the new passphrase
   *  set at once (here and on the server), a new kit, one sync */
  recovery_login: Op<{ server: string; name: string; words: string; passphrase: string; label?: string },
    SyncedChange & { words: string[]; refusals: string[] }>;
  receipts: Op<{ id: string },
    { receipts: Receipt[]; versions: number; cells: number; truncated: boolean; holder_id: string }>;
  log: Op<Empty, { status: LogStatus | null }>;
  shares: Op<Empty, { offered: Share[]; received: Share[]; refused: string[]; more: boolean; holder_id: string }>;
  shared: Op<Empty, { memories: Shared[]; refused: [string, string][] }>;
  share_offer: Op<{ memories: string[]; to: string; mode: "temporary" | "permanent" | "syndicate"; expires_in?: number },
    { contract_id: string; receipt_id: string; mode: string; expires_at: number; grantee: string; cells: number }>;
  share_answer: Op<{ id: string; action: "accept" | "decline" | "withdraw" }, { state: string }>;
  share_revoke: Op<{ id: string }, { revoked: boolean; receipt_id: string; already: boolean }>;
  agents: Op<Empty,
    { sessions: Session[]; agents: Agent[]; now: number; staged: StagedWrite[]; requests: AgentRequest[] }>;
  agent_revoke: Op<{ session_id: string }, SyncedChange & { session_id: string }>;
  devices: Op<Empty, { devices: DeviceRow[]; keeps: string }>;
  device_remove: Op<{ id: string; passphrase: string; new_passphrase?: string },
    { removed: string; label: string; new_passphrase: boolean; keeps: string }>;
  audit: Op<{ session?: string | null }, AuditResult>;
  staged_confirm: Op<{ id: string },
    SyncedChange & { id: string; kind?: string; erased?: boolean; contract_id?: string | null }>;
  staged_discard: Op<{ id: string }, SyncedChange & { erased: number }>;
  records_preview: Op<RecordsArgs, RecordsPreview>;
  records_import: Op<RecordsArgs & { digest: string },
    { imported: number; replaced: number; defaulted: number[]; sensitivity: string | null; ids: string[] }>;
  import_from: Op<{ source: string; data: Uint8Array; commit?: boolean; digest?: string }, ImportFromResult>;
  selftest: Op<{ vectors?: string }, { passed: number; failed: string[]; errors: Record<string, string> }>;
}

/** The operations worker.js answers itself, without Python. */
export interface WorkerOperations {
  /** is there a vault in this browser? (IndexedDB, while Pyodide still boots) */
  probe: Op<Empty, { vault: boolean }>;
}

export interface Operations extends PythonOperations, WorkerOperations {}

export type OpName = keyof Operations;
export type Args<K extends OpName> = Operations[K]["args"];
export type Result<K extends OpName> = Operations[K]["result"];

/** The arguments after the name: none where every arg may be left out. */
export type ArgsOf<K extends OpName> = {} extends Args<K> ? [args?: Args<K>] : [args: Args<K>];

/** The page's call: one operation, its result (or a VaultError). */
export type Call = <K extends OpName>(op: K, ...args: ArgsOf<K>) => Promise<Result<K>>;

/** A message from the page to the vault worker. */
export interface Request<K extends OpName = OpName> {
  id: number;
  op: K;
  args: Args<K>;
}

/** An error's answer: {code, message}, never a secret. */
export interface ErrorInfo {
  code: string;
  message: string;
}

/** The vault worker's answer to one request. */
export type Answer = { id: number; ok: true; result: unknown } | { id: number; ok: false; error: ErrorInfo };

/** The vault worker's events (the page's VaultClient.on). */
export interface Events {
  ready: {};
  failed: { message: string };
  synced: SyncResult & { reason: string };
  /** code: the failed sync's error code (passphrase_changed: the page asks for the new passphrase) */
  online: { online: boolean; message?: string; code?: string };
  progress: { op: string; done: number; total: number };
  /** the vault engine's files arriving at start (bytes, decoded): `total` from precache.json's sizes */
  loading: { loaded: number; total: number };
  /** the boot's copies of the engine's files are in the service worker's cache of this bundle (or were there) */
  kept: {};
}
