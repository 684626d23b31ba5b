"""MkDocs hooks (`hooks:` in mkdocs.yml): the published results files go into the site, every page is checked
for figures typed by hand and for figures not as their files give them now, then its `fig` / `fig_table`
figures are rendered from their files (devtools/docs_figures.py).

A failure stops the build with one line naming the page and the figure; nothing is left half rendered."""

from __future__ import annotations

import sys
from pathlib import Path

from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # MkDocs loads this file by its path, not as part of a package
    sys.path.insert(0, str(ROOT))

from devtools.docs_figures import WRITE_COMMAND, render_figures, stale_figures, untraceable_figures  # noqa: E402
from devtools.figure_values import PUBLISHED, FigureError  # noqa: E402


def on_files(files, config):
    """Every file under results/published/ is served beside the pages, so a figure's link opens its source."""
    for path in sorted((ROOT / PUBLISHED).glob("*.json")):
        if not path.is_file() or path.is_symlink():  # a FIFO would hang the build, a link could serve any file
            continue
        files.append(File(path.relative_to(ROOT).as_posix(), str(ROOT), config["site_dir"],
                          config["use_directory_urls"]))
    return files


def on_page_markdown(markdown, page, config, files):
    """Refuse a page with a hand-typed figure, or with a figure not as its file gives it now (a `{{ }}` macro
    not written out included); render its figures from the published files."""
    name = f"docs/{page.file.src_uri}"
    typed = untraceable_figures(markdown)
    if typed:
        listing = "; ".join(f"line {n}: {line.strip()[:100]!r}" for n, line in typed[:5])
        raise PluginError(f"{name}: {len(typed)} figure(s) typed by hand, not rendered from results/published/ "
                          f"(use fig / fig_table, or mark a non-measured paragraph <!-- not measured -->): {listing}")
    try:
        stale = stale_figures(markdown, ROOT, name)
        if stale:
            listing = "; ".join(str(figure) for figure in stale[:5])
            raise PluginError(f"{name}: {len(stale)} figure(s) not as their files give them now: {listing}; "
                              f"run `{WRITE_COMMAND}` to write them")
        rendered, _ = render_figures(markdown, ROOT, name, "../" * page.file.src_uri.count("/"))
    except FigureError as exc:
        raise PluginError(str(exc)) from None
    return rendered


def on_page_content(html, page, config, files):
    """mkdocs-click prints click 8.3's "no default" sentinel as a default; the reference shows None, as it does
    for every other option without one."""
    return html.replace("<code>Sentinel.UNSET</code>", "None")
