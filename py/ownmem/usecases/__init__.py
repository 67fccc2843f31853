"""The person's use cases, one function each, shared by the CLI, the web worker and the agent
service (above the vault and the protocol cores, below every front end)."""
