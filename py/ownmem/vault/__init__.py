"""The local vault: unlocked once, stored in SQLite, exported and imported as `.amem`."""
from ownmem.vault.migration import MigrationReport, migrate_vault
from ownmem.vault.transfer import ImportReport, export_vault, import_file
from ownmem.vault.unlock import Vault
from ownmem.vault.vault import DEFAULT_SCOPE, Entry, Listing, UnlockedVault

__all__ = ["Vault", "UnlockedVault", "Entry", "Listing", "DEFAULT_SCOPE", "ImportReport", "export_vault",
           "import_file", "MigrationReport", "migrate_vault"]
