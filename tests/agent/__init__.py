"""Tests of `ownmem agent`: the agent process, its audit and its boundaries."""
