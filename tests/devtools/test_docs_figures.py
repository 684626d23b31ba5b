"""The manual's figures: written into the pages as results/published/ gives them, rendered from there into the
site, or the build fails; a figure typed by hand fails it too. The end-to-end tests build the real manual with
MkDocs in strict mode."""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.docs_figures import (
    WRITE_COMMAND,
    FigureError,
    figures_in,
    refresh_pages,
    render_figures,
    stale_figures,
    untraceable_figures,
    write_figures,
)
from tests.helpers import skip_outside_ci

ROOT = Path(__file__).resolve().parents[2]
PROVENANCE = {"command": "memfarm bench locomo --dataset d.json", "commit": "0123456789abcdef0123",
              "created": "2026-12-02T13:00:00Z", "cores": 2, "load": [1.5, 1.25, 1.0]}


def _published(root: Path, name: str, data: dict) -> str:
    folder = root / "results" / "published"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))
    return f"results/published/{name}"


# --- the rule for figures typed by hand -------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "| fusion | 0.836 |",                                  # a results table
    "| fusion | 1.75x |",
    "The fused graph is 1.2x faster than torch.",          # a ratio in prose
    "Recall rose by 12% on dev5.",                         # a percentage
    "It took 11.0 s per question.",                        # a decimal in prose
    "Mutants killed: 99.3 %.",
])
def test_a_figure_typed_by_hand_is_found(line):
    assert untraceable_figures(f"# Page\n\n{line}\n") == [(3, line)]


@pytest.mark.parametrize("text", [
    "Ranking compares scores rounded to `0.000001`, the lambda of MMR is `0.9`.",   # settings in code
    "```sh\nmemfarm synth longmemeval --scale 0.3\n```",                            # a command
    "```json\n{\"score\": 0.83}\n```",                                              # a format
    "Install Python 3.11 and torch 2.13.0; Redis 7.0 checks no revocation list.",  # versions
    "| option | meaning |\n| --- | --- |\n| `--scale` | `0.1` by default |",       # a table of settings
    "It ran on 500 questions over 10 conversations.",                               # counts, not figures
    "The weights sum to 1.0 in this worked example. <!-- not measured -->",         # marked, in prose
    'The value {{ fig("results/published/x.json", "a.b") }} came from a bench.',    # a macro
    "See [the page](running.md#k-0.5-section) for more.",                          # a link target
])
def test_what_is_not_a_typed_figure(text):
    assert untraceable_figures(text) == []


def test_the_marker_does_not_excuse_a_table_nor_another_paragraph():
    text = "<!-- not measured -->\n| mode | R@5 |\n| --- | --- |\n| fusion | 0.836 |\n\nIt gave 0.5 here.\n"
    assert [n for n, _ in untraceable_figures(text)] == [4, 6]


def test_program_output_in_a_fence_is_checked():
    text = "```\nsession recall_all@5 0.909: 10/11 questions\n```\n"
    assert [n for n, _ in untraceable_figures(text)] == [2]


# --- rendering from published files ---------------------------------------------------------------------

def test_fig_renders_the_value_with_a_link_to_its_file(tmp_path):
    path = _published(tmp_path, "bench.json", {**PROVENANCE, "modes": [{"r": 0.83649}, {"r": 0.9}], "n": 1101})
    text, used = render_figures(f'R@5 {{{{ fig("{path}", "modes.0.r") }}}} over {{{{ fig("{path}", "n") }}}} '
                                f'and {{{{ fig("{path}", "modes.1.r", digits=1) }}}}.', tmp_path, "docs/p.md")
    assert text.startswith(f'R@5 [0.836]({path} "memfarm bench locomo --dataset d.json") over [1,101](')
    assert "and [0.9](" in text
    assert used == {path}


