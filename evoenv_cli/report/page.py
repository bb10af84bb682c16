"""The report's pages: index.html (each figure with its numbers tabled beside it) and one
small page per example verdict, all static HTML that opens from disk with no script, no
server and no network. Everything taken from the run (reasons, sources, responses: text an
untrusted model wrote) is HTML-escaped.

Why one module: the page is one HTML template and the renderers that fill it; split, a figure's
markup and the code that writes its numbers would live apart.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path

from evoenv_cli import origins
from evoenv_cli.report.run_files import RunFiles

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "DejaVu Sans", sans-serif; margin: 0 auto;
       padding: 12px 24px 48px; max-width: 1500px; color: #1d1d1f; background: #fff; }
h1 { font-size: 22px; margin: 8px 0 4px; } h2 { font-size: 18px; margin: 32px 0 8px;
border-bottom: 1px solid #ddd; padding-bottom: 4px; } h3 { font-size: 15px; margin: 18px 0 6px; }
.row { display: flex; flex-wrap: wrap; gap: 20px; align-items: flex-start; }
figure { margin: 0; flex: 0 0 auto; border: 1px solid #eee; } figure img { display: block; }
.numbers { flex: 1 1 420px; min-width: 320px; overflow-x: auto; }
table { border-collapse: collapse; font-size: 12px; margin: 0 0 10px; }
th, td { border: 1px solid #ddd; padding: 2px 7px; text-align: left; vertical-align: top; }
th { background: #f4f4f6; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.missing { color: #999; } .pos { color: #1a7f37; } .neg { color: #c0392b; }
.problems { border: 1px solid #e0a800; background: #fff8e1; padding: 8px 14px; margin: 10px 0; }
.note { color: #555; font-size: 12px; } nav a { margin-right: 12px; }
.verdict { font-size: 15px; background: #f4f8fc; border-left: 4px solid #4C72B0; padding: 6px 12px; }
pre { background: #f7f7f9; border: 1px solid #e3e3e8; padding: 8px; overflow-x: auto; font-size: 12px;
      white-space: pre-wrap; word-break: break-word; }
details > summary { cursor: pointer; color: #333; }
"""


def h(value) -> str:
    return html.escape(str(value), quote=True)


def cell(value, signed: bool = False) -> str:
    """A table cell for a value from the run: missing values visibly missing, fractions to three
    places, anything else escaped."""
    if value is None:
        return '<td class="missing">—</td>'
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, int):
        return f'<td class="n">{value}</td>'
    if isinstance(value, float):
        text = f"{value:+.3f}" if signed else f"{value:.3f}"
        cls = " pos" if signed and value > 0 else " neg" if signed and value < 0 else ""
        return f'<td class="n{cls}">{text}</td>'
    return f"<td>{h(value)}</td>"


def table(headers: Iterable[str], rows: Iterable[Iterable[str]], caption: str | None = None) -> str:
    head = "".join(f"<th>{h(x)}</th>" for x in headers)
    body = "".join("<tr>" + "".join(r) + "</tr>" for r in rows)
    cap = f"<caption class='note' style='text-align:left'>{h(caption)}</caption>" if caption else ""
    thead = f"<thead><tr>{head}</tr></thead>" if head else ""
    return f"<table>{cap}{thead}<tbody>{body}</tbody></table>"


def document(title: str, body: str) -> str:
    return (
        f"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{h(title)}</title><style>{CSS}</style></head><body>\n{body}\n</body></html>\n"
    )


class Links:
    """Relative links from the report folder to the run's files."""

    def __init__(self, run: RunFiles, report_dir: Path):
        self.run = run
        self.report_dir = report_dir

    def to(self, rel: str) -> str:
        return Path(os.path.relpath(self.run.path(rel).resolve(), self.report_dir.resolve())).as_posix()

    def a(self, rel: str, text: str | None = None) -> str:
        return f"<a href='{h(self.to(rel))}'>{h(text or rel)}</a>"


