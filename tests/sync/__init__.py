"""Tests of sync: devices, a real blind server, a hostile one."""
