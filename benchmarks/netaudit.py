"""Run a command's Python process with every outside network attempt written down (PEP 578 audit hooks).

`python -m benchmarks.netaudit LOG -- streamlit run app/main.py ...` runs Streamlit exactly as the README does,
in this process, after an audit hook is installed that appends one line to LOG for each name lookup
(`socket.getaddrinfo`, `socket.gethostbyname`) of a host that is not this machine and each `socket.connect` to
an address off the loopback range. The lab promises no request leaves the machine, at start or later: a test
reads LOG and expects it empty. The hook sees what Python code asks for, whatever library asks (Streamlit's
external-IP lookup, a telemetry client, a model hub); it does not see a compiled extension's own sockets.
"""

from __future__ import annotations

import ipaddress
import runpy
import sys

LOCAL_NAMES = {"", "localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}


def is_local(host: object) -> bool:
    """This machine's own names and the loopback addresses (127.0.0.0/8, ::1); a Unix socket path is local too."""
    if host is None or isinstance(host, bytes | bytearray):
        return host is None or bytes(host).decode(errors="replace") in LOCAL_NAMES
    if not isinstance(host, str) or host.startswith("/"):
        return True
    if host.lower() in LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.split("%", 1)[0]).is_loopback or host in ("0.0.0.0", "::")
    except ValueError:
        return False  # a host name other than this machine's: a lookup that would leave it


def outside(event: str, args: tuple) -> str | None:
    """The line to record for one audit event, or None when it stays on this machine."""
    if event == "socket.connect":
        address = args[1]
        host = address[0] if isinstance(address, tuple) else address
        return None if is_local(host) else f"connect {address!r}"
    if event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyaddr"):
        return None if is_local(args[0]) else f"{event.split('.')[1]} {args[0]!r}"
    return None


def install(log_path: str) -> None:
    def hook(event: str, args: tuple) -> None:
        line = outside(event, args)
        if line is not None:
            with open(log_path, "a", encoding="utf-8") as f:
                f.write(line + "\n")

    sys.addaudithook(hook)


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        raise SystemExit("usage: python -m benchmarks.netaudit LOG -- MODULE [ARGS...]")
    install(argv[0])
    sys.argv = argv[2:]
    runpy.run_module(argv[2], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(sys.argv[1:])