def figure(src: str | None, alt: str, missing: str) -> str:
    if src is None:
        return f"<figure><p class='missing'>{h(missing)}</p></figure>"
    return f"<figure><img src='{h(src)}' alt='{h(alt)}'></figure>"


# -- sections --------------------------------------------------------------------------------------
def status_section(numbers: dict) -> str:
    rows = []
    for r in numbers["rounds"]:
        s = r["summary"] or {}
        ev = s.get("evaluation") if isinstance(s.get("evaluation"), dict) else {}
        state = "finished" if r["finished"] else f"unfinished: at {r['stopped_in'] or '?'} (running or stopped)"
        done = sum(v == "done" for v in r["steps"].values())
        rows.append(
            [
                f"<td><a href='#round-{r['round']}'>{r['round']}</a></td>",
                f"<td>{h(state)}</td>",
                f"<td class='n'>{done}/{len(r['steps'])}</td>",
                cell(s.get("pool_size")),
                cell(s.get("mean_train_reward")),
                cell(ev.get("pass@1")),
            ]
        )
    if not rows:
        return "<p class='missing'>no round has started yet</p>"
    return table(
        ["round", "state", "steps done", "pool size", "mean train reward", "eval pass@1"],
        rows,
        "from rounds.jsonl where a round finished; from the stage folders where it did not",
    )


def learning_section(numbers: dict, fig_src) -> str:
    """The first question, answered first: pass@1 per round with its interval, the start as
    round 0, the change, and how much of training had a signal to learn from."""
    ln = numbers["learning"]
    rows = []
    for r in ln["rounds"]:
        ci = f"{r['ci95'][0]:.3f} – {r['ci95'][1]:.3f}" if r["ci95"] else None
        share = r["zero_variance"]
        rows.append(
            [
                f"<td>{'0 (start)' if r['round'] == 0 else r['round']}</td>",
                f"<td>{h(r['model'] or '—')}</td>",
                cell(r["pass@1"]),
                cell(ci),
                cell(r["items"] if type(r["items"]) is int else None),
                cell(r["delta"], signed=True),
                cell(f"{r['delta_ci95'][0]:+.3f} – {r['delta_ci95'][1]:+.3f}" if r.get("delta_ci95") else None),
                cell(None) if share is None else f"<td class='n'>{share:.0%}</td>",
                cell(r["signal"]),
            ]
        )
    tab = table(
        ["round", "model", "pass@1", "95% interval", "items", "Δ vs start", "Δ 95% (paired)", "groups tied", "signal"],
        rows,
        "held-out pass@1 on the run's fixed evaluation set; groups tied: the share of GRPO groups whose "
        "scores (or, where the score was not logged apart, rewards) were all equal, which teach nothing",
    )
    return (
        f"<p class='verdict' id='verdict'><b>In short:</b> {h(ln['verdict'])}.</p>"
        f"<div class='row'>{figure(fig_src('learning.png'), 'pass@1 per round with 95% intervals', 'not evaluated yet')}"
        f"<div class='numbers'>{tab}</div></div>"
    )


def problems_section(numbers: dict, links: Links) -> str:
    if not numbers["problems"]:
        return ""
    items = []
    for p in numbers["problems"]:
        where = f"{p['path']}:{p['line']}" if p["line"] is not None else p["path"]
        items.append(f"<li>{links.a(p['path'], where)}: {h(p['message'])}</li>")
    return (
        f"<div class='problems' id='problems'><b>{len(items)} problem(s) reading the run</b> — the "
        f"report shows everything else:<ul>{''.join(items)}</ul></div>"
    )