def test_fig_table_renders_rows_and_the_line_that_says_where_they_came_from(tmp_path):
    path = _published(tmp_path, "t.json", {**PROVENANCE, "table": [{"mode": "dense", "r": 0.7381, "n": 839},
                                                                   {"mode": "fusion", "r": 0.8361, "n": 839}]})
    text, _ = render_figures(f'{{{{ fig_table("{path}", "table", columns={{"mode": "mode", "r": "R@5"}}) }}}}',
                             tmp_path, "docs/p.md", link_prefix="../")
    lines = text.splitlines()
    assert lines[:4] == ["| mode | R@5 |", "| --- | ---: |", "| dense | 0.738 |", "| fusion | 0.836 |"]
    assert lines[5].startswith(f"Source: [t.json](../{path}), written by `memfarm bench locomo --dataset d.json` "
                               "at commit `0123456789ab` on 2026-12-02T13:00:00Z, 2 cores, load average "
                               "1.50 / 1.25 / 1.00.")


def test_fig_table_keeps_the_rows_where_names_and_refuses_a_filter_no_row_meets(tmp_path):
    path = _published(tmp_path, "w.json", {**PROVENANCE, "rows": [{"dataset": "locomo", "r": 0.5},
                                                                  {"dataset": "realmem", "r": 0.25}]})
    macro = f'{{{{ fig_table("{path}", "rows", columns={{"r": "r"}}, where={{"dataset": "realmem"}}) }}}}'
    assert render_figures(macro, tmp_path, "docs/p.md")[0].splitlines()[:3] == ["| r |", "| ---: |", "| 0.250 |"]
    with pytest.raises(FigureError, match="no row of 'rows' has"):
        render_figures(macro.replace('"realmem"', '"longmemeval"'), tmp_path, "docs/p.md")

def test_a_column_may_reach_into_a_row_and_a_tiny_value_keeps_its_magnitude(tmp_path):
    path = _published(tmp_path, "c.json", {**PROVENANCE, "rows": [{"wins": {"count": 108}, "p": 2e-17, "ci": [-0.0021, 0.5]}]})
    text, _ = render_figures(f'{{{{ fig_table("{path}", "rows", columns={{"wins.count": "W", "p": "p", "ci": "CI"}}) }}}}',
                             tmp_path, "docs/p.md")
    assert text.splitlines()[2] == "| 108 | 2e-17 | [-0.002, 0.500] |"


def test_a_cell_without_a_value_is_a_dash_and_the_column_stays_numeric(tmp_path):
    path = _published(tmp_path, "n.json", {**PROVENANCE, "rows": [{"mode": "fusion", "x": None},
                                                                  {"mode": "full", "x": 1.054}]})
    lines = render_figures(f'{{{{ fig_table("{path}", "rows", columns={{"mode": "mode", "x": "x fusion"}}) }}}}',
                           tmp_path, "docs/p.md")[0].splitlines()
    assert lines[1:4] == ["| --- | ---: |", "| fusion | \u2014 |", "| full | 1.054 |"]


def test_a_macro_shown_as_code_is_left_alone(tmp_path):
    text = 'Write `{{ fig("results/published/NAME.json", "a") }}` in a page.'
    assert render_figures(text, tmp_path, "docs/p.md")[0] == text


@pytest.mark.parametrize("macro, message", [
    ('fig("results/published/gone.json", "a")', "no such file"),
    ('fig("results/other/t.json", "a")', "must be a .json under results/published/"),
    ('fig("results/published/t.json", "table.5.r")', "no value at 'table.5'"),
    ('fig("results/published/t.json", "table.0.nope")', "no value at 'table.0.nope'"),
    ('fig("results/published/bare.json", "r")', "records no command, commit, created, cores, load"),
    ('fig_table("results/published/t.json", "table", columns={"mode": "m", "n": "n"})', "row 1 of 'table' has no n"),
    ('fig_table("results/published/t.json", "r", columns={"r": "r"})', "not a non-empty list of objects"),
    ('fig("results/published/t.json", __import__("os").getcwd())', "not literals"),
])
def test_a_figure_that_cannot_be_traced_fails(tmp_path, macro, message):
    _published(tmp_path, "t.json", {**PROVENANCE, "r": 0.5, "table": [{"mode": "a", "n": 1}, {"mode": "b"}]})
    _published(tmp_path, "bare.json", {"r": 0.5})
    with pytest.raises(FigureError, match="docs/p.md") as caught:
        render_figures(f"{{{{ {macro} }}}}", tmp_path, "docs/p.md")
    assert message in str(caught.value)


