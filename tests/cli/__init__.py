"""Tests of the `ownmem` console script."""
