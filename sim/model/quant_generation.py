"""Free-running generation through a quantized KV cache: greedy text side by side with full precision,
and the first position where they part."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from sim.i18n import text
from sim.model.generate import decode_loop, first_difference, generate
from sim.model.quant_cache import FULL, SCHEME_KINDS, CacheScheme, QuantizedKVCache, scheme_bytes
from sim.model.quant_forward import teacher_forced_logits
from sim.model.transformer import Llama
from sim.readout import Metric

MARK = "▌"  # where the two texts part


@dataclass(frozen=True)
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

    def metrics(self, lang: str = "en") -> list[Metric]:
        first = self.first_difference
        return [Metric(text(lang, "quant.m.first_diff"), text(lang, "quant.s.none") if first is None else f"{first}",
                       help=text(lang, "quant.m.first_diff_help")),
                Metric(text(lang, "quant.m.same_before"),
                       text(lang, "quant.s.n_of", n=f"{self.num_same}", total=f"{len(self.ref_ids)}")),
                Metric(text(lang, "quant.m.cache_after"), f"{self.used_bytes:,} B",
                       text(lang, "quant.m.of_fp16", share=f"{self.bytes_vs_fp16:.1%}"))]

    def marked_text(self, ids: list[int]) -> str:
        """The prompt and `ids` (ref_ids or quant_ids) as text, MARK where the two runs part."""
        first = self.first_difference

        def text(part: list[int]) -> str:
            return bytes(part).decode("utf-8", errors="replace")

        new = text(ids) if first is None else text(ids[:first]) + MARK + text(ids[first:])
        return text(self.prompt_ids) + new


def free_run(model: Llama, prompt_ids: list[int], n_new: int, scheme: CacheScheme) -> FreeRun:
    """Greedy text through the plain full-precision cache (sim.model.generate) and, by the same loop,
    through the scheme's QuantizedKVCache: one prefill call, then one token a step."""
    ref = generate(model, list(prompt_ids), n_new, "cached", count=False).new_ids  # checks the lengths
    cache = QuantizedKVCache(model.cfg, scheme, 1, len(prompt_ids) + n_new - 1, model.device, model.dtype)
    quant = [s.token for s in decode_loop(model, list(prompt_ids), n_new, cache)]
    cfg = model.cfg
    full = scheme_bytes(FULL, len(prompt_ids) + n_new - 1, cfg.n_layers, cfg.n_kv_heads, cfg.head_dim)["total"]
    return FreeRun(scheme, list(prompt_ids), ref, quant, cache.used_bytes(), full)


def divergence_positions(model: Llama, prompt_ids: list[int], ref_ids: list[int],
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


def text_heading(scheme: CacheScheme, lang: str = "en") -> str:
    """Markdown, bold: the quantized text's scheme, with its integer width where it has one."""
    return f"**{scheme.label_in(lang)}" + (f", INT{scheme.bits}**" if scheme.key in SCHEME_KINDS else "**")


def divergence_frame(schemes: Sequence[CacheScheme], key_to_first: dict[str, int | None], lang: str = "en"):
    """One row per scheme: where its greedy text first parts from full precision ("none": never)."""
    import pandas as pd

    none = text(lang, "quant.s.none")
    return pd.DataFrame([{text(lang, "quant.col.scheme"): s.title_in(lang),
                          text(lang, "quant.col.first_diff"): none if key_to_first[s.key] is None
                          else str(key_to_first[s.key])} for s in schemes])
