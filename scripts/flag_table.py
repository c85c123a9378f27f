"""The README's table of `exec-daemon serve` flags, made from the CLI itself (its help texts and
defaults), so it cannot drift: `.venv/bin/python scripts/flag_table.py` rewrites it between the
README's markers; tests/test_cli.py fails when it is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # exec_daemon when run as a script

README = REPO / "README.md"
START = "<!-- serve-flags:start (scripts/flag_table.py writes this table) -->"
END = "<!-- serve-flags:end -->"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(option: click.Option, ctx: click.Context) -> str:
    default = option.get_default(ctx, call=True)
    if option.multiple and not isinstance(default, (list, tuple)):
        default = ()
    if option.is_flag and option.secondary_opts:
        return f"`{option.opts[-1] if default else option.secondary_opts[-1]}`"
    if isinstance(default, bool):
        return "on" if default else "off"
    if default is None or default in ((), "", []):
        return ""
    return f"`{default}`"


def _names(option: click.Option) -> str:
    names = [*option.opts, *option.secondary_opts]
    return " / ".join(f"`{name}`" for name in names)


def table() -> str:
    """The Markdown table of every serve option, in the CLI's order."""
    from exec_daemon.cli import main

    serve = main.commands["serve"]
    ctx = click.Context(serve)
    rows = ["| flag | default | what it does |", "|---|---|---|"]
    for param in serve.params:
        if isinstance(param, click.Option) and not param.hidden:
            rows.append(f"| {_names(param)} | {_default(param, ctx)} | {_cell(param.help or '')} |")
    return "\n".join(rows)


def with_table(readme: str) -> str:
    """`readme` with the text between its markers replaced by the current table."""
    before, start, rest = readme.partition(START)
    _old, end, after = rest.partition(END)
    if not start or not end:
        raise SystemExit(f"README.md has no {START} ... {END} markers")
    return f"{before}{START}\n{table()}\n{END}{after}"


def main() -> None:
    README.write_text(with_table(README.read_text()))


if __name__ == "__main__":
    main()
