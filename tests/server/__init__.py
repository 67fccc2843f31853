"""Tests of the blind sync server."""
