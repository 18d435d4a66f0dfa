"""Where a cached step's time goes: operators grouped exactly, shares that add up, the FLOPs tallied equal to
the formula, a takeaway worded by how far the step is from its arithmetic, and the Decode cost tab."""

import pytest

from sim.cost.opcount import step_flops
from sim.model.step_profile import CATEGORIES, StepProfile, category, profile_decode_step
from sim.words.profile import profile_takeaway
from tests.conftest import run_page


def test_operators_fall_in_their_category():
    assert [category(op) for op in ("aten::mm", "aten::bmm", "aten::_softmax", "aten::_fused_rms_norm",
                                    "aten::silu", "aten::transpose", "aten::embedding", "aten::sort")] == [
        "matmuls", "matmuls", "attention", "norms", "elementwise", "views and copies", "views and copies",
        "other operators"]


def _profile(wall_us: float, flops: int) -> StepProfile:
    cats = dict.fromkeys(CATEGORIES, 0.0) | {"matmuls": 300e-6, "views and copies": 200e-6}
    return StepProfile(context=256, wall_s=wall_us * 1e-6, profiled_s=1000e-6, category_s=cats, num_calls=800.0, flops=flops, matmul_flops_per_s=1e11)


def test_shares_add_up_and_the_takeaway_follows_the_ratio():
    p = _profile(1500, 2_300_000)
    shares = p.shares()
    assert sum(shares.values()) == pytest.approx(1.0)
    assert shares["outside operators (Python, dispatch)"] == pytest.approx(0.5)
    assert profile_takeaway(p) == ("A cached step at 256 tokens took 1,500 µs for 2.30 MFLOP that need 23.0 µs at this "
                          "machine's matmul rate (65×): overhead-bound; 800 operator calls, the largest share outside "
                          "operators (Python, dispatch) (50%)")
    assert "close to its arithmetic" in profile_takeaway(_profile(30, 2_300_000))
    assert "a few times slower than its arithmetic" in profile_takeaway(_profile(100, 2_300_000))


def test_profiling_the_real_model_counts_the_steps_flops_exactly():
    from app.resources import model

    m = model("mha")
    p = profile_decode_step(m, 64, repeats=3)
    assert p.flops == sum(step_flops(m.cfg, 1, 65).values())  # one token against 65 keys
    assert p.num_calls > 100 and p.category_s["matmuls"] > 0 and all(v >= 0 for v in p.category_s.values())
    assert p.wall_s > 0 and p.profiled_s > 0 and p.matmul_flops_per_s > 0
    with pytest.raises(ValueError, match="context must be"):
        profile_decode_step(m, 5000)


def test_the_decode_cost_tab_profiles_on_request():
    at = run_page("decode_cost", {"n": "16", "tab": "profile"})
    assert not at.exception
    assert any("Profile one cached step" in i.value for i in at.info)
    next(b for b in at.button if b.label == "Profile one cached step").click().run()
    assert not at.exception
    import json

    titles = [json.loads(c.proto.spec)["layout"]["title"]["text"] for c in at.get("plotly_chart")]
    assert any(t.replace("<br>", " ").startswith("A cached step at") for t in titles)