# --- figures written into their pages ----------------------------------------------------------------------

def _page(root: Path, text: str, name: str = "p.md") -> Path:
    page = root / "docs" / name
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text)
    return page


def test_a_value_is_written_first_linked_to_its_file_from_the_page_then_its_macro(tmp_path):
    path = _published(tmp_path, "v.json", {**PROVENANCE, "x": 1.2649})
    page = f'It is\n{{{{ fig("{path}", "x", digits=2) }}}} times faster.\n'
    written = write_figures(page, tmp_path, "docs/p.md")
    # a line that began with the comment would be raw HTML on GitHub, its Markdown shown as typed
    assert written == f'It is\n[1.26](../{path})<!-- fig("{path}", "x", digits=2) --> times faster.\n'
    assert write_figures(written, tmp_path, "docs/p.md") == written
    assert write_figures(page, tmp_path, "docs/sub/p.md").count(f"](../../{path})") == 1
    assert stale_figures(written, tmp_path, "docs/p.md") == []


def test_a_written_value_that_differs_from_its_file_names_the_page_line_and_both_values(tmp_path):
    path = _published(tmp_path, "v.json", {**PROVENANCE, "x": 1.2649, "n": 839})
    written = write_figures(f'# Page\n\nIt is {{{{ fig("{path}", "x", digits=2) }}}} over\n'
                            f'{{{{ fig("{path}", "n") }}}} questions.\n', tmp_path, "docs/p.md")
    _published(tmp_path, "v.json", {**PROVENANCE, "x": 1.3051, "n": 839})  # the bench ran again
    stale = stale_figures(written, tmp_path, "docs/p.md")
    assert [str(s) for s in stale] == [
        f"docs/p.md:3: fig(\"{path}\", \"x\", digits=2) is written '1.26', its file gives '1.31'"]
    hand_edited = written.replace("[839]", "[840]")
    assert [(s.line, s.written, s.expected) for s in stale_figures(hand_edited, tmp_path, "docs/p.md")] == [
        (3, "1.26", "1.31"), (4, "840", "839")]


def test_write_brings_every_stale_figure_of_the_pages_up_to_date_and_check_reports_until_then(tmp_path):
    path = _published(tmp_path, "v.json", {**PROVENANCE, "x": 0.5, "rows": [{"r": 0.25}]})
    page = _page(tmp_path, f'Value {{{{ fig("{path}", "x") }}}}.\n\n'
                           f'{{{{ fig_table("{path}", "rows", columns={{"r": "R"}}) }}}}\n')
    _page(tmp_path, "No figure here.\n", "q.md")
    report, current = refresh_pages(root=tmp_path)
    assert not current and report[0].startswith("docs/p.md:1: {{ fig(") and "not written into the page" in report[0]
    assert report[-1] == f"2 figure(s) in 1 page(s) not as their files give them now: run `{WRITE_COMMAND}`"
    assert page.read_text().startswith("Value {{")  # --check writes nothing

    assert refresh_pages(write=True, root=tmp_path) == (["wrote docs/p.md: 2 figure(s) brought up to date",
                                                         "every figure of 2 page(s) is as its file gives it now"], True)
    _published(tmp_path, "v.json", {**PROVENANCE, "x": 0.75, "rows": [{"r": 0.5}]})
    report, current = refresh_pages([page], root=tmp_path)
    assert not current and report[:2] == [
        f"docs/p.md:1: fig(\"{path}\", \"x\") is written '0.500', its file gives '0.750'",
        f"docs/p.md:7: fig_table(\"{path}\", \"rows\", columns={{\"r\": \"R\"}}) is written '| 0.250 |', "
        "its file gives '| 0.500 |'"]
    assert refresh_pages([page], write=True, root=tmp_path)[1]
    assert refresh_pages([page], root=tmp_path)[1]
    assert "[0.750](" in page.read_text() and "| 0.500 |" in page.read_text()


