"""Free-running generation through a quantized KV cache: greedy text side by side with full precision,
and the first position where they part."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from sim.model.generate import decode_loop, first_difference, generate
from sim.model.quant_cache import FULL, CacheScheme, QuantizedKVCache, scheme_bytes
from sim.model.quant_forward import teacher_forced_logits
from sim.model.transformer import Llama

MARK = "▌"  # where the two texts part


@dataclass(frozen=True, kw_only=True)
class FreeRun:
    scheme: CacheScheme
    prompt_ids: list[int]
    ref_ids: list[int]  # greedy, full-precision cache
    quant_ids: list[int]  # greedy, the scheme's cache
    used_bytes: int  # the quantized cache after the run
    full_bytes: int  # the same tokens at 16 bits

    @property
    def first_difference(self) -> int | None:
        assert len(self.ref_ids) == len(self.quant_ids)
        return first_difference(self.ref_ids, self.quant_ids)

    @property
    def num_same(self) -> int:
        """Generated tokens before the first difference (all of them when there is none)."""
        first = self.first_difference
        return len(self.ref_ids) if first is None else first

    @property
    def bytes_vs_fp16(self) -> float:
        return self.used_bytes / self.full_bytes

    def marked_text(self, ids: list[int]) -> str:
        """The prompt and `ids` (ref_ids or quant_ids) as text, MARK where the two runs part."""
        first = self.first_difference

        def text(part: list[int]) -> str:
            return bytes(part).decode("utf-8", errors="replace")

        new = text(ids) if first is None else text(ids[:first]) + MARK + text(ids[first:])
        return text(self.prompt_ids) + new


def free_run(model: Llama, prompt_ids: list[int], n_new: int, *, scheme: CacheScheme) -> FreeRun:
    """Greedy text through the plain full-precision cache (sim.model.generate) and, by the same loop,
    through the scheme's QuantizedKVCache: one prefill call, then one token a step."""
    ref = generate(model, list(prompt_ids), n_new, mode="cached", count=False).new_ids  # checks the lengths
    cache = QuantizedKVCache(model.cfg, scheme=scheme, batch_size=1, max_seq_len=len(prompt_ids) + n_new - 1, device=model.device, dtype=model.dtype)
    quant = [s.token for s in decode_loop(model, list(prompt_ids), n_new, cache=cache)]
    cfg = model.cfg
    full = scheme_bytes(FULL, num_tokens=len(prompt_ids) + n_new - 1, n_layers=cfg.n_layers, n_kv_heads=cfg.n_kv_heads, head_dim=cfg.head_dim)["total"]
    return FreeRun(scheme=scheme, prompt_ids=list(prompt_ids), ref_ids=ref, quant_ids=quant, used_bytes=cache.used_bytes(), full_bytes=full)


def divergence_positions(model: Llama, prompt_ids: list[int], *, ref_ids: list[int],
                         schemes: Sequence[CacheScheme]) -> dict[str, int | None]:
    """The first generated token where greedy decoding through each scheme's cache would leave
    the full-precision text: up to there both runs read the same tokens, so one teacher-forced
    pass over prompt + full-precision text finds it."""
    device = model.device
    P = len(prompt_ids)
    ids = torch.tensor([list(prompt_ids) + list(ref_ids[:-1])], device=device)
    ref = torch.tensor(ref_ids, device=device)
    out = {}
    for s in schemes:
        pred = teacher_forced_logits(model, ids, s, prefill_len=P)[0, P - 1 :].argmax(-1)
        diff = (pred != ref).nonzero()
        out[s.key] = int(diff[0]) if len(diff) else None
    return out
