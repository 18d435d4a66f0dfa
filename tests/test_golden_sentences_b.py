"""The golden examples: a few sentences per language pinned whole, as a reader sees them (issue 35).

The other tests pin which message a function chose and with which numbers (the "keys" pseudo-language,
sim.words.catalog.PSEUDO), so a copy edit in assets/i18n/ breaks none of them; it updates these, and only these.
Each test names the file whose asserts it was moved from."""

from types import SimpleNamespace

import numpy as np

from sim.alloc import prefix_sweeps as ps
from sim.model import prefix_run as pr
from sim.words import prefix as ro
from sim.words import prefix_run as prw
from sim.words import say

# --- from tests/test_prefix_readouts.py ----------------------------------------------------------

def test_prefix_readouts_golden():
    both = {"fixed_first": ps.LayoutRun(SimpleNamespace(hit_rate=0.861), ""),
            "variable_first": ps.LayoutRun(SimpleNamespace(hit_rate=0.0), "")}
    assert ro.layout_sentence("rag", both) == (
        "**RAG: documents + question**: with the repeated content first, **86.1%** of prompt tokens are served from "
        "the cache; moving what changes to the top drops it to **0.0%** — every block after the first difference "
        "has a new hash.")
    k = np.array([[0, 0, 0.5, 0], [0, 0, 1, 1], [0, 0, 1, 2]])
    v = np.array([[0, 0, 0.1, 0], [0, 0, 0, 1], [0, 0, 0, 0]])
    kc = pr.KVChange([65, 66, 67, 68], [65, 66, 99, 68], 2, k, v, np.ones(3))
    assert prw.kv_chart_title(kc) == ("Changing byte 2 (C → c): positions 0–1 stay exactly unchanged in all 3 layers; of the 2 "
                                      "positions from 2 on, layer 0 changes 1 and layers 1–2 change all 2")
    assert say("ko", ps.demo_prompt_problem([1] * 401, 400)) == \
        "프롬프트 A가 401바이트다. 2..400바이트여야 한다(바이트 하나가 토큰 하나)."
