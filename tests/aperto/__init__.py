"""Tests of the ApertoMemory containers, frames and migrations."""
