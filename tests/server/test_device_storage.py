"""The device tables on both backends, in process (server/storage/devices.py): enrolment under
the owner key in force only, a removed key never back, enrolment closed between a removal and
the owner key's change, the credentials a removal ends, and the sync time a pull notes."""
from __future__ import annotations

import os
import time
from typing import Any

import pytest

from server.storage.base import RekeyKeys
from server.storage.devices import DeviceRecord, Enrolled
from tests.server.storekit import Store, registration


def _device(now: int) -> DeviceRecord:
    pub = os.urandom(32)
    return DeviceRecord(os.urandom(16), pub, "a phone", now, now)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_enrol_list_remove_and_the_rules_around_them(kind: str, tmp_path: Any, request: Any) -> None:
    st = Store.fresh(kind, tmp_path, request).open()
    try:
        v = st.register(registration())
        other = st.register(registration())
        dev, now = st.devices(), int(time.time())
        a, b = _device(now), _device(now + 1)
        assert dev.count(v.id) == 0
        assert dev.enrol(v.id, v.owner_pub, a) is Enrolled.ADDED
        assert dev.enrol(v.id, v.owner_pub, a) is Enrolled.KNOWN                  # twice: nothing changes
        assert dev.enrol(v.id, os.urandom(32), b) is Enrolled.STALE_OWNER         # not the owner key in force
        assert dev.enrol(v.id, v.owner_pub, b) is Enrolled.ADDED
        assert [d.device_id for d in dev.listed(v.id)] == [a.device_id, b.device_id]
        assert dev.listed(other.id) == [] and dev.get(other.id, a.device_id) is None

        # credentials: one of each device, and one from before devices (the sync key alone)
        ta, tb, legacy = os.urandom(32), os.urandom(32), os.urandom(32)
        for h, d in ((ta, a), (tb, b)):
            dev.bind_token(h, v.id, d.device_id, now + 5)
            st.add_token(h, v.id, time.time() + 600)
        st.add_token(legacy, v.id, time.time() + 600)
        st.add_token(other_token := os.urandom(32), other.id, time.time() + 600)
        assert dev.token_device(tb) == b.device_id
        got = dev.get(v.id, b.device_id)
        assert got is not None and got.last_sync == now + 5
        dev.touch(tb, now + 50)
        got = dev.get(v.id, b.device_id)
        assert got is not None and got.last_sync == now + 50

        # a removal signed under a key that is not the one in force removes nothing
        assert not dev.remove(v.id, os.urandom(32), b.device_id, now)
        assert dev.remove(v.id, v.owner_pub, b.device_id, now)
        assert not dev.remove(v.id, v.owner_pub, b.device_id, now)               # a replay: nothing left to remove
        assert [d.device_id for d in dev.listed(v.id)] == [a.device_id]
        assert dev.removed(v.id, b.device_id) and not dev.removed(v.id, a.device_id)
        # its credential and the one from before devices ended; the other device's and vault's did not
        t = time.time()
        assert st.token_vault(tb, t) is None and st.token_vault(legacy, t) is None
        assert st.token_vault(ta, t) is not None and st.token_vault(other_token, t) is not None
        # the removed key never enrols again; no key enrols under the owner key of the removal
        assert dev.enrol(v.id, v.owner_pub, b) is Enrolled.REMOVED
        assert dev.enrol(v.id, v.owner_pub, _device(now)) is Enrolled.CLOSED
        # ...until the owner key changes (a passphrase change)
        new_owner = os.urandom(32)
        st.rekey(v.id, 1, RekeyKeys(os.urandom(16), new_owner, os.urandom(32), os.urandom(40), os.urandom(3309)),
                 b"meta", os.urandom(64))
        assert dev.enrol(v.id, v.owner_pub, _device(now)) is Enrolled.STALE_OWNER
        assert dev.enrol(v.id, new_owner, b) is Enrolled.REMOVED
        assert dev.enrol(v.id, new_owner, _device(now)) is Enrolled.ADDED
        assert dev.count(v.id) == 2
    finally:
        st.close()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_vault_holds_at_most_max_devices(kind: str, tmp_path: Any, request: Any) -> None:
    from ownmem.wire.devices import MAX_DEVICES

    st = Store.fresh(kind, tmp_path, request).open()
    try:
        v = st.register(registration())
        dev, now = st.devices(), int(time.time())
        for _ in range(MAX_DEVICES):
            assert dev.enrol(v.id, v.owner_pub, _device(now)) is Enrolled.ADDED
        assert dev.enrol(v.id, v.owner_pub, _device(now)) is Enrolled.FULL
    finally:
        st.close()