def funnel_section(
    numbers: dict, links: Links, fig_src: Callable[[str], str | None], example_page: Callable[[dict, int, str], str]
) -> str:
    parts = []
    for f in numbers["funnel"]:
        r = f["round"]
        step_rows = []
        for s in f["steps"]:
            total = (
                None
                if s["synthesized"] is None and s["composite"] is None
                else (s["synthesized"] or 0) + (s["composite"] or 0)
            )
            step_rows.append([f"<td>{h(s['step'])}</td>", cell(s["synthesized"]), cell(s["composite"]), cell(total)])
        steps_table = table(["step", "synthesized", "composites", "left"], step_rows, "candidates left after each step")
        stage_rows = []
        for name, st in f["stages"].items():
            label = "synthesize (parse)" if name == "synthesize" else name
            stage_rows.append(
                [
                    f"<td>{h(label)}</td>",
                    f"<td>{h(st['status'])}</td>",
                    cell(st["entered"]),
                    cell(st["admitted"]),
                    cell(st["rejected"]),
                ]
            )
        stages_table = table(
            ["stage", "status", "entered", "admitted", "rejected"],
            stage_rows,
            "counted from the verdict lines, so a stage still running counts what it decided",
        )
        reason_rows = []
        for name, st in f["stages"].items():
            for reason in st["reasons"]:
                examples = []
                for k, ex in enumerate(reason["examples"]):
                    page = example_page(ex, r, name)
                    verdict_link = links.a(ex["verdicts"], f"{Path(ex['verdicts']).name}:{ex['line']}")
                    src = f" · {links.a(ex['source'], 'file')}" if ex.get("source") else ""
                    examples.append(
                        f"<a href='{h(page)}'>{h(ex.get('name') or ex.get('file') or k + 1)}</a> ({verdict_link}{src})"
                    )
                reason_rows.append(
                    [
                        f"<td>{h(name)}</td>",
                        f"<td>{h(reason['check'])}</td>",
                        cell(reason["count"]),
                        f"<td>{h(reason['pattern'])}</td>",
                        f"<td>{'<br>'.join(examples)}</td>",
                    ]
                )
        reasons_table = (
            table(
                ["stage", "check", "count", "reason (particulars blanked)", "examples"],
                reason_rows,
                "rejections by the check that decided and the kind of reason",
            )
            if reason_rows
            else "<p class='note'>no rejection in this round</p>"
        )
        joined = f["joined"]
        joined_text = (
            "<p class='note'>joined the pool: " + (", ".join(h(j) for j in joined) or "none") + "</p>"
            if joined is not None
            else "<p class='note missing'>no pool update yet in this round</p>"
        )
        parts.append(
            f"<h3 id='round-{r}'>Round {r}</h3><div class='row'>"
            f"{figure(fig_src(f'funnel-round-{r:02d}.png'), f'admission funnel, round {r}', 'no candidates yet')}"
            f"<div class='numbers'>{steps_table}{stages_table}{joined_text}</div></div>{reasons_table}"
        )
    return "".join(parts) or "<p class='missing'>no round folder yet</p>"


def pool_section(numbers: dict, links: Links, fig_src) -> str:
    p = numbers["pool"]
    rows = []
    for r in [p["start"]] + p["rounds"]:
        comp = r["composition"] or {}
        rows.append(
            [
                cell(r["round"]),
                cell(r["pool_size"]),
                cell(comp.get("seed") if comp else None),
                cell(comp.get("composite") if comp else None),
                cell(comp.get("synthesized") if comp else None),
                cell(r.get("joined")),
                cell(r.get("retired_too_easy")),
                cell(r.get("retired_too_hard")),
            ]
        )
    main = table(
        ["round", "size", "seeds", "composites", "synthesized", "joined", "retired: too easy", "retired: too hard"],
        rows,
        "round 0: the pool before round 1; — : no pool update yet",
    )
    retired = []
    for r in p["rounds"]:
        for x in r["retired"]:
            link = links.a(x["verdicts"], f"rotate verdict line {x['line']}") if x["verdicts"] else "—"
            retired.append(
                [
                    cell(r["round"]),
                    f"<td>{h(x['name'])}</td>",
                    f"<td>{h(x['origin'])}</td>",
                    f"<td>{h(x['stage'])}</td>",
                    f"<td>{h(x['reason'] or '')}</td>",
                    f"<td>{link}</td>",
                ]
            )
    retired_table = (
        table(["round", "environment", "origin", "why", "reason", "verdict"], retired, "retired environments")
        if retired
        else "<p class='note'>no environment retired</p>"
    )
    return (
        f"<div class='row'>{figure(fig_src('pool.png'), 'the pool over rounds', 'no pool yet')}"
        f"<div class='numbers'>{main}{retired_table}</div></div>"
    )


