import pytest
import torch

from sim.model.device import pick_device, pick_dtype, probe_sdpa_backends
from sim.msg import Msg
from sim.refusal import Refusal
from sim.words import say
from sim.work.threads import pick_num_threads


def test_env_overrides_device():
    assert pick_device({"KVLAB_DEVICE": "cpu"}) == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert pick_device({}).type == expected
    if not torch.cuda.is_available():
        with pytest.raises(Refusal) as info:
            pick_device({"KVLAB_DEVICE": "cuda"})
        assert (info.value.key, info.value.fields) == ("model.err.no_cuda", {"env": "KVLAB_DEVICE", "want": "cuda"})
    with pytest.raises(Refusal) as info:
        pick_device({"KVLAB_DEVICE": "gpu-please"})
    assert info.value.key == "model.err.unknown_device" and info.value.fields["want"] == "gpu-please"


def test_dtype_and_threads():
    assert pick_dtype(torch.device("cpu")) == torch.float32
    assert pick_num_threads({}, cpu_count=2) == 1
    assert pick_num_threads({}, cpu_count=1) == 1
    assert pick_num_threads({}, cpu_count=12) == 6
    assert pick_num_threads({}, cpu_count=64) == 8
    assert pick_num_threads({"KVLAB_THREADS": "3"}, cpu_count=2) == 3
    # whoever starts the server sets it: a bad value is a Refusal naming the variable and the value as given
    # (before, "1.5" or "two" escaped as int()'s own "invalid literal" message)
    for bad in ("0", "1.5", "two", "-3", "²"):
        with pytest.raises(Refusal) as e:
            pick_num_threads({"KVLAB_THREADS": bad})
        assert (e.value.key, e.value.fields) == ("work.err.threads", {"name": "KVLAB_THREADS", "got": repr(bad)})
    assert say("ko", e.value.msg) == f"KVLAB_THREADS은(는) 1 이상의 정수여야 한다. 받은 값: {bad!r}"


def test_probe_on_cpu():
    probes = {b.name: b for b in probe_sdpa_backends(torch.device("cpu"), torch.float32)}
    assert probes["math"].runs and probes["math"].reason == ""
    assert not probes["cudnn"].runs and probes["cudnn"].reason == Msg("home.why.cpu_only")  # the lab's own reason
