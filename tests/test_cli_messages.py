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


def test_the_commands_own_refusals_are_message_values_with_their_numbers(tmp_path, capsys, monkeypatch):
    """prefix and serve refuse a pool past the limit, a request the pool cannot hold and static batching with
    options it has no use for as Refusals (both languages in the catalog), printed as one English line."""
    import app.cli_trace
    from app.cli import fail
    from sim.alloc.block_pool import MAX_CAPACITY_TOKENS
    from sim.refusal import Refusal
    from sim.words import say

    trace = tmp_path / "t.jsonl"
    trace.write_text('{"prompt_len": 10, "output_len": 2}\n{"prompt_len": 3000, "output_len": 3}\n')
    failed = []
    monkeypatch.setattr(app.cli_trace, "fail", lambda exc, prog="": failed.append(exc) or fail(exc, prog))
    cases = [
        (("prefix", "--num-blocks", "2"), "cli.err.request_too_big",
         {"line": 2, "tokens": 3002, "need": 188, "bs": 16, "blocks": 2}),
        (("prefix", "--num-blocks", str(MAX_CAPACITY_TOKENS), "--block-size", "2"), "cli.err.pool_limit",
         {"blocks": MAX_CAPACITY_TOKENS, "bs": 2, "slots": 2 * MAX_CAPACITY_TOKENS, "max": MAX_CAPACITY_TOKENS}),
        (("serve", "--policy", "static", "--prefix-caching"), "cli.err.static_options", {}),
    ]
    for (sub, *argv), key, fields in cases:
        failed.clear()
        code, out, err = run(capsys, sub, "--trace", str(trace), *argv)
        assert code == 2 and out == "" and err.count("\n") == 1
        assert [(type(e), e.key, e.fields) for e in failed] == [(Refusal, key, fields)]
        assert err == f"{sub}: {say('en', failed[0].msg)}\n" and say("ko", failed[0].msg) != say("en", failed[0].msg)