def _level_cell(c: dict) -> str:
    """A level's pass rate, and (when calibration measured them) its guess rate and sample size."""
    if c["pass_rate"] is None or c.get("guess_rate") is None:
        return cell(c["pass_rate"])
    return f'<td class="n">{c["pass_rate"]:.3f} <small>guess {c["guess_rate"]:.2f} n={h(str(c["n"]))}</small></td>'


def newcomers_section(numbers: dict) -> str:
    """The environments that joined after the start, per round: origin, predicted against
    measured pass rate, training rows and held-out pass@1; then the prediction's error."""
    new = numbers.get("newcomers") or {}
    rows = [
        [
            cell(n["round"]),
            f"<td>{h(str(n.get('name')))}</td>",
            f"<td>{h(n['operator'] + ' of ' + ', '.join(n.get('parents') or [])) if n.get('operator') else origins.phrase(n)}</td>",
            cell(n.get("joined_round")),
            cell(n.get("level")),
            cell(n.get("predicted")),
            cell(n.get("measured")),
            cell(n.get("train_rows")),
            cell(n.get("held_out_before")),
            cell(n.get("held_out")),
        ]
        for n in new.get("rows") or []
    ]
    errors = new.get("errors") or []
    note = (
        f"<p class='note'>prediction error (measured − predicted pass rate) over {len(errors)} calibrated "
        f"(composite, level) pairs: mean {new['mean_error']:+.3f}, mean absolute {new['mean_abs_error']:.3f}</p>"
        if errors
        else ""
    )
    if not rows:
        return "<p class='missing'>no environment joined the pool after the start</p>" + note
    return (
        table(
            [
                "round",
                "environment",
                "origin",
                "joined",
                "level",
                "predicted",
                "measured",
                "train rows",
                "held-out before",
                "held-out now",
            ],  # fmt: skip
            rows,
            "newcomers per round: the pass rate compose predicted from its parts, what calibration measured "
            "when it joined, the rows this round trained on, held-out pass@1 of the baseline and this round",
        )
        + note
    )


def calibration_section(numbers: dict, links: Links, fig_src) -> str:
    cal = numbers["calibration"]
    levels = sorted({c["level"] for e in cal["environments"] for c in e["curve"]})
    rows = []
    for e in cal["environments"]:
        by = {c["level"]: c for c in e["curve"]}
        band = f"{e['band'][0]}–{e['band'][1]}" if e["band"] else None
        name = f"<td>{links.a(e['file'], str(e['name']))}</td>" if e.get("file") else f"<td>{h(e['name'])}</td>"
        rows.append(
            [
                name,
                f"<td>{h(e['origin'])}</td>",
                cell(band),
                f"<td>{h(_levels_text(e['levels']))}</td>" if e["levels"] else cell(None),
                *[_level_cell(by[lv]) if lv in by else cell(None) for lv in levels],
                cell(e["no_answer_share"]),
            ]
        )
    tab = (
        table(
            ["environment", "origin", "band", "calibrated levels", *[f"L{lv}" for lv in levels], "no-answer share"],
            rows,
            "the pool as it stands, each member linked to its file; pass rate per measured level, with the "
            "guess rate beside it and n "
            "(— : no response had an answer at that level)",
        )
        if rows
        else "<p class='missing'>no pool yet</p>"
    )
    return (
        f"<div class='row'>{figure(fig_src('calibration.png'), 'calibration curves', 'no pool yet')}"
        f"<div class='numbers'>{tab}</div></div>"
    )


def _levels_text(levels: list[int]) -> str:
    if levels and levels == list(range(levels[0], levels[-1] + 1)) and len(levels) > 2:
        return f"{levels[0]}–{levels[-1]}"
    return ", ".join(map(str, levels))


