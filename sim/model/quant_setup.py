"""The KV quantization page's choices as one frozen config: the schemes they name, the teacher-forced runs
each view needs and what those runs are estimated to cost (its sentences: sim/words/quant.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sim.model.quant_cache import FP8_KINDS, SCHEME_KINDS, CacheScheme, make_scheme
from sim.model.quant_errors import EvalConfig, PositionErrors
from sim.msg import Msg
from sim.refusal import Refusal
from sim.work.run_cost import ModelRates, cached_work, prefill_work

INT_KINDS, ALL_KINDS = tuple(SCHEME_KINDS), (*SCHEME_KINDS, *FP8_KINDS)
POSITION_KINDS = (*SCHEME_KINDS, "fp8_e4m3")  # the schemes drawn by token position, in legend order
SCALE_KINDS = ("kivi", "token", "kivi_nores", "kivi8", "fp8_e4m3")  # compared at real-model scale
MAX_PROMPT, MAX_NEW = 128, 512  # bytes of prompt, tokens generated: a free run always fits the trained context
# Measured here: a teacher-forced pass through a quantized cache costs about twice an eager prefill,
# greedy decoding through one about four times a plain cached decode.
QUANT_EVAL_FACTOR, QUANT_DECODE_FACTOR = 2.0, 4.0

Job = tuple[str, int]  # (scheme kind, bits)


@dataclass(frozen=True, kw_only=True)
class QuantSetup:
    """One view of the page: the tiny model variant, the bit width, KIVI's K chunk G, V group g and
    residual window R, symmetric or not, and the held-out text the schemes are measured on."""

    variant: str = "mha"
    bits: int = 4
    chunk: int = 32  # G
    channel_group: int = 32  # g
    residual: int = 128  # R
    symmetric: bool = False
    eval: EvalConfig = field(default_factory=lambda: EvalConfig(4, 256))

    def scheme(self, kind: str, bits: int | None = None) -> CacheScheme:
        """ValueError (with the numbers) when G, g and R do not fit together."""
        return make_scheme(kind, bits=self.bits if bits is None else bits, chunk=self.chunk, channel_group=self.channel_group, residual=self.residual,
                           symmetric=self.symmetric)

    def schemes(self) -> dict[str, CacheScheme]:
        """Every kind at this bit width (FP8 at 8)."""
        return {kind: self.scheme(kind) for kind in ALL_KINDS}

    def scale_schemes(self) -> list[CacheScheme]:
        """KIVI, naive per-token and KIVI without residual at this width, KIVI at 8 bits, FP8 e4m3."""
        return [self.scheme("kivi", 8) if k == "kivi8" else self.scheme(k) for k in SCALE_KINDS]

    @property
    def chosen_jobs(self) -> list[Job]:
        """Every integer scheme at this width, and FP8: what the headline and the position chart need."""
        return [(kind, self.bits) for kind in INT_KINDS] + [(k, 8) for k in FP8_KINDS]

    def grid_jobs(self, every_scheme: bool, bit_widths: Sequence[int]) -> list[Job]:
        """The bits × scheme table: KIVI and naive per-token at every width, or every scheme."""
        kinds = INT_KINDS if every_scheme else ("kivi", "token")
        return [(kind, b) for b in bit_widths for kind in kinds]

    def chosen(self, results: Mapping[Job, PositionErrors]) -> dict[str, PositionErrors]:
        """kind -> its result at this width (FP8 at 8), from `results` once `chosen_jobs` are measured."""
        return {kind: results[(kind, self.bits if kind in SCHEME_KINDS else 8)] for kind in ALL_KINDS}

    def job_params(self, todo: Sequence[Job]) -> tuple:
        """What names a batch of teacher-forced runs in the server's result cache."""
        return (self.variant, self.eval, self.chunk, self.channel_group, self.residual, self.symmetric, tuple(todo))

    def eval_seconds(self, eager: ModelRates) -> float:
        """Estimated seconds of one teacher-forced run over the held-out windows."""
        return QUANT_EVAL_FACTOR * eager.seconds(prefill_work(self.eval.window_len, self.eval.num_windows))

    def setting_problem(self) -> Msg | None:
        """Why G, g and R do not fit together (None when they do): K per channel is quantized R tokens at a
        time, so R must be a multiple of G."""
        G, R = self.chunk, self.residual
        if R % G:
            return Msg("model.err.residual_groups", R=R, name="K", G=G, fix=max(G, R // G * G))  # the cache's own
        return None

    def csv_name(self) -> str:
        return f"kv_quantization_{self.variant}_G{self.chunk}_g{self.channel_group}_R{self.residual}.csv"

    def outlier_tokens(self) -> int:
        """Keys the outlier demo quantizes: the first window cut to whole chunks of G. A Refusal when not one."""
        S, G = self.eval.window_len, self.chunk
        if S // G == 0:
            raise Refusal("quant.s.window_short", S=S, G=G)
        return S // G * G

    def free_key(self, prompt_ids: Sequence[int], num_new: int, kind: str) -> tuple:
        """What names a free run (both texts and every scheme's first difference) in the server's cache."""
        return (self.variant, tuple(prompt_ids), num_new, kind, self.bits, self.chunk, self.channel_group,
                self.residual, self.symmetric)


def prompt_problem(prompt_ids: Sequence[int]) -> Msg | None:
    """Why a prompt (UTF-8 bytes) can not be run, or None."""
    if not prompt_ids:
        return Msg("quant.s.prompt_empty")
    if len(prompt_ids) > MAX_PROMPT:
        return Msg("quant.s.prompt_long", n=len(prompt_ids), max=MAX_PROMPT)
    return None


def free_seconds(prompt_len: int, *, num_new: int, sdpa: ModelRates, eager: ModelRates,
                 num_schemes: int = len(ALL_KINDS)) -> float:
    """Estimated seconds of greedy decoding through both caches plus one teacher-forced pass per scheme."""
    return (QUANT_DECODE_FACTOR * sdpa.seconds(cached_work(prompt_len, num_new))
            + QUANT_EVAL_FACTOR * num_schemes * eager.seconds(prefill_work(prompt_len + num_new)))
