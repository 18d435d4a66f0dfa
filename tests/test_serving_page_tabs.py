"""The Serving page's offload, prefill/decode split and routing tabs: each opens alone with its study's computed
title and titled axes, shows the study's own numbers, and turns bad input into a message."""

from dataclasses import replace

import pandas as pd

from sim.serving import disagg as dg
from sim.serving import offload as of
from sim.serving import routing as rt
from sim.serving.comparison import DeploymentConfig
from sim.serving.shared_prefix import SharedPrefixConfig
from sim.serving.tiers import OffloadConfig
from sim.words import engine_readouts as er
from tests.conftest import run_page
from tests.test_chart_axes import charts, untitled_axes
from tests.test_chart_axes import title_of as raw_title


def title_of(fig: dict) -> str:
    return raw_title(fig).replace("<br>", " ")


def open_tab(tab: str, **params):
    at = run_page("serving", {"tab": tab, "live": "0", **params})
    assert not at.exception, at.exception
    return at


def test_each_new_tab_opens_alone_with_its_takeaway():
    want = {"offload": of.run_offload(of.OffloadSetup()), "disagg": dg.run_disagg(dg.DisaggSetup()),
            "routing": rt.run_routing(rt.RoutingSetup())}
    for tab, study in want.items():
        at = open_tab(tab)
        figs = charts(at)
        assert len(figs) == 1, tab
        assert untitled_axes(figs[0]) == [], tab
        assert title_of(figs[0]) == er.study_takeaway(study), tab
        assert not at.error and not at.warning, tab
        pd.testing.assert_frame_equal(at.dataframe[0].value.reset_index(drop=True), study.to_frame().round(3))
    text = " ".join(m.value for m in open_tab("offload").markdown)
    for line in er.offload_verdicts(want["offload"]):
        assert line in text


def test_offload_tab_follows_its_url():
    at = open_tab("offload", of_requests=150, of_groups=30, of_prefix=1024, of_gpu=20000, of_cpu=10000,
                  of_cpu_link="pcie4", of_disk=0)
    setup = of.OffloadSetup(DeploymentConfig(kv_limit_tokens=20000), SharedPrefixConfig(150, 30, 1024, 128, 64, 60.0),
                            OffloadConfig(10000, "pcie4", 0, "nvme"))
    study = of.run_offload(setup)
    assert title_of(charts(at)[0]) == er.study_takeaway(study)
    assert at.number_input(key="of_requests").value == 150 and at.selectbox(key="of_cpu_link").value == "pcie4"


def test_split_and_routing_tabs_follow_their_urls():
    at = open_tab("disagg", dg_prefill=1, dg_decode=3, dg_requests=100, dg_link="eth100")
    s = dg.DisaggSetup()
    study = dg.run_disagg(replace(s, workload=replace(s.workload, num_requests=100), pools=dg.DisaggConfig(1, 3),
                                  link="eth100"))
    assert title_of(charts(at)[0]) == er.study_takeaway(study)
    assert er.disagg_study_verdict(study) in " ".join(m.value for m in at.markdown)
    at = open_tab("routing", rt_replicas=2, rt_requests=200)
    r = rt.RoutingSetup()
    study = rt.run_routing(replace(r, num_replicas=2, workload=replace(r.workload, num_requests=200)))
    assert title_of(charts(at)[0]) == er.study_takeaway(study)


def test_bad_values_fall_back_or_say_why():
    at = open_tab("offload", of_prefix="99999999", of_cpu_link="usb")
    assert at.warning and at.number_input(key="of_prefix").value == 2048
    at = open_tab("routing", rt_replicas="0")
    assert at.warning and at.number_input(key="rt_replicas").value == 4
    # a prompt past the model's trained context is a message with the numbers, not a traceback
    at = open_tab("offload", model="falcon-7b", of_prefix=4096)  # a 2,048-token context
    assert at.error and "trained context" in at.error[0].value


def test_the_preemption_study_runs_at_its_most_host_slots():
    """The host-slot control's top is the engine's own bound (any pool's): at it the study runs, refused by
    nothing, and at the top of a blocks-of-1 pool too (the bound is in blocks of 1 slot)."""
    from app.controls.serving_engine import PE_CPU
    from sim.serving.config import MAX_CPU_CAPACITY_TOKENS

    assert PE_CPU.hi == MAX_CPU_CAPACITY_TOKENS
    at = open_tab("preemption", pe_cpu=PE_CPU.hi)
    assert not at.exception and not at.error and charts(at), [e.value for e in at.error]


def test_the_engine_refusals_are_worded_in_korean_with_their_numbers():
    """Issue 35: a refusal the Serving page's tabs can reach is a Refusal, so the page shows it in the page language
    (it used to print the simulator's English). Each is the catalog's Korean entry filled with the refusal's numbers,
    shown escaped as the page shows every reason."""
    from app.controls.serving_engine import DG_PROMPT
    from app.text import plain
    from sim.cost.presets import load_presets
    from sim.serving.config import MAX_CPU_CAPACITY_TOKENS, EngineConfig
    from sim.words import text

    falcon = load_presets()["falcon-7b"]
    ctx = falcon.max_position_embeddings
    # the step-through: a budget below the scenario's running requests' decode tokens
    at = open_tab("steps", st_scenario="chunked", st_budget=3, lang="ko")
    want = text("ko", "serving.err.budget_decode", budget=3, seqs=4, per=1, need=4)
    assert at.error and plain(want) in at.error[0].value, at.error
    assert not at.exception
    # the preemption study: host slots smaller than one block
    at = open_tab("preemption", pe_cpu=5, lang="ko")
    want = text("ko", "serving.err.cpu_capacity", bs=16, max=MAX_CPU_CAPACITY_TOKENS, got=5)
    assert at.error and plain(want) in at.error[0].value, at.error
    # the split study caps its lengths at the model's trained context (2,048), so its default average prompt of
    # 3,000 tokens is refused with both numbers; the routing study's fixed requests are past that context
    at = open_tab("disagg", model="falcon-7b", lang="ko")
    want = text("ko", "alloc.err.prompt_mean", hi=ctx - 1, got=DG_PROMPT.default)
    assert at.error and plain(want) in at.error[0].value, at.error
    at = open_tab("routing", model="falcon-7b", lang="ko")
    w = rt.RoutingSetup().workload
    want = text("ko", "serving.err.prompts_past_context", prompt=w.prompt_len, output=w.output_len, model=falcon.name,
                ctx=ctx)
    assert at.error and plain(want) in at.error[0].value, at.error
    assert EngineConfig(max_num_seqs=4, max_num_batched_tokens=4)  # the least budget the step-through takes
