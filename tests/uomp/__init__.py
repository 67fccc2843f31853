"""Tests of UOMP: tokens, manifests, the guard, audit, records."""
