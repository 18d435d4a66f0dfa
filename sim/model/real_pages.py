"""What the pages say about the model they run and what they measure on it, as message values (no torch at
import, no language here): the picked model named from its own config, and the real model's KV cache bytes
measured from its cache tensors after a short prefill, next to the formula's."""

from __future__ import annotations

from sim.msg import Msg


def model_named(cfg, *, real: bool) -> Msg:
    """The model a page runs, named and shaped from its config: layers, query heads, K/V heads, tokens."""
    return Msg("rp.model.real" if real else "rp.model.tiny", name=cfg.name, layers=cfg.n_layers, heads=cfg.n_heads,
               kv_heads=cfg.n_kv_heads, kind=cfg.attention_kind, vocab=cfg.vocab_size)


def fixed_shape(cfg) -> Msg:
    """Why a page's MHA/GQA/MQA choice does not apply: the real model's attention shape is its own."""
    return Msg("rp.fixed_shape", name=cfg.name, kind=cfg.attention_kind, heads=cfg.n_heads, kv_heads=cfg.n_kv_heads,
               group=cfg.group_size)
