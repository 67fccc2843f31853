"""The recovery kit (vault/recovery.py): 12 BIP-39 words, checked against the `mnemonic`
package (trezor's reference implementation) and BIP-39's own vectors; the words open the vault
as the passphrase does; mistyped, checksum-failing or an older kit's words are refused with a
clear error and nothing changed; a new kit retires the last one's slot."""
from __future__ import annotations

import hashlib
import re
from pathlib import Path

import mnemonic
import pytest

from ownmem.crypto import provider, random_bytes, run_sync
from ownmem.errors import NotFound, WrongPassphrase
from ownmem.vault import Vault, recovery as R
from ownmem.vault.bip39_english import DIGEST, WORDS
from ownmem.vault.slots import rewrap_slot
from ownmem.vault.store import Store

from .vaultkit import PASSPHRASE, store_state

P = provider()
REF = mnemonic.Mnemonic("english")
# BIP-39's published vectors (the English ones of 128 bits; passphrase-independent part)
VECTORS = [
    ("00000000000000000000000000000000",
     "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"),
    ("7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f7f",
     "legal winner thank year wave sausage worth useful legal winner thank yellow"),
    ("80808080808080808080808080808080",
     "letter advice cage absurd amount doctor acoustic avoid letter advice cage above"),
    ("ffffffffffffffffffffffffffffffff", "zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo wrong"),
    ("9e885d952ad362caeb4efe34a8e91bd2",
     "ozone drill grab fiber curtain grace pudding thank cruise elder eight picnic"),
]


def test_the_word_list_is_bip39s() -> None:
    assert list(WORDS) == REF.wordlist
    assert hashlib.sha256(("\n".join(WORDS) + "\n").encode()).hexdigest() == DIGEST


def test_words_are_bip39_both_ways() -> None:
    for hexkey, words in VECTORS:
        assert " ".join(R.to_words(bytes.fromhex(hexkey))) == words
        assert R.from_words(words) == bytes.fromhex(hexkey)
    for _ in range(200):
        key = random_bytes(16)
        listed = R.to_words(key)
        assert " ".join(listed) == REF.to_mnemonic(key)
        assert R.from_words(" ".join(listed)) == key == bytes(REF.to_entropy(listed))


def test_words_as_a_person_types_them() -> None:
    key = bytes.fromhex(VECTORS[4][0])
    typed = ("1. OZONE, 2. drill 3. grab\n4. fibe 5. curt 6. grace 7. pudd 8. thank 9. cruise 10. elder "
             "11. eigh 12. picn")
    assert R.from_words(typed) == key


@pytest.mark.parametrize("text, says", [
    (" ".join(VECTORS[0][1].split()[:11]), "12 words; these are 11"),
    (VECTORS[0][1] + " about", "these are 13"),
    (VECTORS[0][1].replace("about", "abxut"), "word 12 ('abxut')"),
    (VECTORS[0][1].replace("about", "ab"), "word 12 ('ab')"),
    (VECTORS[0][1].replace("about", "above"), "do not check out"),                 # checksum
    (" ".join(reversed(VECTORS[1][1].split())), "do not check out"),               # order
    ("", "these are 0"),
])
def test_words_that_are_not_a_kits_are_refused_clearly(text: str, says: str) -> None:
    with pytest.raises(R.BadRecoveryWords, match=re.escape(says)):
        R.from_words(text)


