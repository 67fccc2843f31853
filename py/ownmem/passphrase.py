"""How strong a chosen passphrase is, and the floor below which ownmem refuses it.

The passphrase is the only secret between an exported ``.amem`` file (or a copied
``vault.db``) and its contents: whoever holds the file can guess offline, at the cost of
one Argon2id (64 MiB, t=3) per guess (ApertoMemory "Security Considerations", the offline
guessing of an exported container).  The estimate is zxcvbn's (Dropbox's model: dictionary
words, names, keyboard patterns, dates, repeats), the same family the web app's meter
uses (zxcvbn-ts); both refuse a score below ``MIN_SCORE`` unless the person insists.
"""
from __future__ import annotations

from dataclasses import dataclass

from zxcvbn import zxcvbn

# zxcvbn's score 3: "safely unguessable", about 10^8 to 10^10 guesses; against Argon2id at
# 64 MiB that is years of one machine's work.  The web app's meter uses the same number.
MIN_SCORE = 3
# zxcvbn's cost grows with length; past this it has seen enough to judge
_MAX_JUDGED = 100


@dataclass(frozen=True, slots=True)
class Strength:
    score: int                 # 0 (very weak) .. 4 (very strong), zxcvbn's scale
    warning: str               # zxcvbn's reason, "" when it has none

    @property
    def acceptable(self) -> bool:
        return self.score >= MIN_SCORE


def strength(passphrase: str, context: tuple[str, ...] = ()) -> Strength:
    """``context``: words an attacker would try first (the vault's name, the folder)."""
    r = zxcvbn(passphrase[:_MAX_JUDGED], user_inputs=[c for c in context if c])
    warning = str(r["feedback"].get("warning") or "")
    # zxcvbn's warnings are fixed sentences with examples in them; one that happens to hold
    # the passphrase itself is not printed (secrets never reach an output)
    return Strength(int(r["score"]), "" if passphrase in warning else warning)
