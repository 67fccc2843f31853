"""Tests of the crypto primitives: CBOR, COSE, the provider."""
