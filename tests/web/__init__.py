"""Tests of the PWA's Python side and its stylesheet."""
