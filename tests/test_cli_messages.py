"""The command line speaks like its tables: requests named by their 1-based line, usage lines that give the whole
command, and help that lists the names an option takes."""

from app.cli import main
from sim.cost.gpus import load_gpus
from sim.cost.presets import load_presets


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_request_that_cannot_fit_is_named_by_its_line(tmp_path, capsys):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"prompt_len": 10, "output_len": 2}\n{"prompt_len": 3000, "output_len": 3}\n')
    code, out, err = run(capsys, "prefix", "--trace", str(trace), "--num-blocks", "2")
    assert code == 2 and out == ""
    assert err == ("prefix: line 2: the request stores 3,002 tokens = 188 blocks of 16, but the cache holds 2 "
                   "blocks: raise --num-blocks to at least 188\n")


def test_usage_names_the_whole_command_and_help_lists_the_names(capsys):
    for sub in ("prefix", "serve", "kv"):
        code, out, _ = run(capsys, sub, "--help")
        assert code == 0 and out.startswith(f"usage: python -m app.cli {sub} ")
    _, out, _ = run(capsys, "serve", "--help")
    flat = " ".join(out.split())
    for name in [*load_presets(), *load_gpus()]:
        assert f" {name}," in flat or f" {name} " in flat  # each name whole, never cut at a hyphen
    code, _, err = run(capsys, "prefix", "--trace")
    assert code == 2 and err == "prefix: argument --trace: expected one argument\n"  # errors: the short name


def test_every_subcommand_prints_untrusted_text_escaped_on_one_line(tmp_path, capsys):
    """kv and prefix-hit word their errors as prefix and serve do: 'name: …', control characters written out."""
    bad = str(tmp_path / "no\x1b[31mconfig.json")
    for sub, argv in (("kv", ["--config", bad, "--context", "8"]),
                      ("prefix-hit", ["--config", bad, "--prompt-len", "8"])):
        code, out, err = run(capsys, sub, *argv)
        assert code == 2 and out == "" and err.startswith(f"{sub}: ") and err.count("\n") == 1
        assert "\x1b" not in err and "\\x1b[31m" in err
