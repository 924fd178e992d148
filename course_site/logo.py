"""The course logo, drawn by code.

The attention weights of eight positions, each attending by the dot products
of their sinusoidal encodings (chapter 5), drawn as an 8 x 8 grid of squares.

    python -m course_site.logo           # write book/_static/logo.svg
    python -m course_site.logo --check   # exit 1 if the committed logo is not what this draws
"""

from __future__ import annotations

import argparse
import sys

import torch

from attention_course.solutions.ch05_positional_encoding import sinusoidal_positional_encoding
from attention_course.tooling.notebooks import COURSE_ROOT

PATH = COURSE_ROOT / "book" / "_static" / "logo.svg"
POSITIONS, D_MODEL, SHARPNESS = 8, 16, 3.0
CELL, GAP = 12, 2


def weights() -> torch.Tensor:
    pe = sinusoidal_positional_encoding(POSITIONS, D_MODEL).double()
    scores = SHARPNESS * pe @ pe.T / D_MODEL**0.5
    return torch.softmax(scores, dim=-1)


def svg() -> str:
    w = weights()
    w = w / w.max()
    size = POSITIONS * CELL + (POSITIONS + 1) * GAP
    rects = []
    for i in range(POSITIONS):
        for j in range(POSITIONS):
            opacity = 0.08 + 0.92 * float(w[i, j])
            rects.append(
                f'<rect x="{GAP + j * (CELL + GAP)}" y="{GAP + i * (CELL + GAP)}" width="{CELL}" '
                f'height="{CELL}" rx="2" fill="#3b4cc0" fill-opacity="{opacity:.3f}"/>'
            )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {size} {size}" width="{size}" height="{size}" '
        f'role="img" aria-label="Course logo: a grid of attention weights">\n'
        f"<title>Attention: from Bahdanau to Transformers</title>\n" + "\n".join(rects) + "\n</svg>\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only compare with the committed logo")
    args = parser.parse_args(argv)
    drawn = svg()
    if args.check:
        if not PATH.is_file() or PATH.read_text() != drawn:
            print(f"{PATH.relative_to(COURSE_ROOT)} is not what `python -m course_site.logo` draws")
            return 1
        print(f"{PATH.relative_to(COURSE_ROOT)} is up to date")
        return 0
    PATH.write_text(drawn)
    print(f"wrote {PATH.relative_to(COURSE_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
