"""The models the lab knows by name: published architectures and the lab's own tiny ones.

The published presets live in assets/presets/models.json as the fields of each model's own
Hugging Face config.json (with its source); they go through `sim.cost.hf_config`, the parser a
user's config.json goes through. The lab's tiny models come from `sim.model.config.PRESETS`
(torch-free).

    load_presets()  -> {key: ArchPreset}, published models then the tiny ones
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from sim.cost.arch import ArchPreset
from sim.cost.hf_config import parse_hf_config_with_notes

ROOT = Path(__file__).resolve().parents[2]
MODELS_JSON = ROOT / "assets" / "presets" / "models.json"


def tiny_model_configs() -> dict[str, dict[str, Any]]:
    """The fields of sim.model.config.PRESETS, as dicts (that module imports no torch)."""
    from dataclasses import asdict

    from sim.model.config import PRESETS

    return {k: asdict(v) for k, v in PRESETS.items()}


def tiny_preset(name: str, cfg: dict[str, Any]) -> ArchPreset:
    n_heads, d_model = cfg["n_heads"], cfg["d_model"]
    return ArchPreset(
        name=f"Tiny {name.upper()} (this lab)", family="KV Cache Lab", n_layers=cfg["n_layers"], d_model=d_model,
        n_heads=n_heads, n_kv_heads=cfg["n_kv_heads"], head_dim=d_model // n_heads, d_ff=cfg["d_ff"],
        vocab_size=cfg["vocab_size"], max_position_embeddings=cfg["max_seq_len"],
        source=f"sim/model/config.py PRESETS[{name!r}] (the lab's own model, trained by sim/model/train.py)",
        key=f"tiny-{name}", notes="Runs live on this machine: the Measured tab allocates its cache for real.",
        notes_ko="이 컴퓨터에서 실제로 돈다: 실제 모델에서 잰 값 탭이 캐시를 실제로 할당한다.",
    )


@lru_cache(maxsize=1)
def load_presets() -> dict[str, ArchPreset]:
    """Every preset by key: the published models of assets/presets/models.json, then the tiny ones."""
    data = json.loads(MODELS_JSON.read_text())
    out: dict[str, ArchPreset] = {}
    for entry in data["models"]:
        text = (MODELS_JSON.parent / entry["config_file"]).read_text()
        preset, _ = parse_hf_config_with_notes(text, entry["name"], entry["source"])
        out[entry["key"]] = replace(
            preset, family=entry["family"], key=entry["key"], hf_id=entry.get("hf_id", ""),
            notes=entry.get("notes", ""), notes_ko=entry.get("notes_ko", ""), params_card=float(entry.get("params_card_billion", 0.0)),
        )
    for name, cfg in tiny_model_configs().items():
        out[f"tiny-{name}"] = tiny_preset(name, cfg)
    return out
