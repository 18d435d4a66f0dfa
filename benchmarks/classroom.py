"""A class opening the lab at once: thirty real browser sessions against one server.

    python -m benchmarks.classroom [--sessions 30] [--heavy 10] [--same 5]

Starts the app on 127.0.0.1, opens one Debian Chromium with one browser context per student, and
points them all at once at every page with different URL values, `--heavy` of them at the real-model
Decode cost page (each with its own number of new tokens, so each needs its own run through the
server's one queue). Each session must show its own numbers — KV memory its own batch's total, Decode
cost its own token count, every page the URL values it was given — and no exception. The whole run
is bounded to five minutes. Then `--same` more sessions open one identical Decode cost link at once (a class
following the teacher's link): the server must compute that run once and show it to all of them (the server logs
each run computed or shared, KVLAB_WORK_LOG=1). Prints a table per page, then as its LAST line exactly:
    sessions=<n> completed=<n> errors=<n> p50_s=<x> p95_s=<x> peak_rss_mb=<x>
(p50/p95: seconds from opening the URL to the page's first chart or table, over completed sessions).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from dataclasses import dataclass, field

from benchmarks.browser import CHROMIUM, CHROMIUM_ARGS, DONE, ROOT, VISUAL, AppServer

BOUND_S = 300.0


@dataclass
class Session:
    page: str
    params: dict[str, str]
    expect_text: str = ""  # a string the page must show (computed from sim/, not typed in)
    first_chart_s: float | None = None
    ok: bool = False
    error: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def path(self) -> str:
        query = "&".join(f"{k}={v}" for k, v in self.params.items())
        return f"/{'' if self.page == 'home' else self.page}" + (f"?{query}" if query else "")


def kv_total(batch: int) -> str:
    """What KV memory must show for Llama 3.1 8B at 32,768 tokens in fp16 with this batch."""
    from sim.cost.memory import MemoryConfig, fmt_bytes, kv_memory
    from sim.cost.presets import load_presets

    arch = load_presets()["llama-3.1-8b"]
    return fmt_bytes(kv_memory(MemoryConfig(arch, batch=batch, context=32768, kv_dtype="fp16")).total_bytes)


def plan(num_sessions: int, num_heavy: int) -> list[Session]:
    """num_heavy on Decode cost, the rest spread over every other page, each with its own values."""
    heavy = [Session("decode_cost", {"n": str(16 + 8 * i)}, f"all {16 + 8 * i} tokens") for i in range(num_heavy)]
    light_kinds = [
        ("kv_memory", lambda i: {"batch": str(4 + i)}, lambda i: kv_total(4 + i)),
        ("serving", lambda i: {"requests": str(200 + 100 * i)}, None),
        ("roofline", lambda i: {"batch": str(1 + i)}, None),
        ("paged_blocks", lambda i: {"requests": str(500 + 100 * i)}, None),
        ("prefix_caching", lambda i: {"requests": str(100 + 20 * i)}, None),
        ("attention_masks", lambda i: {"prompt": f"To be, or not {i}"}, None),
        ("kv_quantization", lambda i: {"win": str(1 + i % 3)}, None),
        ("attention_kernels", lambda i: {"sm_keys": str(10 + i)}, None),
        ("home", lambda i: {}, None),
    ]
    light, i = [], 0
    while len(heavy) + len(light) < num_sessions:
        page, params, expect = light_kinds[i % len(light_kinds)]
        k = i // len(light_kinds)
        light.append(Session(page, params(k), expect(k) if expect else ""))
        i += 1
    # interleave so the heavy sessions do not all arrive first
    out, h, l_ = [], list(heavy), list(light)
    while h or l_:
        if l_:
            out.append(l_.pop(0))
        if h:
            out.append(h.pop(0))
    return out


async def run_session(browser, base: str, s: Session) -> None:
    # reduced motion: Streamlit's running/skeleton animations otherwise repaint every waiting tab at
    # full frame rate, and all thirty tabs share the server's two cores (a real class brings its own)
    context = await browser.new_context(viewport={"width": 1280, "height": 900}, reduced_motion="reduce")
    page = await context.new_page()
    t0 = time.perf_counter()
    try:
        await page.goto(base + s.path, wait_until="domcontentloaded", timeout=120_000)
        await page.wait_for_selector(VISUAL, state="visible", timeout=BOUND_S * 1000)
        s.first_chart_s = time.perf_counter() - t0
        await page.wait_for_selector(DONE, timeout=BOUND_S * 1000)
        if await page.locator('[data-testid="stException"]').count():
            raise AssertionError("an exception box is shown")
        shown = await page.evaluate("() => Object.fromEntries(new URLSearchParams(location.search))")
        wrong = {k: shown.get(k) for k, v in s.params.items() if shown.get(k) != v}
        if wrong:
            raise AssertionError(f"the page shows other values: {wrong}")
        if s.expect_text:
            await page.get_by_text(s.expect_text).first.wait_for(timeout=BOUND_S * 1000)
        s.ok = True
    except Exception as exc:  # a benchmark reports, it does not stop at the first failure
        s.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    finally:
        await context.close()


async def run_all(base: str, sessions: list[Session]) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            tasks = [asyncio.create_task(run_session(browser, base, s)) for s in sessions]
            done, pending = await asyncio.wait(tasks, timeout=BOUND_S)
            for t in pending:
                t.cancel()
            for s in sessions:
                if not s.ok and not s.error:
                    s.error = f"not finished within {BOUND_S:.0f} s"
        finally:
            await browser.close()


SAME_PATH = "/decode_cost?n=96&seed=7"  # in no session above: its run starts from nothing


def log_count(server: AppServer, what: str) -> int:
    """How many of the server's work-log lines (app/work.py, KVLAB_WORK_LOG=1) start with `what` after the time."""
    lines = server.log_path.read_text(errors="replace").splitlines()
    return sum(1 for line in lines if " kvlab.work " in line and line.split(" kvlab.work ", 1)[1].startswith(what))


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--heavy", type=int, default=10)
    ap.add_argument("--same", type=int, default=5)
    args = ap.parse_args()
    if not 1 <= args.sessions <= 60 or not 0 <= args.heavy <= args.sessions or not 0 <= args.same <= 30:
        raise SystemExit("--sessions must be 1..60, --heavy 0..sessions and --same 0..30")
    sessions = plan(args.sessions, args.heavy)
    same = [Session("decode_cost", {"n": "96", "seed": "7"}, "all 96 tokens") for _ in range(args.same)]
    assert all(s.path == SAME_PATH for s in same)
    with AppServer(ROOT / "test-output" / "classroom-streamlit.log", env={"KVLAB_WORK_LOG": "1"}) as server:
        t0 = time.perf_counter()
        asyncio.run(run_all(server.url, sessions))
        wall = time.perf_counter() - t0
        peak, cpu = server.peak_rss_mb(), server.cpu_s()
        gated = log_count(server, "gated=decode_cost.compare")
        before = log_count(server, "computed=decode_cost.compare")
        if same:
            asyncio.run(run_all(server.url, same))
        same_computed = log_count(server, "computed=decode_cost.compare") - before
    pages = sorted({s.page for s in sessions})
    print(f"{'page':<20} {'sessions':>8} {'ok':>4} {'first chart p50 s':>18} {'p95 s':>7}")
    for p in pages:
        group = [s for s in sessions if s.page == p]
        times = [s.first_chart_s for s in group if s.ok and s.first_chart_s is not None]
        print(f"{p:<20} {len(group):>8} {sum(s.ok for s in group):>4} {pct(times, 50):>18.1f} {pct(times, 95):>7.1f}")
    for s in sessions:
        if not s.ok:
            print(f"  failed: {s.path}: {s.error}")
    times = [s.first_chart_s for s in sessions if s.ok and s.first_chart_s is not None]
    print(f"all {len(sessions)} sessions opened at once; the last finished after {wall:.1f} s; the server used "
          f"{cpu:.1f} CPU s; times a Decode cost run was held for its button: {gated}")
    if same:
        print(f"then {len(same)} sessions opened {SAME_PATH} at once: {sum(s.ok for s in same)} showed its result; "
              f"the server computed it {same_computed} time(s)")
        for s in same:
            if not s.ok:
                print(f"  failed: {s.path}: {s.error}")
    completed = sum(s.ok for s in sessions)
    print(f"sessions={len(sessions)} completed={completed} errors={len(sessions) - completed} "
          f"p50_s={pct(times, 50):.1f} p95_s={pct(times, 95):.1f} peak_rss_mb={peak:.0f}")


if __name__ == "__main__":
    main()
