// Build step (build.py `_compress`): the bundle's precompressed copies, FILE.br (Brotli, the
// highest quality) and FILE.gz (gzip -9), which the server sends by the request's
// Accept-Encoding (server/web.py).  A copy is written only where it saves at least a tenth:
// an already compressed file (a wheel, the deflated standard library) is sent as it is.
// Node's own zlib: no dependency beyond node.  Results are cached by input in CACHE_DIR, as
// Brotli's best quality takes about half a minute over Pyodide's 9.6 MB engine.
//
//   node web/compress.mjs CACHE_DIR DIR      (every file under DIR)
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';

const MIN_SIZE = 1024;      // below this the headers outweigh the saving
const MAX_RATIO = 0.9;

const [cacheDir, dir] = process.argv.slice(2);
if (!cacheDir || !dir) {
  console.error('usage: node web/compress.mjs CACHE_DIR DIR');
  process.exit(2);
}
const files = fs.readdirSync(dir, { recursive: true, withFileTypes: true })
  .filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name)).sort();
fs.mkdirSync(cacheDir, { recursive: true });

const ENCODERS = {
  br: (/** @type {Buffer} */ b) => zlib.brotliCompressSync(b, { params: {
    [zlib.constants.BROTLI_PARAM_QUALITY]: zlib.constants.BROTLI_MAX_QUALITY,
    [zlib.constants.BROTLI_PARAM_LGWIN]: 24,
    [zlib.constants.BROTLI_PARAM_SIZE_HINT]: b.length,
  } }),
  gz: (/** @type {Buffer} */ b) => zlib.gzipSync(b, { level: 9 }),
};

let written = 0;
for (const file of files) {
  const data = fs.readFileSync(file);
  if (data.length < MIN_SIZE) continue;
  const digest = crypto.createHash('sha256').update(data).digest('hex');
  for (const [ext, encode] of Object.entries(ENCODERS)) {
    const cached = path.join(cacheDir, `${digest}.${ext}`);
    let out;
    if (fs.existsSync(cached)) {
      out = fs.readFileSync(cached);
    } else {
      out = encode(data);
      const tmp = `${cached}.${process.pid}`;
      fs.writeFileSync(tmp, out);
      fs.renameSync(tmp, cached);     // complete files only in the cache
    }
    if (out.length <= data.length * MAX_RATIO) {
      fs.writeFileSync(`${file}.${ext}`, out);
      written++;
    }
  }
}
console.log(`compress: ${written} precompressed copies of ${files.length} files`);
