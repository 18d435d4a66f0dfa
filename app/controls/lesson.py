"""The lesson's URL values and widgets, each declared once: the step, and every step's controls (the generation
steps' prompt, length, layer and position; the cost steps' context, model and dtype; the ways out's draft,
block-table step and workload). Widget keys are the URL keys; the steps draw them (app/lesson/*)."""

from __future__ import annotations

from app.controls.declared import Among, Choice, Slider, Stops, Text
from sim.cost.memory import KV_DTYPES
from sim.cost.presets import load_presets
from sim.lesson.blocks import SCRIPT
from sim.lesson.quiz import LAYOUT_WORKLOADS
from sim.lesson.steps import RECAP
from sim.lesson.walk import STAGES

LENGTHS = [2**k for k in range(4, 11)]  # 16 … 1,024 tokens generated
CONTEXTS = [2**k for k in range(7, 18)]  # 128 … 131,072
ALPHAS = [round(0.05 * i, 2) for i in range(1, 20)]  # 0.05 … 0.95
MAX_LESSON_PROMPT = 48  # bytes: the real-model steps draw every position
DEFAULT_PROMPT = "To be, or not to be, that is"


REAL_LAYERS = 30  # SmolLM2-135M's layers: the filling step's layer choice on it
TINY_LAYERS = (0, 1, 2, 3)  # the tiny model's layers


def lesson_models() -> dict:
    """The presets the lesson's cost and shrink steps offer: the real architectures (not the tiny ones)."""
    return {k: a for k, a in load_presets().items() if not k.startswith("tiny")}


STEP = Among("step", 1, 1, RECAP, label="lesson.step", url_label="lesson.url.step")
LENGTH = Stops("n", 256, tuple(LENGTHS), label="lesson.c.n", url_label="lesson.url.n")
TEXT = Text("text", DEFAULT_PROMPT, max_len=MAX_LESSON_PROMPT, max_chars=MAX_LESSON_PROMPT, label="lesson.c.prompt",
            url_label="lesson.url.text")
LAYER = Stops("layer", 0, TINY_LAYERS, label="lesson.c.layer", url_label="lesson.url.layer")
POSITION = Slider("t", 0, 0, 64, narrows=True, label="lesson.c.t", url_label="lesson.url.t")
CONTEXT = Stops("ctx", 4096, tuple(CONTEXTS), label="lesson.c.ctx", url_label="lesson.url.ctx",
                other_labels=("lesson.c.ctx_each",))
MODEL = Choice("model", "llama-3.1-8b", lambda: list(lesson_models()), label="lesson.c.model",
               url_label="lesson.url.model")
KV = Choice("kv", "bf16", tuple(KV_DTYPES), label="lesson.c.kv", url_label="lesson.url.kv")
ALPHA = Stops("alpha", 0.8, tuple(ALPHAS), label="lesson.c.alpha", url_label="lesson.url.alpha")
DRAFT_K = Slider("k", 4, 1, 8, label="lesson.c.k", url_label="lesson.url.k")
WORKLOAD = Choice("workload", "system_prompt", tuple(LAYOUT_WORKLOADS), label="lesson.c.workload",
                  url_label="lesson.url.workload")
BLOCK_STEP = Among("bt", 0, 0, len(SCRIPT), widget="select_slider", label="lesson.bt.c", url_label="lesson.url.bt")
WALK = Among("walk", 0, 0, STAGES - 1, widget="segmented_control", label="lesson.walk.c", url_label="lesson.url.walk")
FILL_MODEL = Choice("fill_lm", "mha", ("mha", "smollm2"), label="rp.lesson.model", url_label="rp.lesson.model")
REAL_LAYER = Stops("rlayer", 0, tuple(range(REAL_LAYERS)), label="lesson.c.layer", url_label="rp.lesson.url.rlayer")
CONTROLS = (STEP, LENGTH, TEXT, LAYER, POSITION, CONTEXT, MODEL, KV, ALPHA, DRAFT_K, WORKLOAD, BLOCK_STEP, WALK, FILL_MODEL,
            REAL_LAYER)