def training_section(numbers: dict, fig_src) -> str:
    tr = numbers["training"]
    step_rows = [
        [
            cell(s["round"]),
            cell(s["step"]),
            cell(s["reward"]),
            cell(s["reward_std"]),
            cell(s.get("score_zero_std_share")),
            cell(s["zero_std_share"]),
            f"<td>{h(_per_env_text(s['per_env']))}</td>",
        ]
        for s in tr["steps"]
    ]
    round_rows = [
        [
            cell(r["round"]),
            cell(r["steps"]),
            cell(r["mean_reward"]),
            cell(r.get("mean_score_zero_std_share")),
            cell(r["mean_zero_std_share"]),
            f"<td>{'finished' if r['finished'] else 'unfinished'}</td>",
        ]
        for r in tr["rounds"]
    ]
    env_rounds = sorted({int(k) for v in tr["env_pass_rate_by_round"].values() for k in v})
    env_rows = [
        [f"<td>{h(name)}</td>", *[cell(v.get(str(r))) for r in env_rounds]]
        for name, v in tr["env_pass_rate_by_round"].items()
    ]
    if not step_rows:
        return f"<div class='row'>{figure(None, '', 'no training step logged yet')}</div>"
    tabs = (
        table(
            ["round", "steps", "mean reward", "zero-variance share (score)", "zero-variance share (sum)", "state"],
            round_rows,
        )
        + table(
            ["environment", *[f"round {r}" for r in env_rounds]],
            env_rows,
            "pass rate per environment: mean over the steps that sampled it",
        )
        + "<details><summary>every step</summary>"
        + table(
            [
                "round",
                "step",
                "reward mean",
                "reward std",
                "zero-variance share (score)",
                "zero-variance share (sum)",
                "pass rate per environment",
            ],
            step_rows,
        )
        + "</details>"
    )
    return (
        f"<div class='row'>{figure(fig_src('training.png'), 'training curves', 'no training step yet')}"
        f"<div class='numbers'>{tabs}</div></div>"
    )


def _per_env_text(per_env: dict) -> str:
    return ", ".join(
        f"{n} {m['pass_rate']:.2f}" if m["pass_rate"] is not None else f"{n} —" for n, m in sorted(per_env.items())
    )


def evaluation_section(numbers: dict, fig_src) -> str:
    ev = numbers["evaluation"]["rounds"]
    if not ev:
        return f"<div class='row'>{figure(None, '', 'no round has been evaluated yet')}</div>"
    head_rows = []
    for r in ev:
        for label, v in r["headline"].items():
            head_rows.append(
                [
                    cell(r["round"]),
                    f"<td>{h(label)}</td>",
                    cell(v["model"]),
                    cell(v["baseline"]),
                    cell(v["delta"], signed=True),
                ]
            )
    rounds = [r["round"] for r in ev]
    keys = sorted({k for r in ev for k in r["sources"]})
    src_rows = []
    for k in keys:
        kind, name = k.split(":", 1)
        cells = []
        for r in ev:
            s = r["sources"].get(k)
            cells += [cell(s["model"]) if s else cell(None), cell(s["delta"], signed=True) if s else cell(None)]
        src_rows.append([f"<td>{h(kind)}</td>", f"<td>{h(name)}</td>", *cells])
    src_table = table(
        ["kind", "source", *[x for r in rounds for x in (f"r{r} pass@1", f"r{r} Δ")]],
        src_rows,
        "held-out pass@1 of the trained model and its change against the baseline (Δ)",
    )
    models = "".join(
        f"<li>round {r['round']}: {h(r['model'])} against baseline {h(r['baseline_model'] or '—')}</li>" for r in ev
    )
    return (
        f"<div class='row'>{figure(fig_src('evaluation.png'), 'evaluation per round', 'not evaluated yet')}"
        f"<div class='numbers'>{table(['round', 'mean', 'model', 'baseline', 'Δ'], head_rows)}{src_table}"
        f"<ul class='note'>{models}</ul></div></div>"
    )


def _interval(value, ci) -> str:
    if not isinstance(value, (int, float)):
        return cell(None)
    if isinstance(ci, list) and len(ci) == 2 and all(isinstance(x, (int, float)) for x in ci):
        return f'<td class="n">{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]</td>'
    return cell(float(value))


