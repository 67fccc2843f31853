#!/usr/bin/env python3
"""Draw the ownmem app icons (PNG) with the standard library only.

    python3 web/icons/make_icons.py     rewrites icon-192.png, icon-512.png, icon-maskable-512.png,
                                        apple-touch-icon.png

The PNGs are committed; this script is how they were made, so a change of colour or
shape is one edit here, not a trip to an image editor.  The logo: a white lower-case
"om" of round strokes on a calm blue-green rounded square.  Shapes are signed distance
functions, so each pixel's coverage (anti-aliasing) is one evaluation, not supersampling.
The build copies only the images, not this script.  apple-touch-icon.png (180x180, what
iOS and iPadOS put on the Home Screen) is drawn full bleed like the maskable one: iOS
rounds the corners itself and fills transparent pixels with black.
"""
from __future__ import annotations

import math
import struct
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
BG = (0x2E, 0x5E, 0x73)       # the manifest's theme_color, #2e5e73
FG = (0xFF, 0xFF, 0xFF)


def _capsule(px: float, py: float, ax: float, ay: float, bx: float, by: float, r: float) -> float:
    # distance to the segment a-b, minus the stroke's half width: a stroke with round ends
    dx, dy = bx - ax, by - ay
    t = max(0.0, min(1.0, ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)))
    return math.hypot(px - ax - t * dx, py - ay - t * dy) - r


def _arch(px: float, py: float, cx: float, cy: float, radius: float, r: float) -> float:
    # the upper half of a ring, with round ends where it meets the stems
    if py <= cy:
        return abs(math.hypot(px - cx, py - cy) - radius) - r
    return min(math.hypot(px - cx + radius, py - cy), math.hypot(px - cx - radius, py - cy)) - r


def _glyph(px: float, py: float) -> float:
    """The "om" in a unit box: x from 0 to 1, x-height from 0.25 to 0.75."""
    w = 0.085                       # stroke width
    r = w / 2
    top, base = 0.30 + r, 0.70 - r  # stroke centre lines at x-height and baseline
    ro = (base - top) / 2           # the o is a ring exactly one x-height tall
    ox = 0.06 + ro
    d = abs(math.hypot(px - ox, py - 0.5) - ro) - r
    ra = 0.105                      # each arch of the m, a bit narrower than the o
    x0 = ox + ro + 0.115            # the m's first stem
    x1, x2 = x0 + 2 * ra, x0 + 4 * ra
    cy = top + ra
    d = min(d, _capsule(px, py, x0, top, x0, base, r))
    d = min(d, _arch(px, py, x0 + ra, cy, ra, r), _arch(px, py, x1 + ra, cy, ra, r))
    d = min(d, _capsule(px, py, x1, cy, x1, base, r), _capsule(px, py, x2, cy, x2, base, r))
    return d


def _glyph_bounds() -> tuple[float, float]:
    # horizontal extent of the glyph, to centre it
    xs = [i / 400 for i in range(401)]
    inked = [x for x in xs if any(_glyph(x, y / 100) <= 0 for y in range(25, 76))]
    return inked[0], inked[-1]


def _rounded_square(px: float, py: float, size: float, radius: float) -> float:
    h = size / 2 - radius
    qx, qy = abs(px - size / 2) - h, abs(py - size / 2) - h
    return math.hypot(max(qx, 0.0), max(qy, 0.0)) + min(max(qx, qy), 0.0) - radius


def render(size: int, maskable: bool) -> bytes:
    """RGBA rows.  Maskable: full bleed, glyph inside the central 80 % safe circle."""
    lo, hi = _glyph_bounds()
    scale = size * (0.62 if maskable else 0.74) / (hi - lo)   # glyph box width in pixels
    off_x = size / 2 - scale * (lo + hi) / 2
    off_y = size / 2 - scale * 0.5
    radius = size * 0.22
    rows = []
    for j in range(size):
        row = bytearray([0])        # PNG filter type 0 for this row
        py = j + 0.5
        for i in range(size):
            px = i + 0.5
            bg = 1.0 if maskable else max(0.0, min(1.0, 0.5 - _rounded_square(px, py, size, radius)))
            ink = max(0.0, min(1.0, 0.5 - _glyph((px - off_x) / scale, (py - off_y) / scale) * scale))
            if bg == 0.0:
                row += b"\0\0\0\0"
                continue
            rgb = (round(b + (f - b) * ink) for b, f in zip(BG, FG))
            row += bytes((*rgb, round(255 * bg)))
        rows.append(bytes(row))
    return b"".join(rows)


def png(size: int, rgba_rows: bytes) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)   # 8-bit RGBA
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(rgba_rows, 9)) + chunk(b"IEND", b""))


def main() -> None:
    for name, size, maskable in (("icon-192.png", 192, False), ("icon-512.png", 512, False),
                                 ("icon-maskable-512.png", 512, True), ("apple-touch-icon.png", 180, True)):
        (HERE / name).write_bytes(png(size, render(size, maskable)))
        print("wrote", HERE / name)


if __name__ == "__main__":
    main()
