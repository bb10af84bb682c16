"""`make demo`'s record: runs the demo's loop as a child, then writes what it printed and
measured to docs/demo-output.txt (committed) and the README's demo block from that file, so
the README states the figures of the last demo run and tests/test_readme.py holds them together.

  python benchmarks/demo_output.py --run runs/demo -- make iterate ...   # run, then record
  python benchmarks/demo_output.py --run runs/demo                      # record a finished run

The record: date and machine, wall and CPU seconds of the command (its children included; a
resumed run counts only this invocation), the sandbox, held-out pass@1 per round with the
baseline, and every round's lines as the loop printed them (`loop.round_line`).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "demo-output.txt"
README = ROOT / "README.md"
START, END = "<!-- demo-output: start -->", "<!-- demo-output: end -->"


def machine() -> str:
    """The CPU model, whether it has AMX (Intel's matrix units, which torch's CPU kernels use:
    two machines both named "Intel(R) Xeon(R) Processor" ran the demo's generation and
    training about twice as fast with them as without), and the cores this process may use."""
    try:
        info = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        info = []
    names = [line.split(":", 1)[1].strip() for line in info if line.startswith("model name")]
    flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), None)
    model = names[0] if names else platform.processor() or platform.machine()
    amx = "" if flags is None else " with AMX" if "amx_tile" in flags else " without AMX"
    return f"{model}{amx}, {len(os.sched_getaffinity(0))} cores"


def rounds(run: Path) -> list[dict]:
    path = run / "rounds.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def record(run: Path, wall_s: float | None, cpu_s: float | None, when: str, where: str) -> str:
    """docs/demo-output.txt's text for a finished run."""
    sys.path.insert(0, str(ROOT))
    from evoenv_cli.loop import round_line

    summaries = rounds(run)
    if not summaries:
        raise SystemExit(f"demo output: {run}/rounds.jsonl has no finished round")
    lines = [
        "# `make demo`'s output, written by benchmarks/demo_output.py; README.md quotes it (tests/test_readme.py)",
        f"date: {when}",
        f"machine: {where}",
        f"wall_s: {'-' if wall_s is None else round(wall_s)}",
        f"cpu_s: {'-' if cpu_s is None else round(cpu_s)}",
        f"sandbox: {sandbox()}",
    ]
    for s in summaries:
        ev = s.get("evaluation") or {}
        p, d = ev.get("pass@1"), ev.get("delta_vs_baseline")
        if isinstance(p, float) and isinstance(d, float):
            ci = ev.get("delta_ci95")
            shown = f"{ci[0]:+.3f}, {ci[1]:+.3f}" if ci else "-"
            lines.append(
                f"pass@1 round {s['round']}: {p:.3f} baseline {p - d:.3f} delta {d:+.3f} "
                f"paired95 [{shown}] items {ev.get('items')}"
            )
    lines.append("")
    for s in summaries:
        book = run / f"round-{s['round']:02d}" / "loop.json"
        totals = json.loads(book.read_text()).get("totals") if book.exists() else None
        lines.append(round_line(s, totals, str(run / "rounds.jsonl")))
    return "\n".join(lines) + "\n"


def sandbox() -> str:
    """The sandbox `auto` picks on this machine: bwrap, or the weaker process fallback."""
    from evoenv_cli.runtime.sandbox import resolve

    plan = resolve("auto")
    return plan.jail if not plan.fallback else f"{plan.jail} (the weaker fallback: {plan.fallback})"


def fields(text: str) -> dict:
    """The record's header fields and its pass@1 lines, parsed back."""
    out: dict = {"pass@1": {}}
    for line in text.splitlines():
        m = re.match(
            r"pass@1 round (\d+): ([\d.]+) baseline ([\d.]+) delta ([+-][\d.]+) paired95 \[(.+)\] items (\d+)", line
        )
        if m:
            out["pass@1"][int(m.group(1))] = {
                "pass@1": m.group(2),
                "baseline": m.group(3),
                "delta": m.group(4),
                "ci": m.group(5),
                "items": int(m.group(6)),
            }
        elif ": " in line and not line.startswith(("#", " ", "round ")):
            key, value = line.split(": ", 1)
            out[key] = value
    return out


def readme_block(text: str) -> str:
    """The README's demo block, every figure in it taken from the record."""
    f = fields(text)
    runs = [f["pass@1"][r] for r in sorted(f["pass@1"])]
    said = []
    if runs:
        said.append(f"held-out pass@1 on {runs[0]['items']} frozen items went {runs[0]['baseline']} at the start")
        said += [
            f"{x['pass@1']} after round {r} ({x['delta']}, paired 95% interval [{x['ci']}])"
            for r, x in zip(sorted(f["pass@1"]), runs)
        ]
    minutes = "-" if f.get("wall_s", "-") == "-" else f"{int(f['wall_s']) / 60:.1f} minutes"
    body = "\n".join(line for line in text.splitlines() if line.startswith(("round ", "  ")))
    return (
        f"{START}\n"
        f"The last `make demo` (docs/demo-output.txt, {f.get('date')}, {f.get('machine')}, sandbox "
        f"{f.get('sandbox')}): {minutes} wall, {f.get('cpu_s')} CPU-seconds; "
        + ", ".join(said)
        + ". Its round lines:\n\n```\n"
        + body
        + f"\n```\n{END}"
    )


def update_readme(text: str, readme: Path = README) -> None:
    page = readme.read_text()
    start, end = page.index(START), page.index(END) + len(END)
    readme.write_text(page[:start] + readme_block(text) + page[end:])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- the demo's command (omit to record a run)")
    args = ap.parse_args()
    wall = cpu = None
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if command:
        started = time.perf_counter()
        code = subprocess.call(command)
        wall = time.perf_counter() - started
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = usage.ru_utime + usage.ru_stime
        if code != 0:
            sys.exit(code)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = record(args.run, wall, cpu, when, machine())
    OUT.write_text(text)
    update_readme(text)
    print(f"demo output: {OUT.relative_to(ROOT)} and README.md's demo block rewritten", file=sys.stderr)


if __name__ == "__main__":
    main()
