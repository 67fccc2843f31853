"""`ownmem agent`: the person's custodial SAIHM operator (service.py: HTTP; operator.py: the
tools over the unlocked vault; recall_index.py: ranked recall; credentials.py: bearer
credentials; ownmem.cli.agent: the subcommands)."""
