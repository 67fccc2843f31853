"""ownmem in the browser: the Pyodide side of the web app (docs/web.md).

``provider.BrowserProvider`` is the crypto provider backed by ``web/js/glue.js``
(WebCrypto, hash-wasm, @noble/post-quantum); ``selftest.run`` runs the normative
vectors with whatever provider is installed, so the app and the browser tests
check the same things the CPython suite does.
"""
