"""Tests of SAIHM: check_cell, the contract, the transparency log."""
