"""Every command's --help ends with the manual page that explains it, and that page is in the manual."""

import re
from pathlib import Path

import click
import yaml
from click.testing import CliRunner

from coordinator.cli import main

ROOT = Path(__file__).resolve().parents[3]


def _commands(command: click.Command, path=()):
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


def _nav_pages(entries) -> set[str]:
    pages = set()
    for entry in entries:
        for value in (entry.values() if isinstance(entry, dict) else [entry]):
            pages |= _nav_pages(value) if isinstance(value, list) else {value}
    return pages


def test_every_help_names_a_manual_page_in_the_navigation():
    nav = _nav_pages(yaml.safe_load((ROOT / "mkdocs.yml").read_text())["nav"])
    seen = {}
    for path, command in _commands(main):
        result = CliRunner().invoke(main, [*path, "--help"], terminal_width=200)
        assert result.exit_code == 0, result.output
        pages = re.findall(r"Manual: docs/(\S+?\.md)", result.output)
        assert len(pages) == 1, f"memfarm {' '.join(path)} --help names no manual page:\n{result.output}"
        assert pages[0] in nav and (ROOT / "docs" / pages[0]).is_file(), pages[0]
        seen[" ".join(path)] = pages[0]
        if path:  # the page a command's help leads to speaks of that command
            assert " ".join(path) in (ROOT / "docs" / pages[0]).read_text(), \
                f"memfarm {' '.join(path)} --help leads to docs/{pages[0]}, which never names it"
    assert len(seen) > 30  # every subcommand walked, groups' commands included
    assert seen[""] == "index.md" and seen["run"] == "running.md" and seen["compare"] == "results.md"
    assert seen["cluster up"] == "farm.md"  # a subcommand takes its group's page
    assert seen["bench encoders"] == "embedders.md" and seen["bench locomo"] == "benchmarks.md"


def test_a_command_without_a_page_of_its_own_points_at_the_cli_reference():
    from coordinator.cli.root import point_at_manual

    @click.group()
    def tool():
        """A group no page names."""

    @tool.command("new")
    def new():
        """A command added later."""

    point_at_manual(tool, "some-new-group")
    assert new.epilog == tool.epilog == "Manual: docs/reference/cli.md."
