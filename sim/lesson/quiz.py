"""Check-yourself questions. Each answer is computed when asked, by the sim/ function the full page
uses, so a question can never fall out of step with the page that teaches it."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache

from sim.alloc.prefix_cache import CacheConfig
from sim.alloc.prefix_sweeps import run_both_layouts
from sim.alloc.workload import PrefixWorkloadConfig
from sim.cost.decode import human_flops
from sim.cost.gpus import load_gpus
from sim.cost.memory import KV_DTYPES, MemoryConfig, fmt_decimal, kv_memory, variant_curves
from sim.cost.presets import load_presets
from sim.cost.roofline import RooflineConfig, decode_step, hardware

MAX_ANSWER_CHARS = 40
NUMBER = re.compile(r"^\s*([-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+)\s*(?:[a-zA-Z×x/%]+)?\s*$")


@dataclass(frozen=True)
class Feedback:
    correct: bool
    message: str


@dataclass(frozen=True)
class Question:
    key: str
    prompt: str
    answer: float | str
    unit: str  # shown after a number ("KiB"), "" for a choice
    why: str  # how the answer is computed, with the numbers
    rel_tol: float = 0.02
    choices: tuple[str, ...] = field(default=())

    def check(self, given: str | None) -> Feedback | None:
        """None when nothing was given; otherwise right or wrong, with the worked answer."""
        if given is None or not str(given).strip():
            return None
        if self.choices:
            ok = given == self.answer
            return Feedback(ok, ("Right. " if ok else f"Not quite: the answer is {self.answer}. ") + self.why)
        text = str(given)[:MAX_ANSWER_CHARS]
        m = NUMBER.match(text)
        if not m:
            return Feedback(False, f"Type a number (for example 12.5); {text!r} is not one.")
        value = float(m.group(1).replace(",", ""))
        ok = math.isclose(value, float(self.answer), rel_tol=self.rel_tol)
        shown = f"{float(self.answer):,.4g}" + ("×" if self.unit == "×" else f" {self.unit}" if self.unit else "")
        return Feedback(ok, ("Right. " if ok else f"Not quite: the answer is {shown}. ") + self.why)


@lru_cache(maxsize=16)  # pure, and asked again on every rerun of its step
def kib_per_token(model: str = "llama-3.1-8b", dtype: str = "bf16") -> Question:
    arch = load_presets()[model]
    m = kv_memory(MemoryConfig(arch, batch=1, context=1, kv_dtype=dtype))
    kib = m.bytes_per_token / 1024
    why = (f"2 (K and V) × {arch.n_layers} layers × {arch.n_kv_heads} K/V heads × {arch.head_dim} values × "
           f"{KV_DTYPES[dtype].bits // 8} B = {m.bytes_per_token:,} B = {kib:,.4g} KiB per token.")
    return Question("kib", f"How many KiB of KV cache does one token take for {arch.name} in {dtype.upper()}?", kib,
                    "KiB", why)


@lru_cache(maxsize=16)  # pure, and asked again on every rerun of its step
def decode_intensity(model: str = "llama-3.1-70b", gpu: str = "h100-sxm", context: int = 4096) -> Question:
    arch, g = load_presets()[model], load_gpus()[gpu]
    dec, hw = decode_step(RooflineConfig(arch, 1, context)), hardware(g, "bf16")
    why = (f"{human_flops(dec.flops)} over {fmt_decimal(dec.bytes)} read = {dec.intensity:.2f} FLOP/B; the {g.name}'s "
           f"ridge is {hw.ridge:,.0f} FLOP/B, so the step is {dec.bound(hw)}-bound.")
    return Question("intensity", f"At batch 1 and {context:,} tokens of context, how many FLOPs per byte does a "
                    f"{arch.name} decode step do (BF16 weights, FP16 cache)?", round(dec.intensity, 2), "FLOP/B",
                    why, rel_tol=0.05)


@lru_cache(maxsize=16)  # pure, and asked again on every rerun of its step
def mqa_vs_mha(model: str = "llama-3.1-8b") -> Question:
    arch = load_presets()[model]
    curves = variant_curves(MemoryConfig(arch, batch=1, context=1024), contexts=(1024,))
    mha, gqa = curves.name_to_token_bytes["MHA"], curves.name_to_token_bytes["GQA"]
    why = (f"{arch.name} has {arch.n_heads} query heads sharing {arch.n_kv_heads} K/V heads: {gqa:,} B per token "
           f"against {mha:,} B if every query head kept its own, {mha / gqa:,.4g}× smaller.")
    return Question("gqa", f"How many times smaller is {arch.name}'s cache (GQA) than the same model with a K/V "
                    "head for every query head (MHA)?", mha / gqa, "×", why)


@lru_cache(maxsize=16)  # pure, and asked again on every rerun of its step
def better_layout(workload: str = "system_prompt") -> Question:
    runs = run_both_layouts(PrefixWorkloadConfig(workload=workload, num_requests=100), CacheConfig())
    fixed, variable = runs["fixed_first"].result.hit_rate, runs["variable_first"].result.hit_rate
    options = ("Fixed content first", "Variable content first", "Both the same")
    answer = options[0] if fixed > variable else options[1] if variable > fixed else options[2]
    why = (f"Simulated on 100 requests sharing a system prompt: fixed first serves {fixed:.1%} of prompt tokens "
           f"from the cache, variable first {variable:.1%}.")
    return Question("layout", "Requests share a long system prompt and each adds its own question. Which prompt "
                    "layout gets more prefix-cache hits?", answer, "", why, choices=options)