def test_a_page_whose_figure_cannot_be_rendered_is_named_and_left_unwritten(tmp_path):
    page = _page(tmp_path, '{{ fig("results/published/gone.json", "x") }}\n')
    report, current = refresh_pages(write=True, root=tmp_path)
    assert not current and report == ["docs/p.md: results/published/gone.json: no such file (a figure whose "
                                      "source is gone)"]
    assert page.read_text() == '{{ fig("results/published/gone.json", "x") }}\n'


def test_a_table_round_trips_between_its_comment_and_closing_marker(tmp_path):
    path = _published(tmp_path, "t.json", {**PROVENANCE, "rows": [{"mode": "dense", "r": 0.7381},
                                                                  {"mode": "fusion", "r": 0.8361}]})
    macro = f'{{{{ fig_table("{path}", "rows", columns={{"mode": "mode", "r": "R@5"}}) }}}}'
    written = write_figures(f"Before.\n\n{macro}\n\nAfter.\n", tmp_path, "docs/p.md")
    lines = written.splitlines()
    assert lines[2] == f'<!-- fig_table("{path}", "rows", columns={{"mode": "mode", "r": "R@5"}}) -->'
    assert lines[3:8] == ["", "| mode | R@5 |", "| --- | ---: |", "| dense | 0.738 |", "| fusion | 0.836 |"]
    assert lines[8] == "" and lines[9].startswith(f"Source: [t.json](../{path}), written by `memfarm bench")
    assert lines[10:] == ["", "<!-- /fig_table -->", "", "After."]
    assert write_figures(written, tmp_path, "docs/p.md") == written
    assert stale_figures(written, tmp_path, "docs/p.md") == []
    assert render_figures(written, tmp_path, "docs/p.md") == render_figures(f"Before.\n\n{macro}\n\nAfter.\n",
                                                                           tmp_path, "docs/p.md")
    (stale,) = stale_figures(written.replace("| fusion | 0.836 |", "| fusion | 0.840 |"), tmp_path, "docs/p.md")
    assert (stale.line, stale.written, stale.expected) == (8, "| fusion | 0.840 |", "| fusion | 0.836 |")
    (short,) = stale_figures(written.replace("| fusion | 0.836 |\n", ""), tmp_path, "docs/p.md")
    assert (short.line, short.written, short.expected) == (8, "", "| fusion | 0.836 |")


def test_a_table_macro_must_stand_alone_on_its_line_to_be_written(tmp_path):
    path = _published(tmp_path, "t.json", {**PROVENANCE, "rows": [{"r": 0.5}]})
    with pytest.raises(FigureError, match=r"docs/p.md:1: .* must stand alone on its line"):
        write_figures(f'See {{{{ fig_table("{path}", "rows", columns={{"r": "r"}}) }}}}\n', tmp_path, "docs/p.md")


def test_the_site_shows_the_value_and_the_table_the_page_has_written(tmp_path):
    path = _published(tmp_path, "s.json", {**PROVENANCE, "x": 0.83649, "n": 1101, "name": "full_mode",
                                           "rows": [{"mode": "dense", "r": 0.7381, "n": 839}]})
    written = write_figures(f'R@5 {{{{ fig("{path}", "x") }}}} over {{{{ fig("{path}", "n") }}}} in '
                            f'{{{{ fig("{path}", "name") }}}}.\n\n'
                            f'{{{{ fig_table("{path}", "rows", columns={{"mode": "mode", "r": "R", "n": "n"}}) }}}}\n',
                            tmp_path, "docs/p.md")
    site, used = render_figures(written, tmp_path, "docs/p.md")
    shown = [figure.written for figure in figures_in(written, "docs/p.md")]
    assert [text[1:text.rindex("](")] for text in shown[:3]] == ["0.836", "1,101", "full\\_mode"]
    assert site.splitlines()[0] == (f'R@5 [0.836]({path} "{PROVENANCE["command"]}") over '
                                    f'[1,101]({path} "{PROVENANCE["command"]}") in '
                                    f'[full\\_mode]({path} "{PROVENANCE["command"]}").')
    table = shown[3].splitlines()
    assert site.splitlines()[2:5] == table[:3]  # the same table; its source line links from the site's root
    assert site.splitlines()[6] == table[4].replace(f"](../{path})", f"]({path})")
    assert site.splitlines()[7] == "{: .figure-source }" and used == {path}