def bound_section(numbers: dict) -> str:
    """`evoenv bound`'s numbers (bounds.jsonl beside each code): each checkpoint's accuracy on
    S, its description length, the bound, and the base model's accuracy on the same S."""
    rows, statements = [], {}
    for b in numbers.get("bounds", []):
        bits = b["description_length_bits"]
        rows.append(
            [
                f"<td>{h(b['checkpoint'])}</td>",
                cell(b["kind"]),
                cell(b["trained_parameters"]),
                cell(f"{bits:,.1f}" if isinstance(bits, (int, float)) else None),
                cell(b["n"]),
                _interval(b["accuracy"], b["accuracy_interval"]),
                cell(b["accuracy_lower_bound"]),
                _interval(b["base_accuracy"], b["base_accuracy_interval"]),
                cell(b["above_base"]),
            ]
        )
        if isinstance(b["statement"], str):
            statements[b["statement"]] = b
    if not rows:
        return "<p class='missing'>no bound recorded (`evoenv bound` writes bounds.jsonl beside its code)</p>"
    first = numbers["bounds"][0]
    caption = (
        f"{first.get('form')}, delta={first.get('delta')}, T={first.get('temperature')}; L counts what depends "
        "on the data (values, codebook, the grid's union bound): the base model and the projection seed cost 0 bits"
    )
    table_html = table(
        ["checkpoint", "kind", "trained values", "L (bits)", "n", "accuracy on S [95%]", "bound: accuracy ≥",
         "base on the same S [95%]", "bound above base"],
        rows,
        caption,
    )  # fmt: skip
    said = "".join(f"<li>{h(b['checkpoint'])}: {h(text)}</li>" for text, b in statements.items())
    return f"{table_html}<ul class='note'>{said}</ul>"


def synthesis_section(numbers: dict, fig_src) -> str:
    syn = numbers["synthesis"]
    cols = syn["steps"]

    def tab(key: str, label: str) -> str:
        rows = [[f"<td>{h(r['key'])}</td>", *[cell(r[c]) for c in cols], cell(r["yield"])] for r in syn[key]]
        return table([label, *cols, "yield"], rows) if rows else ""

    total = syn["total"]
    totals = table(cols, [[cell(total[c]) for c in cols]], "all rounds: how far the generations got")
    return (
        f"<div class='row'>{figure(fig_src('synthesis.png'), 'synthesis yield', 'no generation yet')}"
        f"<div class='numbers'>{totals}{tab('by_topic', 'topic')}"
        f"<details><summary>by parent (each example environment a prompt showed)</summary>"
        f"{tab('by_parent', 'parent')}</details></div></div>"
    )


def funnel_note(numbers: dict) -> str:
    """The steps in the order the run's rounds ran them (dedupe before calibrate since the loop
    runs in-process; older runs calibrated first, and a run can hold rounds of both)."""
    orders = []
    for f in numbers["funnel"]:
        if tuple(f["contract_order"]) not in orders:
            orders.append(tuple(f["contract_order"]))
    orders = orders or [("dedupe", "calibrate")]

    def which(o: tuple) -> str:
        rounds = [str(f["round"]) for f in numbers["funnel"] if tuple(f["contract_order"]) == o]
        return f"round{'s' if len(rounds) > 1 else ''} {', '.join(rounds)}: " if len(orders) > 1 else ""

    chains = "; ".join(
        which(o) + "generations → parsed → validate → review → (+ composites) → " + " → ".join(o) + " → joined"
        for o in orders
    )
    entry = " and ".join(dict.fromkeys(o[0] for o in orders))
    return (
        f"{chains}. Composites are code built from pool members by compose (judged by the execution "
        f"contract there, no LLM review) and enter at {entry}."
    )


