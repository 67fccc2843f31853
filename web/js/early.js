// The vault worker, started by the page's first script (index.html), before the page's own
// modules have loaded: the worker's boot (Pyodide, the wheel, the vault modules) is the longest
// step of a start and needs nothing from them.  client.js takes it with takeWorker(), along
// with what it said meanwhile.  Nothing else here: this file must load in one request.

// ?jspi=0 on the page forces the vault worker's path without WebAssembly JSPI (worker.js).
export function workerUrl() {
  const url = new URL('./worker.js', import.meta.url);
  if (new URLSearchParams(self.location.search).get('jspi') === '0') url.search = '?jspi=0';
  return url;
}

/** @type {{ worker: Worker, events: Event[], keep: (e: Event) => void } | null} */
let early = null;
try {
  performance.mark('ownmem:worker-new');
  const worker = new Worker(workerUrl(), { type: 'module' });
  /** @type {Event[]} */
  const events = [];
  /** @param {Event} e */
  const keep = (e) => {
    if (e.type === 'error') e.preventDefault();
    events.push(e);
  };
  worker.addEventListener('message', keep);
  worker.addEventListener('error', keep);
  early = { worker, events, keep };
} catch {
  // no module workers here: client.js tries again and reports it
}

/** The worker started above with the events it sent so far, once; then null. */
export function takeWorker() {
  const taken = early;
  early = null;
  if (!taken) return null;
  taken.worker.removeEventListener('message', taken.keep);
  taken.worker.removeEventListener('error', taken.keep);
  return { worker: taken.worker, events: taken.events };
}