def test_a_figure_written_by_hand_or_half_written_is_refused(tmp_path):
    path = _published(tmp_path, "v.json", {**PROVENANCE, "x": 0.5})
    for text, said in [(f'It is 0.5<!-- fig("{path}", "x") --> here.', "1: <!-- fig ... -->"),
                       (f'<!-- fig_table("{path}", "rows", columns={{"r": "r"}}) -->\n\n| r |\n',
                        "1: <!-- fig_table ... -->"),
                       ("| r |\n\n<!-- /fig_table -->\n", "3: <!-- /fig_table ... -->")]:
        with pytest.raises(FigureError) as caught:
            stale_figures(text, tmp_path, "docs/p.md")
        assert f"docs/p.md:{said} belongs to no written figure" in str(caught.value)
        assert WRITE_COMMAND in str(caught.value)
    with pytest.raises(FigureError, match="holds '--'"):
        write_figures(f'{{{{ fig("{path}", "x--y") }}}}', tmp_path, "docs/p.md")


@pytest.mark.parametrize("text, typed", [
    ("It took 1.27 s, [1.26](../results/published/v.json)<!-- fig(\"results/published/v.json\", \"x\") --> s.", [1]),
    ("It took [1.27](../results/published/v.json) s.", [1]),            # a link that lost its macro
    ("[1.26](../results/published/v.json)<!-- fig(\"results/published/v.json\", \"x\") --> s per question.", []),
    ("<!-- fig_table(\"results/published/t.json\", \"rows\", columns={\"r\": \"r\"}) -->\n\n| r |\n| ---: |\n"
     "| 0.836 |\n\nSource: load average 1.50 / 1.25.\n\n<!-- /fig_table -->\n\n| fusion | 0.9 |", [11]),
])
def test_a_number_typed_outside_a_written_figure_is_still_found(text, typed):
    assert [n for n, _ in untraceable_figures(text)] == typed


def test_the_build_refuses_a_written_value_its_file_no_longer_gives(tmp_path, monkeypatch):
    try:
        from mkdocs.exceptions import PluginError

        from devtools import mkdocs_hooks
    except ImportError:
        skip_outside_ci("MkDocs (the docs extra) is not installed")
    from types import SimpleNamespace

    path = _published(tmp_path, "v.json", {**PROVENANCE, "x": 1.2649})
    monkeypatch.setattr(mkdocs_hooks, "ROOT", tmp_path)
    page = SimpleNamespace(file=SimpleNamespace(src_uri="cost.md"))
    written = write_figures(f'# Cost\n\nIt is {{{{ fig("{path}", "x", digits=2) }}}} times.\n', tmp_path,
                            "docs/cost.md")
    assert mkdocs_hooks.on_page_markdown(written, page, {}, None) == (
        f'# Cost\n\nIt is [1.26]({path} "{PROVENANCE["command"]}") times.\n')
    for text, said in [(written.replace("[1.26]", "[1.25]"), "is written '1.25', its file gives '1.26'"),
                       (f'# Cost\n\nIt is {{{{ fig("{path}", "x") }}}}.\n', "is not written into the page")]:
        with pytest.raises(PluginError) as caught:
            mkdocs_hooks.on_page_markdown(text, page, {}, None)
        assert "docs/cost.md:3: " in str(caught.value) and said in str(caught.value)
        assert f"run `{WRITE_COMMAND}`" in str(caught.value)


