// The Shares screen's Offer form: share some of this vault's own memories with another
// person's holder ID (the worker's share_offer, which is vault.sharing.share: the same code as
// `ownmem share create`), and the share link that brings the form up prefilled.
//
// The link, https://HOST/#share-with=HOLDERID, carries only the public holder ID of the person
// who gave it.  Opened in the other person's own app it fills in the form's "Their holder ID"
// and nothing else: the memories, the length of time and the Offer itself stay that person's
// choice, and the ID is checked against the server's directory before anything is offered.

import { el, errorText, oneLine, role, setBusy, showError } from '../dom.js';
import { excerpt, plural, PUBLIC_LOG_NOTE } from '../format.js';
import { entries, isUnlocked, on } from '../state.js';
import { showView } from '../nav.js';
import { call } from '../vault.js';

/** @import { Entry } from '../../types/protocol' */

/** What the public log shows of this vault, said before the first share (the Shares screen's
 * header and the Offer form) and after creation (welcome.js may import it). */
const LINK_KEY = 'share-with';

/** @type {Record<string, [number, string][]>} what each mode may last (ownmem.web.shares.EXPIRY_CHOICES) */
const EXPIRY = {
  temporary: [[86400, '24 hours from now'], [8 * 3600, '8 hours from now'], [3600, '1 hour from now']],
  permanent: [[0, 'When I stop sharing']],
  syndicate: [[0, 'When I stop sharing'], [7 * 86400, 'In a week'], [30 * 86400, 'In 30 days']],
};

/**
 * A holder ID as a person types or pastes it (an optional 0x, spaces, or the share link
 * itself) -> the ID, or what is wrong with it in plain words.  The worker checks it again.
 * @param {string} text
 * @returns {{ holder: string } | { error: string }}
 */
export function holderFromText(text) {
  let t = text.trim();
  const at = t.indexOf(`#${LINK_KEY}=`);
  if (at >= 0) t = t.slice(at + LINK_KEY.length + 2);
  t = t.replace(/\s+/g, '').replace(/^0x/i, '').toLowerCase();
  if (!t) return { error: 'Type or paste their holder ID, or the link they sent you.' };
  if (/[^0-9a-f]/.test(t)) {
    return { error: 'That is not a holder ID: it has characters other than the digits 0-9 and the letters a-f. Copy it again from their Shares screen.' };
  }
  if (t.length !== 64) {
    return { error: `That is not a whole holder ID: it has ${plural(t.length, 'character')}, a holder ID has 64. Copy it again from their Shares screen.` };
  }
  return { holder: t };
}

/** @param {string} holder this vault's holder ID -> the link that opens the Offer form with it */
export function shareLink(holder) {
  return `${location.origin}${location.pathname}#${LINK_KEY}=${holder}`;
}

// A share link opened: its holder ID waits here until the vault is open, then the Shares
// screen shows with the form filled in.  The link leaves the address bar at once (a reload or
// a bookmark does not bring the form back).
/** @type {string | null} */
let pending = null;

function takeLink() {
  const m = /^#share-with=([^&]*)$/.exec(location.hash);
  if (!m) return false;
  pending = decodeURIComponent(m[1] || '').slice(0, 200);
  history.replaceState(null, '', location.pathname + location.search);
  return true;
}

/** The holder ID a link brought, once (null: none). */
export function takePendingHolder() {
  const h = pending;
  pending = null;
  return h;
}

/** @type {() => void} the open form's list again, after a re-read of the memories */
let refreshOpen = () => {};
on('listing', () => refreshOpen());

/** @returns {Entry[]} this vault's own memories: only those can be shared (vault.sharing) */
function ownMemories() {
  return entries().filter((e) => e.trust === 'self');
}

/**
 * Wire the Offer form of the Shares screen.
 * @param {HTMLElement} node the screen
 * @param {(contractId: string) => void} offered after an offer is made
 * @returns {{ open: (holder?: string | null) => void }}
 */
