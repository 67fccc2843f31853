"""The stylesheet's animations are stepped (docs/decisions.md "Stepped animations"): where a page
is painted on the CPU, a smooth 60 fps animation takes about a core from the vault worker."""
from __future__ import annotations

import re
from pathlib import Path

CSS = Path(__file__).resolve().parents[2] / "web" / "css" / "app.css"


def test_every_animation_is_stepped() -> None:
    text = re.sub(r"/\*.*?\*/", "", CSS.read_text(encoding="utf-8"), flags=re.S)
    animations = re.findall(r"(?<![-\w])animation\s*:\s*([^;}]+)", text)
    assert animations, "app.css has animations (the spinner, the sync dot)"
    smooth = [a.strip() for a in animations if "steps(" not in a]
    assert smooth == [], f"animations that repaint every frame: {smooth}"
    # and no looping animation is set through its longhand properties, out of this check's sight
    assert "infinite" not in re.sub(r"(?<![-\w])animation\s*:[^;}]+", "", text)
