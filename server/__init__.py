"""The blind sync server: stores ciphertext it cannot read, proves nothing it cannot verify.

It holds cells (SAIHM envelopes around ApertoMemory sealed objects), wrapped DEKs,
owner-signed vault metadata, the public receipt log and the erasure list.  It imports
no code that decrypts: only CBOR and public-key signature verification.
"""
