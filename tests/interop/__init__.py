"""Interoperability tests against the reference implementation."""
