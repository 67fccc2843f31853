"""The memories both sides seal: deterministic, varied, realistic in size.

The same seed gives the same (content, tags) list on every run and to both
implementations, so neither side is measured on friendlier input.  Contents run
from one short sentence to a short paragraph (about 40-400 UTF-8 bytes), with a
few non-ASCII words, and zero to four tags, which is what an agent's memory holds.
"""
from __future__ import annotations

import random

CREATED = 1_735_689_600          # 2025-01-01T00:00:00Z: a fixed time, so payloads repeat exactly
TOOL = "ownmem-bench/1"          # one provenance string for both sides: identical payload bytes
CONFIDENCE = 0.8

_SUBJECTS = ["The user", "Anna", "The team", "My manager", "The client", "Our CI pipeline",
             "The café on Via Roma", "Jürgen", "The build server", "The project"]
_VERBS = ["prefers", "asked about", "decided against", "keeps forgetting", "switched to",
          "wants a reminder about", "documented", "complained about", "approved", "scheduled"]
_OBJECTS = ["dark roast coffee", "the quarterly report", "TypeScript over JavaScript",
            "meetings before ten", "the Berlin offsite", "a dentist appointment on Tuesday",
            "rotating the API keys monthly", "vegetarian options", "the naïve caching layer",
            "pair programming on Fridays", "the migration to PostgreSQL 16", "résumé feedback"]
_TAILS = ["", " because it saves time", " after the incident last spring",
          " — see the notes from the retro", " and mentioned it twice this week",
          " (confirmed by email)", " until the end of the quarter"]
_TAGS = ["work", "personal", "preference", "health", "travel", "project", "todo", "food",
         "people", "security"]


def memories(n: int, seed: int = 2025) -> list[tuple[str, tuple[str, ...]]]:
    rng = random.Random(seed)
    out: list[tuple[str, tuple[str, ...]]] = []
    for i in range(n):
        sentences = [f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
                     f"{rng.choice(_TAILS)}." for _ in range(rng.randint(1, 5))]
        content = f"[{i}] " + " ".join(sentences)
        tags = tuple(rng.sample(_TAGS, rng.randint(0, 4)))
        out.append((content, tags))
    return out
