"""UOMP draft-00 on ownmem (manifests, staging, records import, sessions, capability tokens, the Memory Guard, audit)."""
