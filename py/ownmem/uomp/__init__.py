"""UOMP draft-00 on `ownmem agent`: capability tokens, sessions, the Memory Guard, audit."""
