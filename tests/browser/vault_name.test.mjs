// One vault-name rule: the web form's check (web/js/format.js NAME_RE) and the sync server's
// (ownmem.wire.limits.valid_vault_name) give the same answer for every name of one table.  No browser:
//
//   node --test tests/browser/vault_name.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { NAME_RE } from '../../web/js/format.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const VENV_PY = path.join(ROOT, '.venv', 'bin', 'python');

const NAMES = [
  'alice', 'Alice', '.x', 'x.', '-a', '_a', 'a-b_c.d', '0', 'a', '', ' ', 'a b', 'alice\n', 'ali\u0441e',
  'é', 'a'.repeat(64), 'a'.repeat(65), '9lives', 'x/y', 'x..y', 'UPPER', 'mIxed', 'a$', '\u00e9t\u00e9',
];

test('the web form accepts exactly the vault names the sync server accepts', () => {
  const script = 'import json, sys\nfrom ownmem.wire.limits import valid_vault_name\n'
    + 'print(json.dumps([valid_vault_name(n) for n in json.load(sys.stdin)]))';
  const out = execFileSync(VENV_PY, ['-c', script], {
    input: JSON.stringify(NAMES),
    env: { ...process.env, PYTHONPATH: [path.join(ROOT, 'py'), ROOT].join(path.delimiter) },
  });
  const python = JSON.parse(String(out));
  const js = NAMES.map((n) => NAME_RE.test(n));
  for (const [i, name] of NAMES.entries()) {
    assert.equal(js[i], python[i], `${JSON.stringify(name)}: the web form says ${js[i]}, the server ${python[i]}`);
  }
  assert.ok(js.includes(true) && js.includes(false));
});
