"""The sync wire's names and limits: the vault-name rule, field lengths, and the sizes and
times every request and answer is held to (the server enforces them, a device relies on them)."""
from __future__ import annotations

import re

VAULT_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
MAX_BATCH = 2000            # cells per push, receipts per erase
MAX_RECEIPTS = 128          # receipts per POST /receipts: 128 hex receipts (~7 KB each) fit in MAX_JSON
MAX_BODY = 32 << 20         # bytes per request body
MAX_JSON = 1 << 20          # bytes per JSON request body; it also bounds every hex field in one
MAX_ANSWER = MAX_BODY + (1 << 20)   # bytes a device reads of one answer (a page holds cells of pushes)
MAX_PAGE = 5000             # changes per pull page
MAX_PAGE_BYTES = 24 << 20   # bytes of cells per pull page
MAX_COUNTER = (1 << 63) - 1  # sequence numbers, versions, counts, times: 64-bit database integers
MAX_VERSION = (1 << 62) - 1  # a metadata version a device may expect (the next one still fits)
TOKEN_TTL = 900             # seconds a session credential lives
CHALLENGE_TTL = 60          # seconds a login challenge lives

SALT_LEN, KEY_LEN, ID_LEN, ED25519_SIG_LEN = 16, 32, 32, 64
HOLDER_PUB_LEN, HOLDER_SIG_LEN = 1952, 3309   # ML-DSA-65 public key and signature
WRAPPED_DEK_LEN = 40        # AES-KW of a 32-byte DEK
ROOT_WRAP_LEN = 40          # AES-KW of the 32-byte vault root (vault/rekey.py)
RECOVERY_RECORD_LEN = 160   # a recovery kit's public record (vault/recovery.py ``record``)


def valid_vault_name(name: str) -> bool:
    return bool(VAULT_NAME.fullmatch(name))   # not match(): "$" also matches before a final newline
