"""The login rule for devices (server/device_routes.py ``admission``), keys in and verdict out:
every combination a login can present, and what it comes to."""
from __future__ import annotations

import itertools

from server.device_routes import Admission, admission


def test_each_case_of_the_rule() -> None:
    a = Admission
    # a vault with no enrolled device: the sync key alone, as before devices existed
    assert admission(proof=None, enrolled=False, removed=False, vault_has_devices=False, enrolment=None) is a.LEGACY
    # once it has one, no device part is refused
    assert admission(proof=None, enrolled=False, removed=False, vault_has_devices=True,
                     enrolment=None) is a.DEVICE_REQUIRED
    # a device key that did not sign this challenge, whatever else it claims
    for enrolled, removed, has, enrol in itertools.product((False, True), (False, True), (False, True),
                                                           (None, False, True)):
        assert admission(proof=False, enrolled=enrolled, removed=removed, vault_has_devices=has,
                         enrolment=enrol) is a.BAD_PROOF
    # a removed key: refused even with a valid enrolment (it never comes back)
    for enrol in (None, False, True):
        assert admission(proof=True, enrolled=False, removed=True, vault_has_devices=True,
                         enrolment=enrol) is a.REMOVED
    assert admission(proof=True, enrolled=True, removed=False, vault_has_devices=True, enrolment=None) is a.DEVICE
    assert admission(proof=True, enrolled=True, removed=False, vault_has_devices=True, enrolment=False) is a.DEVICE
    assert admission(proof=True, enrolled=False, removed=False, vault_has_devices=True, enrolment=True) is a.ENROL
    assert admission(proof=True, enrolled=False, removed=False, vault_has_devices=False, enrolment=True) is a.ENROL
    # a forged enrolment (not the owner key in force) is refused, with devices or without
    for has in (False, True):
        assert admission(proof=True, enrolled=False, removed=False, vault_has_devices=has,
                         enrolment=False) is a.BAD_ENROLMENT
    assert admission(proof=True, enrolled=False, removed=False, vault_has_devices=True,
                     enrolment=None) is a.DEVICE_REQUIRED
    assert admission(proof=True, enrolled=False, removed=False, vault_has_devices=False,
                     enrolment=None) is a.LEGACY
