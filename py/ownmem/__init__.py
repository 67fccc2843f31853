"""ownmem: user-owned, end-to-end encrypted memory for AI agents."""

__version__ = "0.1.0"
