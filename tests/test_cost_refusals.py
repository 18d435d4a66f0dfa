"""Refusals a user can cause in sim/cost (issue 35): a pasted or uploaded config.json that ArchPreset's own bounds
refuse, the `kv` command's numbers, KV memory's layers-per-K/V slider past a small model's layers and its GPU count
against the K/V heads. Each is a Refusal with its numbers as fields, worded in both languages from
assets/i18n/*/cost_refusals.json; the command line prints its English in one line and exits 2, the page shows the
page language's."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app.cli_kv import main as kv_main
from sim.cost.arch import LIMITS, MAX_STATE_DIM, MAX_STATE_VALUES
from sim.cost.hf_config import parse_hf_config
from sim.cost.kv_engine import KVEngineConfig
from sim.cost.memory import MAX_CONTEXT, MemoryConfig
from sim.cost.presets import load_presets
from sim.cost.tensor_parallel import check_tp
from sim.msg import Items, Msg
from sim.refusal import Misuse, Refusal
from sim.words import say
from sim.words.catalog import PSEUDO
from tests.conftest import unescaped

ROOT = Path(__file__).resolve().parent.parent
LLAMA = {"model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
         "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}
QWEN_NEXT = {"model_type": "qwen3_next", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
             "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000, "full_attention_interval": 2,
             "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32,
             "linear_value_head_dim": 32}
MAMBA = {"model_type": "mamba", "hidden_size": 256, "num_hidden_layers": 4, "vocab_size": 1000, "state_size": 16}

# Gated DeltaNet's conv state is 2·nk·dk + nv·dv wide, its recurrent state nv × dk × dv (sim/cost/hf_config.py)
WIDE_CONV = 2 * (1 << 14) * (1 << 11) + 4 * 32
BIG_STATE = (1 << 10) * (1 << 12) * (1 << 13)
BIG_STATE_CONV = 2 * (1 << 12) + (1 << 10) * (1 << 13)
# d_model · (2·key_dim + 2·value_dim) + d_model · 2·nv + conv_dim · 4 + value_dim · d_model, key_dim = 2·32
HUGE_D, HUGE_V = 1 << 20, 16 * (1 << 16)
HUGE_PARAMS = (HUGE_D * (2 * 64 + 2 * HUGE_V) + HUGE_D * 2 * 16 + (2 * 64 + HUGE_V) * 4 + HUGE_V * HUGE_D)

CONFIG_REFUSALS = [  # (what the config changes, the message ArchPreset refuses it with)
    ({**LLAMA, "num_local_experts": 2, "num_experts_per_tok": 4}, Msg("cost.err.experts_per_tok", k=4, n=2)),
    ({**LLAMA, "n_routed_experts": 8, "num_experts_per_tok": 2, "first_k_dense_replace": 10},
     Msg("cost.err.first_dense", k=10, n=4)),
    ({**LLAMA, "model_type": "nemotron_h", "hybrid_override_pattern": "----"}, Msg("cost.err.no_mixer", pattern="'F'")),
    ({**MAMBA, "index_head_dim": 64}, Msg("cost.err.index_no_attention", n=64)),
    ({**QWEN_NEXT, "linear_num_key_heads": 1 << 14, "linear_key_head_dim": 1 << 11},
     Msg("cost.err.state_shape", name="state_conv_shape", max=MAX_STATE_DIM, shape=repr((WIDE_CONV, 3)))),
    ({**QWEN_NEXT, "linear_num_key_heads": 1, "linear_key_head_dim": 1 << 12, "linear_num_value_heads": 1 << 10,
      "linear_value_head_dim": 1 << 13},
     Msg("cost.err.state_values", n=BIG_STATE_CONV * 3 + BIG_STATE, max=MAX_STATE_VALUES)),
    ({**QWEN_NEXT, "hidden_size": HUGE_D, "linear_num_value_heads": 16, "linear_value_head_dim": 1 << 16},
     Msg("cost.err.arch_limits", problems=Items([Msg("cost.err.outside", name="state_params", value=HUGE_PARAMS,
                                                     lo=0, hi=LIMITS["state_params"][1])], sep="; "))),
]


@pytest.mark.parametrize("config, msg", CONFIG_REFUSALS, ids=[m.key for _, m in CONFIG_REFUSALS])
def test_a_config_json_past_archpresets_bounds_is_refused_with_its_numbers(config, msg):
    with pytest.raises(Refusal) as e:
        parse_hf_config(json.dumps(config))
    assert (e.value.key, e.value.fields) == ("kvmem.cfg.prefix", {"problems": msg})
    # each language words the same numbers from its own entry (the Korean is not the English)
    en, ko = say("en", e.value.msg), say("ko", e.value.msg)
    assert en == f"config.json: {say('en', msg)}" and ko == f"config.json: {say('ko', msg)}" and en != ko
    for value in msg.fields.values():
        if isinstance(value, int):
            assert f"{value:,}" in en or str(value) in en
            assert f"{value:,}" in ko or str(value) in ko


def test_golden_sentences():
    e = Msg("cost.err.experts_per_tok", k=4, n=2)
    assert say(PSEUDO, e) == 'cost.err.experts_per_tok(k=4, n=2)'
    assert say("ko", e) == "토큰당 전문가 수(num_experts_per_tok=4)가 전문가 수(num_experts=2)보다 많다"
    o = Msg("cost.err.outside", name="context", value=0, lo=1, hi=MAX_CONTEXT)
    assert say("en", o) == "context=0 is outside 1..134,217,728"
    assert say("ko", o) == "context=0은(는) 1..134,217,728 범위 밖이다"


def test_out_of_range_settings_are_refusals_and_a_non_integer_a_misuse():
    arch = load_presets()["llama-3.1-8b"]
    with pytest.raises(Refusal) as e:
        MemoryConfig(arch, batch=1, context=1, layers_per_kv=9)
    assert (e.value.key, e.value.fields) == ("cost.err.outside", {"name": "layers_per_kv", "value": 9, "lo": 1, "hi": 8})
    with pytest.raises(Refusal) as e:
        KVEngineConfig(max_num_batched_tokens=0)
    assert e.value.fields == {"name": "max_num_batched_tokens", "value": 0, "lo": 1, "hi": MAX_CONTEXT}
    with pytest.raises(Refusal) as e:
        check_tp(8, 3, mla=False)
    assert (e.value.key, e.value.fields) == ("cost.err.tp_heads", {"tp": 3, "heads": 8})
    with pytest.raises(Misuse):  # argparse and the controls hand over ints: anything else is the lab's bug
        MemoryConfig(arch, batch="4", context=1)
    with pytest.raises(Misuse):
        MemoryConfig(arch, batch=1, context=1, kv_dtype="fp4")  # a choice on every page and command


# --- the `kv` command: exit 2, one line, the numbers ------------------------------------------------------------

def kv(capsys, *argv):
    code = kv_main("kv", list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("config, msg", CONFIG_REFUSALS[:4], ids=[m.key for _, m in CONFIG_REFUSALS[:4]])
def test_the_kv_command_refuses_such_a_config_in_one_line(capsys, tmp_path, config, msg):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    code, out, err = kv(capsys, "--config", str(path), "--context", "10")
    assert (code, out) == (2, "")
    assert err == f"kv: config.json: {say('en', msg)}\n"


@pytest.mark.parametrize("argv, msg", [
    (["--max-num-batched-tokens", "0"], Msg("cost.err.outside", name="max_num_batched_tokens", value=0, lo=1,
                                             hi=MAX_CONTEXT)),
    (["--group-size", "5000"], Msg("cost.err.outside", name="group_size", value=5000, lo=1, hi=4096)),
    (["--tp", "3"], Msg("cost.err.tp_heads", tp=3, heads=8)),
    (["--tp", "65"], Msg("cost.err.outside", name="tp", value=65, lo=1, hi=64)),
])
def test_the_kv_commands_numbers_are_refused_in_one_line(capsys, argv, msg):
    config = ROOT / "assets" / "presets" / "configs" / "llama-3.1-8b.json"
    code, out, err = kv(capsys, "--config", str(config), "--context", "10", *argv)
    assert (code, out) == (2, "")
    assert err == f"kv: {say('en', msg)}\n"


# --- the KV memory page, in Korean --------------------------------------------------------------------------------

def run_page(params: dict[str, str]) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app" / "main.py"), default_timeout=120)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    at.switch_page(str(ROOT / "pages" / "kv_memory.py")).run()
    assert not at.exception, at.exception
    return at


def test_the_kv_memory_page_words_its_refusals_in_korean():
    two_layers = json.dumps({**LLAMA, "num_hidden_layers": 2})
    at = run_page({"lang": "ko", "model": "custom", "cfg": two_layers, "share": "4"})
    errors = [unescaped(e.value) for e in at.error]
    # the layers-per-K/V slider (1..8) past a two-layer model's layers: the page's own combination
    assert say("ko", Msg("cost.err.outside", name="layers_per_kv", value=4, lo=1, hi=2)) in errors, errors
    at = run_page({"lang": "ko", "model": "custom", "cfg": json.dumps(CONFIG_REFUSALS[0][0])})
    errors = [unescaped(e.value) for e in at.error]
    assert any(say("ko", CONFIG_REFUSALS[0][1]) in e for e in errors), errors
    # three GPUs against Llama 3.1 8B's eight K/V heads: the engine tab's per-GPU line is refused, in Korean
    at = run_page({"lang": "ko", "ngpu": "3", "tab": "engine"})
    warnings = [unescaped(w.value) for w in at.warning]
    assert say("ko", Msg("cost.err.tp_heads", tp=3, heads=8)) in warnings, warnings