def index_page(numbers: dict, links: Links, fig_src, example_page, generated: str) -> str:
    nav = "".join(
        f"<a href='#{k}'>{t}</a>"
        for k, t in (
            ("learning", "did it learn?"),
            ("funnel", "admission funnel"),
            ("pool", "pool"),
            ("calibration", "calibration"),
            ("newcomers", "new environments"),
            ("training", "training"),
            ("evaluation", "evaluation"),
            ("synthesis", "synthesis yield"),
            ("bound", "generalization bound"),
        )
    )
    finished = sum(r["finished"] for r in numbers["rounds"])
    body = (
        f"<h1>evoenv report — {h(numbers['run'])}</h1>"
        f"<p class='note'>{finished} of {len(numbers['rounds'])} round folder(s) finished · generated "
        f"{h(generated)} from the run's files · numbers as JSON: <a href='numbers.json'>numbers.json</a></p>"
        f"<nav>{nav}</nav>{problems_section(numbers, links)}"
        f"<h2 id='learning'>Did it learn?</h2>{learning_section(numbers, fig_src)}"
        f"<h2 id='rounds'>Rounds</h2>{status_section(numbers)}"
        f"<h2 id='funnel'>Admission funnel per round</h2>"
        f"<p class='note'>{h(funnel_note(numbers))}</p>"
        f"{funnel_section(numbers, links, fig_src, example_page)}"
        f"<h2 id='pool'>The pool over rounds</h2>{pool_section(numbers, links, fig_src)}"
        f"<h2 id='calibration'>Calibration curves of the pool</h2>{calibration_section(numbers, links, fig_src)}"
        f"<h2 id='newcomers'>New environments</h2>{newcomers_section(numbers)}"
        f"<h2 id='training'>Training</h2>{training_section(numbers, fig_src)}"
        f"<h2 id='evaluation'>Evaluation per round</h2>{evaluation_section(numbers, fig_src)}"
        f"<h2 id='synthesis'>Synthesis yield</h2>{synthesis_section(numbers, fig_src)}"
        f"<h2 id='bound'>Generalization bound</h2>{bound_section(numbers)}"
    )
    return document(f"evoenv report — {numbers['run']}", body)


def example_body(run: RunFiles, links: Links, ex: dict, r: int, stage: str) -> str:
    """One rejected candidate: its verdict line as written, and the file it judged."""
    record = next((ln.record for ln in run.jsonl(ex["verdicts"]) if ln.number == ex["line"]), None)
    facts = table(
        [],
        [
            ["<th>round</th>", f"<td>{r}</td>"],
            ["<th>stage</th>", f"<td>{h(stage)}</td>"],
            ["<th>check</th>", f"<td>{h(ex.get('check'))}</td>"],
            ["<th>reason</th>", f"<td>{h(ex.get('reason'))}</td>"],
            ["<th>verdict</th>", f"<td>{links.a(ex['verdicts'], ex['verdicts'] + ':' + str(ex['line']))}</td>"],
            ["<th>file</th>", f"<td>{links.a(ex['source']) if ex.get('source') else h(ex.get('file') or '—')}</td>"],
        ],
    )
    parts = [
        f"<p><a href='../index.html#round-{r}'>← back to the report</a></p>",
        f"<h1>{h(ex.get('name') or ex.get('file'))}: rejected by {h(stage)} ({h(ex.get('check'))})</h1>",
        facts,
    ]
    if record is not None:
        shown = {k: v for k, v in record.items() if k not in ("prompt", "response")}
        parts.append(f"<h2>The verdict line</h2><pre>{h(json.dumps(shown, indent=2, ensure_ascii=False))}</pre>")
        if "response" in record:
            parts.append(f"<h2>The model's response</h2><pre>{h(str(record['response'])[:50_000])}</pre>")
        if "prompt" in record:
            parts.append(
                f"<details><summary>the prompt</summary><pre>{h(str(record['prompt'])[:50_000])}</pre></details>"
            )
    source = run.text(ex["source"]) if ex.get("source") else None
    if source is not None:
        parts.append(f"<h2>The environment file</h2><pre>{h(source)}</pre>")
    return document(f"{ex.get('name') or ex.get('file')} — {stage}", "".join(parts))