# --- the README and the real manual -------------------------------------------------------------------

def test_the_readme_is_a_short_front_page_without_typed_figures():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    assert untraceable_figures(readme) == []


def test_every_figure_of_the_manual_is_written_as_its_file_gives_it():
    report, current = refresh_pages()
    assert current, "\n".join(report)


def test_the_command_checks_by_default_and_exits_1_on_a_page_it_cannot_vouch_for(tmp_path):
    from click.testing import CliRunner

    from devtools.__main__ import devtools

    assert CliRunner().invoke(devtools, ["docs-figures"]).exit_code == 0  # the manual, as committed
    outside = _page(tmp_path, "Text.\n")
    result = CliRunner().invoke(devtools, ["docs-figures", "--write", str(outside)])
    assert result.exit_code == 1 and f"{outside}: not a page of this repository's manual" in result.output
    assert CliRunner().invoke(devtools, ["docs-figures", "--write", "--check"]).exit_code == 2


def _mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    try:
        import mkdocs  # noqa: F401
        import mkdocs_click  # noqa: F401
        import material  # noqa: F401
    except ImportError:
        skip_outside_ci("the docs extra is not installed (pip install -e '.[docs]')")
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(site.parent)})


def _copy_of_the_manual(tmp_path: Path) -> Path:
    """docs/ and mkdocs.yml in a scratch folder, the hook still the repository's (it reads results/published/
    of the repository)."""
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    config = (ROOT / "mkdocs.yml").read_text().replace("devtools/mkdocs_hooks.py", str(ROOT / "devtools/mkdocs_hooks.py"))
    (tmp_path / "mkdocs.yml").write_text(config)
    return tmp_path / "mkdocs.yml"


@pytest.mark.slow
def test_the_real_manual_builds_strict_and_a_planted_figure_fails_it(tmp_path):
    built = _mkdocs_build(ROOT / "mkdocs.yml", tmp_path / "site")
    assert built.returncode == 0, built.stderr[-3000:]
    cli = (tmp_path / "site" / "reference" / "cli" / "index.html").read_text()
    for command in ("memfarm run", "memfarm compare", "memfarm cluster", "memfarm bench"):
        assert command in cli  # the reference is generated from the commands, subcommands included
    assert (tmp_path / "site" / "results" / "published" / "compare_locomo_modes.json").is_file()

    config = _copy_of_the_manual(tmp_path / "planted")
    page = tmp_path / "planted" / "docs" / "running.md"
    page.write_text(page.read_text() + "\n| mode | session R@5 |\n| --- | --- |\n| fusion | 0.836 |\n")
    planted = _mkdocs_build(config, tmp_path / "planted-site")
    assert planted.returncode != 0
    assert "docs/running.md: 1 figure(s) typed by hand" in planted.stdout + planted.stderr
    assert "0.836" in planted.stdout + planted.stderr


@pytest.mark.slow
def test_a_written_figure_its_file_no_longer_gives_fails_the_real_build(tmp_path):
    config = _copy_of_the_manual(tmp_path / "stale")
    page = tmp_path / "stale" / "docs" / "cost.md"
    value = re.compile(r'\[([^\]]+)\](\(\.\./results/published/coldrun\.json\)<!-- fig\('
                       r'"results/published/coldrun\.json", "variants\.1\.x_fusion")')
    text = page.read_text()
    found = value.search(text)
    assert found, "docs/cost.md no longer shows coldrun.json's variants.1.x_fusion: pick another figure"
    page.write_text(value.sub(lambda m: f"[{m.group(1)}9]{m.group(2)}", text, count=1))
    built = _mkdocs_build(config, tmp_path / "site")
    output = built.stdout + built.stderr
    assert built.returncode != 0
    line = text.count("\n", 0, found.start()) + 1
    assert f"docs/cost.md:{line}: " in output
    assert f"is written '{found.group(1)}9', its file gives '{found.group(1)}'" in output
    assert f"run `{WRITE_COMMAND}`" in output


