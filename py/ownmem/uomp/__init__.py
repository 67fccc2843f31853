"""UOMP draft-00 on ownmem (manifests, staging, records import, sessions, the Memory Guard)."""
