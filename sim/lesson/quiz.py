"""Check-yourself questions. Each answer is computed when asked, by the sim/ function the full page
uses, so a question can never fall out of step with the page that teaches it. A question's prompt, hint and worked
answer are message values (numbers kept as numbers), worded by sim/words/lesson.py in either language; a choice's
value is its catalog word (`fixed` -> `lesson.q.layout.fixed`).

A question asks what the step's claim and figure do not print (another model, another weight format, another
workload): the class works it out from what the step shows. A wrong answer gets a hint, never the answer; the
answer and how it is computed come with a right answer, or when the class asks for it (`Question.reveal`)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import lru_cache

from sim.alloc.prefix_cache import CacheConfig
from sim.alloc.prefix_sweeps import run_both_layouts
from sim.alloc.workload import PrefixWorkloadConfig
from sim.cost.decode import human_flops
from sim.cost.memory import KV_DTYPES, WEIGHT_DTYPE_BITS, MemoryConfig, fmt_decimal, kv_memory, variant_curves
from sim.cost.presets import load_presets
from sim.cost.roofline import RooflineConfig, decode_step
from sim.msg import Msg

MAX_ANSWER_CHARS = 40
# a number, then at most a unit: 'KiB', '×', '%', or a Korean one ('4배')
NUMBER = re.compile(r"^\s*([-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+)\s*(?:[a-zA-Z×x/%\uac00-\ud7a3]+)?\s*$")
LAYOUT_CHOICES = ("fixed", "variable", "same")


@dataclass(frozen=True)
class Feedback:
    correct: bool
    message: Msg


@dataclass(frozen=True)
class Question:
    key: str
    prompt: Msg
    answer: float | str  # a number, or the right choice's value
    unit: str  # shown after a number ("KiB"), "" for a choice
    why: Msg  # how the answer is computed, with the numbers
    hint: Msg  # what a wrong answer gets: how to work it out, without the answer
    rel_tol: float = 0.02
    choices: tuple[str, ...] = field(default=())  # the values; each worded as `lesson.q.layout.<value>`

    def label(self, choice: str) -> Msg:
        """A choice as a message (worded in the question's language by sim/words)."""
        return Msg(f"lesson.q.layout.{choice}")

    def check(self, given: str | None) -> Feedback | None:
        """None when nothing was given; right (with the worked answer) or wrong (with the hint only)."""
        if given is None or not str(given).strip():
            return None
        if self.choices:
            ok = given == self.answer
        else:
            typed = str(given)[:MAX_ANSWER_CHARS]
            m = NUMBER.match(typed)
            if not m:
                return Feedback(False, Msg("lesson.q.not_number", given=repr(typed)))
            ok = math.isclose(float(m.group(1).replace(",", "")), float(self.answer), rel_tol=self.rel_tol)
        if ok:
            return Feedback(True, Msg("lesson.q.right", why=self.why))
        return Feedback(False, Msg("lesson.q.hint", hint=self.hint))

    @property
    def shown_answer(self) -> Msg | str:
        """The answer as shown: the right choice's word, or the number with its unit (a name-like quantity)."""
        if self.choices:
            return self.label(str(self.answer))
        return f"{float(self.answer):,.4g}" + ("×" if self.unit == "×" else f" {self.unit}" if self.unit else "")

    def reveal(self) -> Msg:
        """The answer and how it is computed, for a class that asks for it."""
        return Msg("lesson.q.answer", answer=self.shown_answer, why=self.why)


def other_model(shown: str, first: str = "llama-3.1-70b", second: str = "llama-3.1-8b") -> str:
    """The model a question asks about: not the one the step shows (its answer would be printed above)."""
    return second if shown == first else first


@lru_cache(maxsize=16)  # pure, and asked again on every rerun of its step
def kib_per_token(model: str = "llama-3.1-70b", dtype: str = "bf16") -> Question:
    """A model's KV bytes per token from its shape (given in the question): a plain-attention model and a whole
    number of bytes per value (BF16, FP16, FP8, INT8), so the formula the step shows is all it takes."""
    arch = load_presets()[model]
    assert KV_DTYPES[dtype].bits % 8 == 0 and arch.attention in ("MHA", "GQA", "MQA"), (model, dtype)
    m = kv_memory(MemoryConfig(arch, batch=1, context=1, kv_dtype=dtype))
    kib = m.bytes_per_token / 1024
    b = KV_DTYPES[dtype].bits // 8
    why = Msg("lesson.q.kib.why", layers=arch.n_layers, heads=arch.n_kv_heads, dim=arch.head_dim, b=b,
              bpt=m.bytes_per_token, kib=kib)
    prompt = Msg("lesson.q.kib.ask", model=arch.name, layers=arch.n_layers, heads=arch.n_kv_heads, dim=arch.head_dim,
                 dtype=dtype.upper())
    return Question(f"kib_{model}_{dtype}", prompt, kib, "KiB", why,
                    hint=Msg("lesson.q.kib.hint", b=b, dtype=dtype.upper()))


@lru_cache(maxsize=16)  # pure, and asked again on every rerun of its step
def decode_intensity(model: str = "llama-3.1-70b", context: int = 4096, weight_dtype: str = "fp8") -> Question:
    """The step shows decode's FLOPs per byte with BF16 weights; this asks it with `weight_dtype` weights (the
    same FLOPs, fewer bytes): the class reasons from the claim to a number it does not print."""
    arch = load_presets()[model]
    base = decode_step(RooflineConfig(arch, 1, context))
    dec = decode_step(RooflineConfig(arch, 1, context, weight_dtype=weight_dtype))
    assert dec.flops == base.flops  # the format changes the bytes read, not the work
    # FLOPs and bytes go in as quantities with their SI unit, the same in both languages
    why = Msg("lesson.q.intensity.why2", flops=human_flops(dec.flops), a=fmt_decimal(base.bytes),
              bytes=fmt_decimal(dec.bytes), i0=base.intensity, i=dec.intensity, dtype=weight_dtype.upper())
    prompt = Msg("lesson.q.intensity.ask", i0=base.intensity, dtype=weight_dtype.upper(),
                 bits=WEIGHT_DTYPE_BITS[weight_dtype])
    return Question(f"intensity_{weight_dtype}", prompt, round(dec.intensity, 2), "FLOP/B", why, rel_tol=0.05,
                    hint=Msg("lesson.q.intensity.hint", dtype=weight_dtype.upper()))


@lru_cache(maxsize=16)  # pure, and asked again on every rerun of its step
def mqa_vs_mha(model: str = "llama-3.1-8b") -> Question:
    arch = load_presets()[model]
    curves = variant_curves(MemoryConfig(arch, batch=1, context=1024), contexts=(1024,))
    mha, gqa = curves.name_to_token_bytes["MHA"], curves.name_to_token_bytes["GQA"]
    why = Msg("lesson.q.gqa.why", model=arch.name, heads=arch.n_heads, kv_heads=arch.n_kv_heads, gqa=gqa, mha=mha,
              x=mha / gqa)
    prompt = Msg("lesson.q.gqa.ask", model=arch.name, heads=arch.n_heads, kv_heads=arch.n_kv_heads)
    return Question(f"gqa_{model}", prompt, mha / gqa, "×", why, hint=Msg("lesson.q.gqa.hint"))


LAYOUT_WORKLOADS = ("system_prompt", "few_shot", "chat", "rag")  # the lesson's workloads, in its order


def other_workload(shown: str) -> str:
    """The workload the layout question asks about: the one after the step's (its answer is the step's claim)."""
    return LAYOUT_WORKLOADS[(LAYOUT_WORKLOADS.index(shown) + 1) % len(LAYOUT_WORKLOADS)]


@lru_cache(maxsize=16)  # pure, and asked again on every rerun of its step
def better_layout(workload: str = "few_shot") -> Question:
    num_requests = 100
    runs = run_both_layouts(PrefixWorkloadConfig(workload=workload, num_requests=num_requests), CacheConfig())
    fixed, variable = runs["fixed_first"].result.hit_rate, runs["variable_first"].result.hit_rate
    answer = "fixed" if fixed > variable else "variable" if variable > fixed else "same"
    name = Msg(f"lesson.workload.{workload}")
    why = Msg("lesson.q.layout.why2", n=num_requests, w=name, f=fixed, v=variable)
    return Question(f"layout_{workload}", Msg("lesson.q.layout.ask", w=name), answer, "", why,
                    choices=LAYOUT_CHOICES, hint=Msg("lesson.q.layout.hint"))
