"""Check-yourself questions. Each answer is computed when asked, by the sim/ function the full page
uses, so a question can never fall out of step with the page that teaches it. Each question is worded in
`lang` ("en" or "ko", from the catalogs); a choice's value is its English wording, shown in `lang`."""

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
from sim.i18n import text

MAX_ANSWER_CHARS = 40
# a number, then at most a unit: 'KiB', '×', '%', or a Korean one ('4배')
NUMBER = re.compile(r"^\s*([-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+)\s*(?:[a-zA-Z×x/%\uac00-\ud7a3]+)?\s*$")
LAYOUT_CHOICES = ("fixed", "variable", "same")


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
    choices: tuple[str, ...] = field(default=())  # the values (English); `labels` shows them in `lang`
    labels: tuple[str, ...] = field(default=())
    lang: str = "en"

    def label(self, choice: str) -> str:
        """A choice as the question's language shows it."""
        return self.labels[self.choices.index(choice)] if self.labels else choice

    def check(self, given: str | None) -> Feedback | None:
        """None when nothing was given; otherwise right or wrong, with the worked answer."""
        if given is None or not str(given).strip():
            return None
        if self.choices:
            ok = given == self.answer
            return self._feedback(ok, self.label(str(self.answer)))
        typed = str(given)[:MAX_ANSWER_CHARS]
        m = NUMBER.match(typed)
        if not m:
            return Feedback(False, text(self.lang, "lesson.q.not_number", given=repr(typed)))
        value = float(m.group(1).replace(",", ""))
        ok = math.isclose(value, float(self.answer), rel_tol=self.rel_tol)
        shown = f"{float(self.answer):,.4g}" + ("×" if self.unit == "×" else f" {self.unit}" if self.unit else "")
        return self._feedback(ok, shown)

    def _feedback(self, ok: bool, shown: str) -> Feedback:
        if ok:
            return Feedback(True, text(self.lang, "lesson.q.right", why=self.why))
        return Feedback(False, text(self.lang, "lesson.q.wrong", answer=shown, why=self.why))


@lru_cache(maxsize=16)  # pure, and asked again on every rerun of its step
def kib_per_token(model: str = "llama-3.1-8b", dtype: str = "bf16", lang: str = "en") -> Question:
    arch = load_presets()[model]
    m = kv_memory(MemoryConfig(arch, batch=1, context=1, kv_dtype=dtype))
    kib = m.bytes_per_token / 1024
    why = text(lang, "lesson.q.kib.why", layers=f"{arch.n_layers}", heads=f"{arch.n_kv_heads}",
               dim=f"{arch.head_dim}", b=f"{KV_DTYPES[dtype].bits // 8}", bpt=f"{m.bytes_per_token:,}",
               kib=f"{kib:,.4g}")
    return Question("kib", text(lang, "lesson.q.kib.prompt", model=arch.name, dtype=dtype.upper()), kib, "KiB", why,
                    lang=lang)


@lru_cache(maxsize=16)  # pure, and asked again on every rerun of its step
def decode_intensity(model: str = "llama-3.1-70b", gpu: str = "h100-sxm", context: int = 4096,
                     lang: str = "en") -> Question:
    arch, g = load_presets()[model], load_gpus()[gpu]
    dec, hw = decode_step(RooflineConfig(arch, 1, context)), hardware(g, "bf16")
    why = text(lang, "lesson.q.intensity.why", flops=human_flops(dec.flops), bytes=fmt_decimal(dec.bytes),
               i=f"{dec.intensity:.2f}", gpu=g.name, ridge=f"{hw.ridge:,.0f}",
               bound=text(lang, f"lesson.q.bound.{dec.bound(hw)}"))
    return Question("intensity", text(lang, "lesson.q.intensity.prompt", ctx=f"{context:,}", model=arch.name),
                    round(dec.intensity, 2), "FLOP/B", why, rel_tol=0.05, lang=lang)


@lru_cache(maxsize=16)  # pure, and asked again on every rerun of its step
def mqa_vs_mha(model: str = "llama-3.1-8b", lang: str = "en") -> Question:
    arch = load_presets()[model]
    curves = variant_curves(MemoryConfig(arch, batch=1, context=1024), contexts=(1024,))
    mha, gqa = curves.name_to_token_bytes["MHA"], curves.name_to_token_bytes["GQA"]
    why = text(lang, "lesson.q.gqa.why", model=arch.name, heads=f"{arch.n_heads}", kv_heads=f"{arch.n_kv_heads}",
               gqa=f"{gqa:,}", mha=f"{mha:,}", x=f"{mha / gqa:,.4g}")
    return Question("gqa", text(lang, "lesson.q.gqa.prompt", model=arch.name), mha / gqa, "×", why, lang=lang)


@lru_cache(maxsize=16)  # pure, and asked again on every rerun of its step
def better_layout(workload: str = "system_prompt", lang: str = "en") -> Question:
    num_requests = 100
    runs = run_both_layouts(PrefixWorkloadConfig(workload=workload, num_requests=num_requests), CacheConfig())
    fixed, variable = runs["fixed_first"].result.hit_rate, runs["variable_first"].result.hit_rate
    options = tuple(text("en", f"lesson.q.layout.{c}") for c in LAYOUT_CHOICES)
    answer = options[0] if fixed > variable else options[1] if variable > fixed else options[2]
    why = text(lang, "lesson.q.layout.why", n=f"{num_requests:,}", f=f"{fixed:.1%}", v=f"{variable:.1%}")
    return Question("layout", text(lang, "lesson.q.layout.prompt"), answer, "", why, choices=options,
                    labels=tuple(text(lang, f"lesson.q.layout.{c}") for c in LAYOUT_CHOICES), lang=lang)
