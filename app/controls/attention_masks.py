"""The attention-masks page's URL values and widgets, each declared once: the prompt and tiny model, the mask
builder's kind, window, prefix and padding, the layer/head/row the scores show, and the window of the maps.
Widget keys are the URL keys."""

from __future__ import annotations

import streamlit as st

from app.controls.declared import Choice, Slider, Text
from app.i18n import t
from app.model_picker import register as register_picker
from app.urlstate import UrlState
from sim.attention.masks import MASK_KINDS
from sim.model.transformer import PRESETS

MAX_PROMPT = 48  # bytes: one row and column per byte keeps the maps legible on a projector
MAX_PAD = 8

PROMPT = Text("prompt", "To be, or not to be|that is the question", max_len=4 * MAX_PROMPT, max_chars=4 * MAX_PROMPT,
              label="masks.prompt", url_label="masks.url.prompt")
VARIANT = Choice("variant", "mha", tuple(PRESETS), widget="radio", label="masks.model", url_label="masks.url.variant")
KIND = Choice("kind", "causal", MASK_KINDS, label="masks.mask", url_label="masks.url.kind")
WINDOW = Slider("w", 4, 1, MAX_PROMPT, label="masks.window", url_label="masks.url.w")
PREFIX = Slider("p", 6, 0, MAX_PROMPT, label="masks.prefix", url_label="masks.url.p")
PAD = Slider("pad", 0, 0, MAX_PAD, label="masks.padding", url_label="masks.url.pad")
LAYER = Slider("layer", 0, 0, PRESETS["mha"].n_layers - 1, label="masks.layer", url_label="masks.url.layer")
HEAD = Slider("head", 0, 0, PRESETS["mha"].n_heads - 1, label="masks.head", url_label="masks.url.head")
ROW = Slider("row", 5, 0, MAX_PROMPT + MAX_PAD, narrows=True, label="masks.row", url_label="masks.url.row")
MAP_WINDOW = Slider("map_w", 8, 1, MAX_PROMPT, narrows=True, label="masks.map_window", url_label="masks.url.map_w")
CONTROLS = (PROMPT, VARIANT, KIND, WINDOW, PREFIX, PAD, LAYER, HEAD, ROW, MAP_WINDOW)


def register() -> UrlState:
    """Every value the page keeps in its link, checked; the bad ones listed once."""
    url = UrlState("attention_masks")
    url.add(*CONTROLS)
    register_picker(url)
    url.show_problems()
    return url


def draw_prompt() -> None:
    c = st.columns([3, 1])
    PROMPT.draw(c[0])
    VARIANT.draw(c[1], horizontal=True, format_func=str.upper)


def draw_builder(kind_labels: dict[str, str]) -> None:
    """The mask's kind and the three numbers that shape it (window and prefix only for their kinds)."""
    c = st.columns(4)
    KIND.draw(c[0], format_func=kind_labels.get)
    kind = KIND.value()
    WINDOW.draw(c[1], disabled=kind != "sliding_window")
    PREFIX.draw(c[2], disabled=kind != "prefix_lm")
    PAD.draw(c[3])


def draw_scores(n: int) -> tuple[int, int, int]:
    """Layer, head and query row of the scores; the row kept inside the prompt's `n` rows. (layer, head, row)"""
    c = st.columns(3)
    LAYER.draw(c[0])
    HEAD.draw(c[1])
    last = n - 1
    ROW.clamp(last)
    if n > 1:
        ROW.draw(c[2], hi=last)
    else:
        c[2].markdown(t("masks.one_row"))
    return LAYER.value(), HEAD.value(), ROW.value()


def draw_map_window(n: int) -> int:
    """The sliding window of the second map, at most the prompt's `n` tokens."""
    c = st.columns(2)
    MAP_WINDOW.clamp(n)
    if n > 1:
        MAP_WINDOW.draw(c[0], hi=n)
    return MAP_WINDOW.value()
