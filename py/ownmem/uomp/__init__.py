"""UOMP draft-00's pure rules: manifests, capability tokens, the Memory Guard's decisions, records, items,
control records, approvals (no I/O: the agent service in ownmem.agent uses them)."""
