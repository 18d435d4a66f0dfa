"""The lab's command line: the same simulators as the pages, for scripts and for checking a page's numbers.

    python -m app.cli kv      --config PATH --context N [--batch B] [--kv-dtype fp16|bf16|fp8|int8|int4]
    python -m app.cli prefix  --trace PATH [--block-size 16] [--num-blocks N]
    python -m app.cli prefix-hit --config PATH --prompt-len N [--kv-dtype ...] [--block-size B]
    python -m app.cli serve   --trace PATH [--policy static|continuous|chunked] ...

Each subcommand lives in its own module (app/cli_kv.py, app/cli_trace.py) and is imported only when
asked for, so `kv` never loads the serving simulator. Every subcommand prints a human-readable table,
then as its LAST line one JSON object (the contract scripts parse). A bad input exits with code 2 and
one line on stderr that names what is wrong. Text that came from a file or an argument is printed through
`shown` (control characters written out, shortened): a trace's ids must not drive the terminal.
"""

from __future__ import annotations

import importlib
import sys

MAX_SHOWN = 80  # characters of one untrusted value in a line
MAX_ERROR = 300  # characters of an error line


def shown(value: object, limit: int = MAX_SHOWN) -> str:
    """Untrusted text for the terminal: every control character (ESC, CR, BEL, U+2028…) written out as its
    escape, never sent as is, and at most `limit` characters."""
    from app.text import shorten  # no Streamlit in it

    return shorten(str(value), limit)


def fail(message: object, prog: str = "") -> int:
    """Print one error line on stderr (whitespace runs folded, escaped, shortened) and return exit code 2."""
    line = " ".join(str(message).split())
    print(shown(f"{prog}: {line}" if prog else line, MAX_ERROR), file=sys.stderr)
    return 2


def run_parsed(parser, run, name: str, argv: list[str] | None, errors: tuple[type[Exception], ...]) -> int:
    """A subcommand's main: parse `argv`, print what `run(args)` returns, and turn `errors` (a bad command line, a
    refusal) into one error line and exit code 2; --help exits 0."""
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        print(run(args))
    except SystemExit as exc:  # --help
        return int(exc.code or 0)
    except errors as exc:  # one line, control characters written out, shortened
        return fail(exc, name)
    return 0


# subcommand -> (module, one-line help)
SUBCOMMANDS = {
    "kv": ("app.cli_kv", "KV-cache bytes per layer group for any Hugging Face config.json"),
    "prefix": ("app.cli_trace", "replay a JSONL trace through the prefix cache"),
    "prefix-hit": ("app.cli_prefix_hit", "prefix-cache hits for a prompt sent twice (hybrid models' block size)"),
    "serve": ("app.cli_trace", "serve a JSONL trace with a batching policy"),
}


def usage() -> str:
    width = max(map(len, SUBCOMMANDS))
    lines = ["usage: python -m app.cli {" + ",".join(SUBCOMMANDS) + "} [options]", ""]
    lines += [f"  {name:<{width}}  {help_}" for name, (_, help_) in SUBCOMMANDS.items()]
    lines += ["", "python -m app.cli <subcommand> --help shows its options."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0 if argv else 2
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        return fail(f"unknown subcommand {shown(name, 40)!r}: choose one of {', '.join(SUBCOMMANDS)}")
    module = importlib.import_module(SUBCOMMANDS[name][0])
    return int(module.main(name, rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
