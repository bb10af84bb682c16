"""The tables the command line prints on stderr: an admission stage's funnel and evaluate's
side-by-side metrics. Built here, printed by cli.py; `evoenv report` draws the same numbers
as a page."""

from __future__ import annotations

from rich.markup import escape
from rich.table import Table


def funnel(summary: dict) -> Table:
    """Entered, rejected per stage of the contract, admitted (calibrated or not)."""
    table = Table(title=f"{summary['stage']} funnel", title_justify="left")
    table.add_column("step")
    table.add_column("count", justify="right")
    table.add_row("entered", str(summary["entered"]))
    for stage_name, n in summary["rejected_by_stage"].items():
        table.add_row(f"  rejected: {escape(stage_name)}", str(n) if n else "[dim]0[/]")
    uncalibrated = summary.get("admitted_uncalibrated")
    if uncalibrated is None:
        table.add_row("[bold]admitted[/]", f"[bold]{summary['admitted']}[/]")
    else:  # admitted without a measurement is not admitted by the difficulty contract
        table.add_row("[bold]admitted, calibrated[/]", f"[bold]{summary['admitted'] - uncalibrated}[/]")
        table.add_row("[yellow]admitted uncalibrated[/]", f"[yellow]{uncalibrated}[/]" if uncalibrated else "[dim]0[/]")
    return table


def evaluation(rows, model_name: str, baseline: str | None) -> Table:
    """evaluate's metrics, the model beside its baseline and the delta when there is one;
    `rows` are stages.evaluate.table_rows(metrics)."""

    def fmt(v, signed=False):
        return "[dim]-[/]" if v is None else (f"{v:+.3f}" if signed else f"{v:.3f}")

    table = Table(title="evaluate", title_justify="left")
    table.add_column("metric")
    table.add_column(escape(model_name), justify="right")
    if baseline:
        table.add_column(f"baseline {escape(baseline)}", justify="right")
        table.add_column("delta", justify="right")
    for name, mine, theirs, delta in rows:
        table.add_row(escape(name), fmt(mine), *((fmt(theirs), fmt(delta, True)) if baseline else ()))
    return table
