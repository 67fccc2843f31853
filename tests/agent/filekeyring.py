"""A keyring backend for the tests: the OS keyring's interface over a JSON file the test names
(PYTHON_KEYRING_BACKEND=filekeyring.FileKeyring, OWNMEM_TEST_KEYRING_FILE=path)."""
from __future__ import annotations

import json
import os

from keyring.backend import KeyringBackend


class FileKeyring(KeyringBackend):
    priority = 1

    def _load(self) -> dict[str, str]:
        try:
            with open(os.environ["OWNMEM_TEST_KEYRING_FILE"]) as f:
                return dict(json.load(f))
        except FileNotFoundError:
            return {}

    def get_password(self, service: str, username: str) -> str | None:
        return self._load().get(f"{service}\n{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        d = self._load()
        d[f"{service}\n{username}"] = password
        with open(os.environ["OWNMEM_TEST_KEYRING_FILE"], "w") as f:
            json.dump(d, f)

    def delete_password(self, service: str, username: str) -> None:
        d = self._load()
        d.pop(f"{service}\n{username}", None)
        with open(os.environ["OWNMEM_TEST_KEYRING_FILE"], "w") as f:
            json.dump(d, f)