def test_the_kit_opens_the_vault_and_a_new_kit_retires_the_old(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    oid = v.add("written before the kit")
    pk = v.add_unlock_slot("passkey", "Phone", b"cred", bytes(32))
    words, slot = run_sync(R.create_kit_async(v, now=1_765_000_000))
    assert slot.label == "Recovery kit, 6 Dec 2025" and len(words) == 12
    assert R.recovery_slot(v.store) == slot
    ident = v.identity
    v.close()
    blob = (tmp_path / "v" / Store.FILENAME).read_bytes()
    assert R.from_words(" ".join(words)) not in blob                 # the key is never stored
    store = Store(tmp_path / "v")
    u = run_sync(R.unlock_with_words_async(store, P, " ".join(words)))
    assert (u.identity.sign_pub, u.identity.root) == (ident.sign_pub, ident.root)
    assert [e.id for e in u.open_all().entries] == [oid]
    new_words, new_slot = run_sync(R.create_kit_async(u))
    assert [s.slot_id for s in u.unlock_slots()] == [pk.slot_id, new_slot.slot_id]   # the passkey stays
    u.close()
    store = Store(tmp_path / "v")
    before = store_state(tmp_path / "v")
    with pytest.raises(WrongPassphrase, match="older kit"):
        run_sync(R.unlock_with_words_async(store, P, " ".join(words)))
    bad_checksum = words[:-1] + [WORDS[WORDS.index(words[-1]) ^ 1]]     # the key's bits, another checksum
    with pytest.raises(R.BadRecoveryWords, match="do not check out"):
        run_sync(R.unlock_with_words_async(store, P, " ".join(bad_checksum)))
    assert store_state(tmp_path / "v") == before
    run_sync(R.unlock_with_words_async(store, P, " ".join(new_words))).close()


def test_a_vault_without_a_kit_says_so(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    v.close()
    store = Store(tmp_path / "v")
    with pytest.raises(NotFound, match="no recovery kit"):
        run_sync(R.unlock_with_words_async(store, P, VECTORS[0][1]))
    store.close()


def test_the_kit_survives_a_passphrase_change(tmp_path: Path) -> None:
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    words, _ = run_sync(R.create_kit_async(v))
    done = v.change_passphrase("a brand new passphrase for the test 77")
    v.close()
    u = run_sync(R.unlock_with_words_async(Store(tmp_path / "v"), P, " ".join(words)))
    assert u.identity.sign_pub == done.ident.sign_pub
    u.close()


def test_two_kits_settle_the_same_way_on_every_device(tmp_path: Path) -> None:
    """merge_kit: the same kit -> the server's copy (devices converge on one wrap); two kits made
    apart -> the later (then the lower id), whichever side holds which; none there -> ours; a
    record that does not parse -> ours."""
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    _, early = run_sync(R.create_kit_async(v, now=1_700_000_000))
    _, late = run_sync(R.create_kit_async(v, now=1_800_000_000))
    rewrapped = run_sync(rewrap_slot(P, early, v.identity.master))
    v.close()
    assert R.merge_kit(early, R.record(rewrapped)) == rewrapped
    assert R.merge_kit(early, R.record(late)) == late
    assert R.merge_kit(late, R.record(early)) == late
    assert R.merge_kit(None, R.record(early)) == early
    assert R.merge_kit(early, None) == early
    assert R.merge_kit(early, R.record(early)[:-1]) == early
    assert R.from_record(R.record(late)) == late


def test_a_kit_made_in_the_same_second_as_the_one_it_replaces_wins_every_merge(tmp_path: Path) -> None:
    """A kit used at once (created, then used and replaced within one second, or under a clock set
    back): the replacement is dated after the used one, so no device's merge hands the used kit
    back (a tie broken by slot id would, half the time)."""
    v = Vault.create(tmp_path / "v", PASSPHRASE)
    try:
        for _ in range(8):          # both slot-id orders come up
            _, used = run_sync(R.create_kit_async(v, now=1_765_000_000))
            _, new = run_sync(R.create_kit_async(v, now=1_765_000_000))
            assert new.created > used.created
            assert R.merge_kit(new, R.record(used)) == new and R.merge_kit(used, R.record(new)) == new
            _, back = run_sync(R.create_kit_async(v, now=1_600_000_000))      # the clock set back
            assert back.created > new.created and R.merge_kit(new, R.record(back)) == back
    finally:
        v.close()
