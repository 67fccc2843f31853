// Build step (build.py `_compile_python`): Python bytecode for the web bundle, made by
// Pyodide's own interpreter under node, so the browser does not compile Python source
// at every start (docs/web.md "Build output").  The host's Python may be another version
// than Pyodide's; bytecode is only valid for the interpreter version that made it.
//
//   node web/pycompile.mjs PYODIDE_DIR stdlib:IN.zip:OUT.zip wheel:IN.whl:OUT.whl ...
//
//   stdlib  every .py of Pyodide's python_stdlib.zip becomes a sourceless .pyc (the zip
//           importer prefers .pyc); other members are kept.
//   wheel   every .py keeps its source and gains __pycache__/NAME.<cache_tag>.pyc next to
//           it (listed in RECORD), so tracebacks still show the ownmem source lines.
//
// The .pyc files are unchecked hash-based (PEP 552): the importer uses them without
// comparing them with a source file or a timestamp, so they are the same bytes on every
// build of the same input.
//
// Both zips are written stored, not deflated: the server sends them Brotli-compressed
// (web/compress.mjs), which over the whole archive is far smaller than deflate member by
// member (the standard library 4.5 -> 2.9 MB over the network, the ownmem wheel 1.8 -> 1.0
// MB), and the browser then reads members without inflating them (the zip importer, the
// vault worker's unzip).
import fs from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';

const [pyodideDir, ...jobs] = process.argv.slice(2);
if (!pyodideDir || !jobs.length) {
  console.error('usage: node web/pycompile.mjs PYODIDE_DIR KIND:IN:OUT ...');
  process.exit(2);
}
const { loadPyodide } = await import(pathToFileURL(path.join(pyodideDir, 'pyodide.mjs')).href);
const py = await loadPyodide({ indexURL: path.resolve(pyodideDir) + path.sep });

const COMPILE = `
import base64, hashlib, importlib.util, sys, zipfile
from importlib._bootstrap_external import _code_to_hash_pyc

EPOCH = (1980, 1, 1, 0, 0, 0)

def pyc(source, filename):
    code = compile(source, filename, "exec", dont_inherit=True)
    return bytes(_code_to_hash_pyc(code, importlib.util.source_hash(source), checked=False))

def member(name, data, like=None):
    info = zipfile.ZipInfo(name, date_time=like.date_time if like else EPOCH)
    info.external_attr = like.external_attr if like else 0o644 << 16
    info.compress_type = zipfile.ZIP_STORED
    return info, data

def stdlib(src, dst):
    # where Pyodide mounts the zip: compiled-in file names then match the real ones
    root = next(p for p in sys.path if p.endswith(".zip"))
    out, n = [], 0
    with zipfile.ZipFile(src) as z:
        for info in z.infolist():
            data = z.read(info)
            if info.filename.endswith(".py"):
                try:
                    out.append(member(info.filename + "c", pyc(data, f"{root}/{info.filename}"), info))
                    n += 1
                    continue
                except SyntaxError:
                    pass   # not importable either way (a test fixture, say): keep it as it is
            out.append(member(info.filename, data, info))
    write(dst, out)
    return n

def record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"

def wheel(src, dst):
    import site
    root = site.getsitepackages()[0]
    tag = sys.implementation.cache_tag
    out, added, record = [], [], None
    with zipfile.ZipFile(src) as z:
        for info in z.infolist():
            data = z.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                record = (info, data)
                continue
            out.append(member(info.filename, data, info))
            if info.filename.endswith(".py"):
                folder, _, base = info.filename.rpartition("/")
                name = f"{folder}/__pycache__/{base[:-3]}.{tag}.pyc" if folder else f"__pycache__/{base[:-3]}.{tag}.pyc"
                code = pyc(data, f"{root}/{info.filename}")
                out.append(member(name, code, info))
                added.append(record_line(name, code))
    if record is None:
        raise SystemExit(f"{src}: a wheel without RECORD")
    info, data = record
    lines = data.decode().splitlines()
    own = [l for l in lines if l.split(",", 1)[0] == info.filename]
    rest = [l for l in lines if l.split(",", 1)[0] != info.filename]
    out.append(member(info.filename, ("\\n".join(rest + added + own) + "\\n").encode(), info))
    write(dst, out)
    return len(added)

def write(dst, members):
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_STORED) as z:
        for info, data in members:
            z.writestr(info, data)
`;
py.runPython(COMPILE);

for (const job of jobs) {
  const [kind, src, dst] = job.split(':');
  if (!['stdlib', 'wheel'].includes(kind) || !src || !dst) {
    console.error(`pycompile: bad job ${JSON.stringify(job)} (KIND:IN:OUT, KIND stdlib or wheel)`);
    process.exit(2);
  }
  py.FS.writeFile('/tmp/in.zip', fs.readFileSync(src));
  const n = py.globals.get(kind)('/tmp/in.zip', '/tmp/out.zip');
  fs.writeFileSync(dst, py.FS.readFile('/tmp/out.zip'));
  console.log(`pycompile: ${path.basename(src)}: ${n} module(s) compiled by Pyodide ${py.version}`);
}
