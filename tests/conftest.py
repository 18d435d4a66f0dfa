import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from sim.model import PRESETS, ModelConfig, TinyLlama, load_model  # noqa: E402


def random_model(n_kv_heads: int = 4, seed: int = 0, **overrides) -> TinyLlama:
    """A model with seeded random weights: parity tests need no trained checkpoint."""
    torch.manual_seed(seed)
    cfg = ModelConfig(name=f"random-kv{n_kv_heads}", n_kv_heads=n_kv_heads, **overrides)
    model = TinyLlama(cfg)
    for p in model.parameters():
        if p.dim() == 2:
            torch.nn.init.normal_(p, std=0.08)
    return model.eval().requires_grad_(False)


@pytest.fixture(scope="session")
def shipped_models() -> dict[str, TinyLlama]:
    return {name: load_model(name) for name in PRESETS}
