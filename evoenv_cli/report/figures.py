"""The report's figures: PNG files drawn with matplotlib's Agg canvas from `numbers` alone.

Each function draws one figure from the numbers that the page tables beside it, writes it, and
returns False (writing nothing) when there is nothing to draw yet. Figures are built as plain
`Figure` objects (no pyplot state, no display, no server).
"""

from __future__ import annotations

import math
from pathlib import Path

from evoenv_cli import origins
from evoenv_cli.errors import InputError

RETIRED = {"retired_too_easy": "#55A868", "retired_too_hard": "#C44E52"}
DPI = 100


def _figure(width: float, height: float):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise InputError("matplotlib is not installed: pip install 'evoenv[report]'") from None
    fig = Figure(figsize=(width, height), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: Path) -> bool:
    fig.savefig(path, format="png", dpi=DPI, metadata={"Software": None})
    return True


def _zero_or(v):
    return 0 if v is None else v


# -- the funnel ----------------------------------------------------------------------------------------
def funnel(round_funnel: dict, path: Path) -> bool:
    steps = [s for s in round_funnel["steps"] if s["synthesized"] is not None or s["composite"] is not None]
    if not steps:
        return False
    fig = _figure(6.4, 3.6)
    ax = fig.add_subplot()
    names = [s["step"] for s in steps][::-1]
    synth = [_zero_or(s["synthesized"]) for s in steps][::-1]
    comp = [_zero_or(s["composite"]) for s in steps][::-1]
    y = range(len(names))
    ax.barh(y, synth, color=origins.SYNTHESIZE.color, label=origins.SYNTHESIZE.label)
    ax.barh(y, comp, left=synth, color=origins.COMPOSE.color, label="composites")
    top = max([a + b for a, b in zip(synth, comp)] + [1])
    for yi, a, b in zip(y, synth, comp):
        ax.text(a + b + top * 0.01, yi, f"{a + b}" if not b else f"{a}+{b}", va="center", fontsize=8)
    ax.set_yticks(list(y), names, fontsize=9)
    ax.set_xlim(0, top * 1.15)
    ax.set_xlabel("candidates left after each step")
    ax.set_title(f"round {round_funnel['round']}: admission funnel", fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return _save(fig, path)


# -- the pool ------------------------------------------------------------------------------------------
def pool(pool_numbers: dict, path: Path) -> bool:
    rows = [pool_numbers["start"]] + [r for r in pool_numbers["rounds"] if r["composition"] is not None]
    if len(rows) < 2 and not pool_numbers["start"]["pool_size"]:
        return False
    fig = _figure(6.4, 4.8)
    ax, ax2 = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    x = [r["round"] for r in rows]
    bottom = [0] * len(rows)
    for origin in origins.ORIGINS.values():
        vals = [r["composition"].get(origin.label, 0) for r in rows]
        if origin is origins.OFFERED and not any(vals):
            continue
        ax.bar(x, vals, bottom=bottom, color=origin.color, label=origin.label)
        bottom = [b + v for b, v in zip(bottom, vals)]
    for xi, total in zip(x, bottom):
        ax.text(xi, total, str(total), ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, max(bottom + [1]) * 1.45)
    ax.set_ylabel("pool size")
    ax.yaxis.set_major_locator(_integer_ticks())
    ax.set_title("the pool after each round (round 0: the seeds it starts with)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", ncols=3)
    changes = [r for r in rows if r["round"] > 0]
    cx = [r["round"] for r in changes]
    ax2.bar(cx, [r["joined"] for r in changes], color="#8172B3", label="joined")
    easy = [-r["retired_too_easy"] for r in changes]
    hard = [-r["retired_too_hard"] for r in changes]
    ax2.bar(cx, easy, color=RETIRED["retired_too_easy"], label="retired: too easy")
    ax2.bar(cx, hard, bottom=easy, color=RETIRED["retired_too_hard"], label="retired: too hard")
    ax2.axhline(0, color="black", linewidth=0.6)
    ax2.set_ylabel("change")
    ax2.set_xlabel("round")
    ax2.set_xticks(x)
    lim = max([abs(v) for r in changes for v in (r["joined"], r["retired_too_easy"] + r["retired_too_hard"])] + [1])
    ax2.set_ylim(-lim * 1.3, lim * 1.3)
    ax2.yaxis.set_major_locator(_integer_ticks())
    ax2.legend(fontsize=7, loc="lower left", ncols=3)
    fig.tight_layout()
    return _save(fig, path)


# -- calibration ---------------------------------------------------------------------------------------
MAX_PANELS = 60


def level_span(envs: list[dict]) -> tuple[int, int]:
    """The calibration axes' levels: those measured, not 1..10 (a small model is measured at
    1-3 only). A seed's calibrated levels read 1..10 until it is measured, so they set the
    span only when nothing was measured."""
    seen = [c["level"] for e in envs for c in e["curve"]] or [lv for e in envs for lv in e["levels"]]
    return (min(seen), max(seen)) if seen else (1, 10)


def calibration(cal: dict, path: Path) -> bool:
    envs = cal["environments"][:MAX_PANELS]  # the table beside it lists every one
    if not envs:
        return False
    lo, hi = level_span(envs)
    cols = min(4, len(envs))
    rows = math.ceil(len(envs) / cols)
    fig = _figure(2.6 * cols, 2.0 * rows + 0.5)
    axes = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=True)
    for k, ax in enumerate(axes.flat):
        if k >= len(envs):
            ax.set_axis_off()
            continue
        e = envs[k]
        if e["band"]:
            ax.axhspan(e["band"][0], e["band"][1], color="#55A868", alpha=0.18, linewidth=0)
        pts = [(c["level"], c["pass_rate"]) for c in e["curve"] if c["pass_rate"] is not None]
        if pts:
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker="o",
                markersize=3,
                color=origins.color(e["origin"]),
            )
        else:
            why = "no answers:\nuncalibrated" if e["curve"] else "not measured"
            ax.text((lo + hi) / 2, 0.5, why, ha="center", va="center", fontsize=8, color="#777777")
        for lv in e["levels"]:
            ax.plot([lv], [0.02], marker="|", markersize=7, color="#333333")
        ax.set_title(str(e["name"])[:38], fontsize=7)
        ax.set_xlim(lo - 0.5, hi + 0.5)
        ax.set_xticks(list(range(lo, hi + 1, max(1, (hi - lo) // 5 + 1))))
        ax.set_ylim(0, 1)
        ax.tick_params(labelsize=7)
    fig.suptitle(
        f"pass rate against level, pool after round {cal['after_round'] or '-'} "
        "(green: the band; ticks: calibrated levels)",
        fontsize=10,
    )
    fig.supxlabel("level", fontsize=8)
    fig.supylabel("pass rate", fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


# -- training ------------------------------------------------------------------------------------------
def _round_lines(ax, rounds: list[dict]) -> None:
    for r in rounds[1:]:
        ax.axvline(r["first_global_step"] - 0.5, color="#999999", linestyle="--", linewidth=0.7)


def training(tr: dict, path: Path) -> bool:
    steps = tr["steps"]
    if not steps:
        return False
    fig = _figure(6.4, 6.4)
    ax1, ax2, ax3 = fig.subplots(3, 1, sharex=True)
    x = [s["global_step"] for s in steps]
    mean_ = [s["reward"] for s in steps]
    std = [s["reward_std"] for s in steps]
    ax1.plot(x, [math.nan if v is None else v for v in mean_], marker=".", color="#4C72B0", label="reward mean")
    lo = [math.nan if m is None or s is None else m - s for m, s in zip(mean_, std)]
    hi = [math.nan if m is None or s is None else m + s for m, s in zip(mean_, std)]
    ax1.fill_between(x, lo, hi, color="#4C72B0", alpha=0.2, linewidth=0, label="± std")
    ax1.set_ylabel("reward")
    ax1.legend(fontsize=7, loc="upper left")
    ax1.set_title("training, step by step (dashed: a new round)", fontsize=10)
    ax2.plot(
        x,
        [math.nan if s.get("score_zero_std_share") is None else s["score_zero_std_share"] for s in steps],
        marker=".",
        color="#C44E52",
        label="environment score",
    )
    ax2.plot(
        x,
        [math.nan if s["zero_std_share"] is None else s["zero_std_share"] for s in steps],
        marker=".",
        linestyle=":",
        color="#8C8C8C",
        label="reward sum (format bonus included)",
    )
    ax2.legend(fontsize=7, loc="upper left")
    ax2.set_ylim(-0.05, 1.05)
    ax2.set_ylabel("zero-variance\ngroups", fontsize=8)
    names = sorted({n for s in steps for n in s["per_env"]})
    cmap = _colormap(len(names))
    for k, name in enumerate(names):
        pts = [
            (s["global_step"], s["per_env"][name]["pass_rate"])
            for s in steps
            if name in s["per_env"] and s["per_env"][name]["pass_rate"] is not None
        ]
        if pts:
            ax3.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker="o",
                markersize=3,
                linewidth=0.8,
                color=cmap[k],
                label=name[:30] if len(names) <= 12 else None,
            )
    ax3.set_ylim(-0.05, 1.05)
    ax3.set_ylabel("pass rate\nper environment", fontsize=8)
    ax3.set_xlabel("step (all rounds)")
    if 0 < len(names) <= 12:
        ax3.legend(fontsize=6, loc="upper left", ncols=2)
    for ax in (ax1, ax2, ax3):
        _round_lines(ax, tr["rounds"])
        ax.tick_params(labelsize=7)
    ax3.xaxis.set_major_locator(_integer_ticks())
    fig.tight_layout()
    return _save(fig, path)


def _integer_ticks():
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _colormap(n: int) -> list:
    from matplotlib import colormaps

    cmap = colormaps["tab20"]
    return [cmap(k % 20) for k in range(n)]


# -- evaluation ---------------------------------------------------------------------------------------
def evaluation(ev: dict, path: Path) -> bool:
    rounds = ev["rounds"]
    if not rounds:
        return False
    fig = _figure(6.4, 7.0)
    ax1, ax2 = fig.subplots(2, 1, height_ratios=(2, 3))
    x = [r["round"] for r in rounds]
    lines = ["overall", "environments (mean)"] + sorted(
        {f"bench {s['name']}" for r in rounds for s in r["sources"].values() if s["kind"] == "benchmark"}
    )
    cmap = _colormap(len(lines))
    for k, label in enumerate(lines):

        def value(r, who, label=label):
            if label.startswith("bench "):
                s = r["sources"].get(f"benchmark:{label[6:]}")
                v = s[who] if s else None
            else:
                v = r["headline"][label][who]
            return math.nan if v is None else v

        ax1.plot(x, [value(r, "model") for r in rounds], marker="o", color=cmap[k], label=label[:30])
        ax1.plot(x, [value(r, "baseline") for r in rounds], marker="x", linestyle="--", color=cmap[k])
    ax1.set_ylim(-0.05, 1.05)
    ax1.set_xticks(x)
    ax1.set_xlabel("round")
    ax1.set_ylabel("held-out pass@1")
    ax1.set_title("evaluation per round (solid: trained model; dashed: baseline)", fontsize=10)
    ax1.legend(fontsize=7, loc="best")
    last = rounds[-1]
    sources = sorted(last["sources"].values(), key=lambda s: (s["kind"], s["name"]))
    ys = list(range(len(sources)))[::-1]
    h = 0.4
    ax2.barh(
        [y + h / 2 for y in ys],
        [_zero_or(s["model"]) for s in sources],
        height=h,
        color="#4C72B0",
        label="trained model",
    )
    ax2.barh(
        [y - h / 2 for y in ys], [_zero_or(s["baseline"]) for s in sources], height=h, color="#8C8C8C", label="baseline"
    )
    for y, s in zip(ys, sources):
        ax2.text(
            _zero_or(s["model"]) + 0.01,
            y + h / 2,
            "—" if s["model"] is None else f"{s['model']:.2f}",
            va="center",
            fontsize=6,
        )
    ax2.set_yticks(ys, [("bench " if s["kind"] == "benchmark" else "") + s["name"][:34] for s in sources], fontsize=6)
    ax2.set_xlim(0, 1.1)
    ax2.set_xlabel(f"pass@1 in round {last['round']}")
    ax2.legend(fontsize=7, loc="lower right")
    ax2.tick_params(labelsize=7)
    fig.tight_layout()
    return _save(fig, path)


# -- synthesis yield -------------------------------------------------------------------------------------
# Where each generation ended, from bad to good: no usable code, then rejected by each contract in
# the order the run ran them, admitted but not joined, joined the pool.
OUTCOME_COLORS = {
    "no usable code": "#9E9E9E",
    "validate": "#C44E52",
    "review": "#DD8452",
    "dedupe": "#CCB974",
    "calibrate": "#8172B3",
    "admitted, not joined": "#64B5CD",
    "joined the pool": "#55A868",
}


def outcomes(row: dict, steps: list[str]) -> list[tuple[str, int]]:
    """A yield row's generations split by where each ended: the difference between how many
    reached one step and how many reached the next."""
    out = [("no usable code", row["generations"] - row["parsed"])]
    chain = [s for s in steps if s not in ("generations", "parsed", "joined")]
    before = row["parsed"]
    for stage in chain:
        out.append((stage, before - row[stage]))
        before = row[stage]
    out.append(("admitted, not joined", before - row["joined"]))
    out.append(("joined the pool", row["joined"]))
    return out


def synthesis(syn: dict, path: Path, top: int = 12) -> bool:
    if not syn["total"]["generations"]:
        return False
    fig = _figure(7.4, 7.0)
    axes = fig.subplots(2, 1)
    for ax, key, title in ((axes[0], "by_topic", "by topic"), (axes[1], "by_parent", "by parent (example shown)")):
        rows = sorted(syn[key], key=lambda r: (-r["generations"], r["key"]))[:top]
        y = list(range(len(rows)))[::-1]
        left = [0] * len(rows)
        for k, (label, color) in enumerate(OUTCOME_COLORS.items()):
            widths = []
            for row in rows:
                split = dict(outcomes(row, syn["steps"]))
                widths.append(split.get(label, 0))
            name = (
                label
                if label in ("no usable code", "admitted, not joined", "joined the pool")
                else f"rejected: {label}"
            )
            ax.barh(y, widths, left=left, color=color, label=name if any(widths) or k == 0 else None)
            left = [a + b for a, b in zip(left, widths)]
        # labels wrapped to fit: a topic is a phrase, not an identifier
        ax.set_yticks(y, [_wrap(r["key"], 34) for r in rows], fontsize=6)
        ax.set_title(f"synthesis yield {title}: where each generation ended", fontsize=10)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="lower right")
    axes[1].set_xlabel("generations (all rounds)")
    fig.tight_layout()
    return _save(fig, path)


def _wrap(text: str, width: int) -> str:
    import textwrap

    lines = textwrap.wrap(str(text), width) or [""]
    return "\n".join(lines[:2]) + ("…" if len(lines) > 2 else "")


# -- did it learn? -----------------------------------------------------------------------------------
def learning(ln: dict, path: Path) -> bool:
    rows = [r for r in ln["rounds"] if r["pass@1"] is not None]
    if not rows:
        return False
    fig = _figure(9.6, 3.4)
    ax1, ax2 = fig.subplots(1, 2, width_ratios=(3, 2))
    start = ln["rounds"][0]
    if start["ci95"]:
        ax1.axhspan(start["ci95"][0], start["ci95"][1], color="#8C8C8C", alpha=0.15, linewidth=0)
    if start["pass@1"] is not None:
        ax1.axhline(start["pass@1"], color="#8C8C8C", linestyle="--", linewidth=0.8)
    for r in rows:
        color = "#8C8C8C" if r["round"] == 0 else "#4C72B0"
        err = None
        if r["ci95"]:
            err = [[max(0.0, r["pass@1"] - r["ci95"][0])], [max(0.0, r["ci95"][1] - r["pass@1"])]]
        ax1.errorbar([r["round"]], [r["pass@1"]], yerr=err, fmt="o", color=color, capsize=4, markersize=6)
        ax1.annotate(
            f"{r['pass@1']:.3f}", (r["round"], r["pass@1"]), textcoords="offset points", xytext=(8, -3), fontsize=8
        )
    x = [r["round"] for r in ln["rounds"]]
    ax1.set_xticks(x, ["start" if v == 0 else str(v) for v in x])
    ax1.set_xlim(min(x) - 0.5, max(x) + 0.5)
    top = max([r["ci95"][1] for r in rows if r["ci95"]] + [r["pass@1"] for r in rows])
    ax1.set_ylim(0, min(1.0, top * 1.25 + 0.02))
    ax1.set_xlabel("round (start: the model before training)")
    ax1.set_ylabel("held-out pass@1")
    ax1.set_title("pass@1 per round, with 95% intervals (grey band: the start's)", fontsize=9)
    trained = [r for r in ln["rounds"] if r["round"] > 0]
    shares = [math.nan if r["zero_variance"] is None else r["zero_variance"] for r in trained]
    ax2.bar([r["round"] for r in trained], [0 if v != v else v for v in shares], width=0.5, color="#C44E52")
    for r, v in zip(trained, shares):
        ax2.text(r["round"], (0 if v != v else v) + 0.02, "—" if v != v else f"{v:.0%}", ha="center", fontsize=8)
    ax2.set_ylim(0, 1.12)
    ax2.set_xticks([r["round"] for r in trained] or [1])
    ax2.set_xlim(0.4, max([r["round"] for r in trained] or [1]) + 0.6)
    ax2.set_xlabel("round")
    ax2.set_title("groups whose scores all tied (no signal)", fontsize=9)
    for ax in (ax1, ax2):
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    return _save(fig, path)