export function wireOffer(node, offered) {
  const form = /** @type {HTMLFormElement} */ (role(node, 'offer-form'));
  const opener = /** @type {HTMLButtonElement} */ (role(node, 'offer-open'));
  const err = role(form, 'offer-error');
  const els = /** @type {{ to: HTMLInputElement, tag: HTMLSelectElement, mode: HTMLSelectElement, expiry: HTMLSelectElement }} */ (
    /** @type {unknown} */ (form.elements));
  const listEl = role(form, 'offer-list');
  const countEl = role(form, 'offer-count');
  role(form, 'offer-log-note').textContent = PUBLIC_LOG_NOTE;
  /** @type {Set<string>} */
  const chosen = new Set();

  const counted = () => {
    countEl.textContent = chosen.size ? `${chosen.size === 1 ? '1 memory' : `${chosen.size} memories`} chosen.` : 'No memory chosen yet.';
  };
  const shown = () => ownMemories().filter((e) => !els.tag.value || e.tags.includes(els.tag.value));
  const renderList = () => {
    const mine = shown();
    listEl.replaceChildren(...(mine.length ? mine.map((e) => {
      const box = el('input', { type: 'checkbox', value: e.id, 'data-testid': 'offer-memory', checked: chosen.has(e.id) });
      box.addEventListener('change', () => {
        if (box.checked) chosen.add(e.id); else chosen.delete(e.id);
        counted();
      });
      return el('li', {}, el('label', { class: 'check' }, box, el('span', { text: excerpt(e.content, 120) })));
    }) : [el('li', { class: 'muted', text: 'You have no memory of your own to share yet: add one first.' })]));
    counted();
  };
  const fillTags = () => {
    const tags = [...new Set(ownMemories().flatMap((e) => e.tags))].sort();
    const keep = els.tag.value;
    els.tag.replaceChildren(el('option', { value: '', text: `All my memories (${ownMemories().length})` }),
      ...tags.map((t) => el('option', { value: t, text: `Tagged ${t}` })));
    els.tag.value = tags.includes(keep) ? keep : '';
  };
  const fillExpiry = () => {
    els.expiry.replaceChildren(...(EXPIRY[els.mode.value] || []).map(([s, text]) => el('option', { value: String(s), text })));
    els.expiry.disabled = els.expiry.options.length < 2;
  };
  refreshOpen = () => {
    if (form.isConnected && !form.hidden) {
      fillTags();
      renderList();
    }
  };
  els.tag.addEventListener('change', renderList);
  els.mode.addEventListener('change', fillExpiry);
  role(form, 'offer-all').addEventListener('click', () => {
    for (const e of shown()) chosen.add(e.id);
    renderList();
  });

  const setOpen = (/** @type {boolean} */ open) => {
    form.hidden = !open;
    opener.hidden = open;
    opener.setAttribute('aria-expanded', String(open));
  };
  opener.addEventListener('click', () => open());
  role(form, 'offer-cancel').addEventListener('click', () => {
    setOpen(false);
    opener.focus();
  });

  /** @param {string | null} [holder] a holder ID to fill in (a share link's) */
  function open(holder) {
    fillTags();
    fillExpiry();
    renderList();
    showError(err, '');
    setOpen(true);
    if (holder != null) {
      els.to.value = holder;
      const got = holderFromText(holder);
      if ('error' in got) showError(err, `The link you opened does not hold a valid holder ID. ${got.error}`);
    }
    (holder ? /** @type {HTMLElement} */ (form.querySelector('[data-testid="offer-memory"]') || els.to) : els.to).focus();
  }

  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    showError(err, '');
    const got = holderFromText(els.to.value);
    if ('error' in got) {
      showError(err, got.error);
      els.to.setAttribute('aria-invalid', 'true');
      els.to.focus();
      return;
    }
    els.to.removeAttribute('aria-invalid');
    if (!chosen.size) {
      showError(err, 'Choose at least one memory to share.');
      return;
    }
    setBusy(form, true);
    try {
      const mode = /** @type {'temporary' | 'permanent' | 'syndicate'} */ (els.mode.value);
      const made = await call('share_offer', { memories: [...chosen], to: got.holder, mode, expires_in: Number(els.expiry.value) });
      chosen.clear();
      els.to.value = '';
      setOpen(false);
      offered(made.contract_id);
    } catch (ex) {
      showError(err, offerError(ex));
    } finally {
      setBusy(form, false);
      fillExpiry();
    }
  });
  return { open };
}

/**
 * The worker's refusal in words that say what to do.
 * @param {unknown} ex
 */
function offerError(ex) {
  const text = oneLine(errorText(ex));
  if (/is registered on this server/.test(text)) {
    return 'No vault with this holder ID uses this server. Check the ID with the other person: you can share only with a vault on the same server as yours.';
  }
  if (/cannot share with yourself/.test(text)) return 'That is your own holder ID: ask the other person for theirs.';
  return `Could not share: ${text}`;
}

takeLink();
window.addEventListener('hashchange', () => {
  if (takeLink() && isUnlocked()) showView('shares');
});
// the vault opened (its status read) with a link waiting: to the form
on('status', () => {
  if (pending !== null && isUnlocked()) showView('shares');
});
