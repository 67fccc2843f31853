"""The sync protocol's wire (DESIGN.md "Sync"): every message between a device and the blind
server, typed, in modules by what they hold: ``limits`` (the vault-name rule, field lengths,
sizes and times), ``signed`` (the messages devices sign), ``errors`` (the server's error-code
registry), ``codec`` (how JSON fields and CBOR bodies are read and written), ``messages``
(vaults, sessions, metadata, cells and the change feed), ``publiclog`` (the public log's key,
proofs and witnesses) and ``shares`` (sharing between people).

Shared by the blind server and the sync client, and deliberately free of any code that
decrypts (the server imports it).  Each message is a frozen dataclass: ``encode()`` gives
what the wire carries (a JSON object, or CBOR bytes), ``parse()`` takes it back and refuses
anything malformed with one error, ``WireError``: a missing field, a wrong type, hex that is
not lower-case pairs, a wrong length, an integer out of range, a feed that goes backwards.
A device treats the server as hostile at every field (STYLE.md 15); the server answers a
request that fails its parse with 400 ``malformed``.
"""