@pytest.mark.slow
def test_a_page_left_out_of_the_navigation_or_a_broken_link_fails_the_build(tmp_path):
    config = _copy_of_the_manual(tmp_path / "copy")
    (tmp_path / "copy" / "docs" / "orphan.md").write_text("# Orphan\n\nIn no navigation.\n")
    page = tmp_path / "copy" / "docs" / "running.md"
    page.write_text(page.read_text() + "\nSee [a page that is not there](gone.md).\n")
    built = _mkdocs_build(config, tmp_path / "site")
    output = built.stdout + built.stderr
    assert built.returncode != 0
    assert "orphan.md" in output and "not included in the \"nav\"" in output
    assert "gone.md" in output


# --- a published file is data, never markup ---------------------------------------------------------------

HOSTILE = '<img src=x onerror=alert(1)>'
INJECTED = '*x*{: onclick="alert(2)" }'  # attr_list would put the attribute on an <em>


def _hostile_page(tmp_path: Path) -> str:
    path = _published(tmp_path, "h.json", {
        "command": f'memfarm check-system "{HOSTILE}"\n\n<script>alert(3)</script>', "commit": f"ab`\n\n{HOSTILE}",
        "created": f"{HOSTILE}\n\n{INJECTED}", "cores": HOSTILE, "load": [HOSTILE], "name": f"{HOSTILE} {INJECTED}",
        "rows": [{"system": f"{HOSTILE}|{INJECTED}", "r": 0.5}]})
    text, _ = render_figures(f'Leader {{{{ fig("{path}", "name") }}}}.\n\n'
                             f'{{{{ fig_table("{path}", "rows", columns={{"system": "system", "r": "R@5"}}) }}}}',
                             tmp_path, "docs/p.md")
    return text


def test_a_published_string_is_text_in_the_page_not_markup(tmp_path):
    text = _hostile_page(tmp_path)
    shown = "&lt;img src=x onerror=alert(1)&gt;"
    lines = text.splitlines()
    assert lines[0].startswith(f"Leader [{shown} \\*x\\*\\{{: onclick=\"alert(2)\" \\}}](")
    # the title of the link is an attribute (Markdown escapes it); a quote in it would end it early
    assert lines[0].count('"') == 4 and lines[1:3] == ["", "| system | R@5 |"]
    assert lines[4] == f'| {shown}\\|\\*x\\*\\{{: onclick="alert(2)" \\}} | 0.500 |'
    source = lines[6]
    assert source.endswith(f"on {shown}  \\*x\\*\\{{: onclick=\"alert(2)\" \\}}, {shown} cores, "
                           f'load average \\["{shown}"\\].')
    # outside the code spans of command and commit, no < is left; the code spans stay on their line
    assert "<" not in source.replace(f'`memfarm check-system "{HOSTILE}"  <script>alert(3)</script>`', "")\
        .replace(f"`` ab`  {HOSTILE[:7]} ``", "")
    assert lines[7] == "{: .figure-source }" and len(lines) == 8


def test_a_published_string_is_text_in_the_built_html(tmp_path):
    try:
        import markdown
    except ImportError:
        skip_outside_ci("Python-Markdown (the docs extra) is not installed")
    from html.parser import HTMLParser

    class Elements(HTMLParser):
        def __init__(self):
            super().__init__()
            self.seen = []

        def handle_starttag(self, tag, attrs):
            self.seen.append((tag, [name for name, _ in attrs]))

    parser = Elements()
    parser.feed(markdown.markdown(_hostile_page(tmp_path), extensions=["attr_list", "tables"]))
    tags = {tag for tag, _ in parser.seen}
    assert not tags & {"img", "script", "em", "b", "i"}, parser.seen
    assert not [names for _, names in parser.seen if any(n.startswith("on") for n in names)]
