"""Untrusted vaults and repositories: nothing outside the root is read, no repository program runs,
one bad file is reported and skipped while the rest ingests."""

import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from adapters.ingestion.confined import ConfinedRoot, RefusedFile
from adapters.ingestion.git_repository import GitRepositoryAdapter
from adapters.ingestion.git_repository.parser import DEFAULT_MAX_FILE_BYTES
from adapters.ingestion.obsidian import ObsidianAdapter
from adapters.ingestion.obsidian.parser import MAX_FRONTMATTER_BYTES, MAX_NOTE_BYTES, ObsidianParser, load_frontmatter

SECRET = "TOP-SECRET-7f3a9c1e-outside-the-root"

_opened: list | None = None


def _audit(event, args):
    if _opened is not None and event in ("open", "os.scandir", "os.listdir") and args:
        if isinstance(args[0], (str, bytes, os.PathLike)):
            _opened.append(os.fsdecode(args[0]))


sys.addaudithook(_audit)


@pytest.fixture()
def opened():
    """Every path (or, for opens relative to a folder descriptor, every name) opened or listed meanwhile."""
    global _opened
    _opened = []
    try:
        yield _opened
    finally:
        _opened = None


def _environment_values() -> set[str]:
    values = {v for v in os.environ.values() if len(v) >= 8}
    try:
        raw = Path("/proc/self/environ").read_bytes()
    except OSError:
        return values
    return values | {pair.split(b"=", 1)[1].decode("utf-8", "replace") for pair in raw.split(b"\0")
                     if b"=" in pair and len(pair.split(b"=", 1)[1]) >= 8}


def _assert_nothing_outside_leaked(records):
    dumped = json.dumps(records)
    assert SECRET not in dumped
    leaked = [v for v in _environment_values() if v in dumped]
    assert leaked == []


def _billion_laughs() -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    return "---\n" + "\n".join(lines) + "\n---\nThe laughs note body survives.\n"


@pytest.fixture()
def hostile_vault(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "outside-secret.md").write_text(f"# Secret\n{SECRET}\n")
    vault = tmp_path / "vault"
    (vault / "Folder").mkdir(parents=True)
    (vault / ".obsidian").mkdir()
    (vault / ".obsidian" / "app.md").write_text("hidden config")
    (vault / "Keep.md").write_text("---\ntitle: Kept note\ntags: [safe]\n---\nThe first ordinary note.\n")
    (vault / "Folder" / "Other.md").write_text("Another ordinary note with a [[Keep]] link.\n")
    (vault / "docs.txt").write_text("Plain text reached through a link inside the vault.\n")
    (vault / "leak.md").symlink_to(outside / "outside-secret.md")
    (vault / "relative-leak.md").symlink_to(Path("..") / "outside" / "outside-secret.md")
    (vault / "environ.md").symlink_to("/proc/self/environ")
    (vault / "Shared").symlink_to(outside, target_is_directory=True)
    (vault / "Loop").symlink_to(vault, target_is_directory=True)
    (vault / "Again.md").symlink_to(vault / "Keep.md")
    (vault / "Docs.md").symlink_to("docs.txt")
    (vault / "Sneaky.md").symlink_to(vault / ".obsidian" / "app.md")
    (vault / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    os.mkfifo(vault / "pipe.md")
    (vault / "laughs.md").write_text(_billion_laughs())
    (vault / "self.md").write_text("---\nloop: &loop [*loop]\n---\nA self-referencing alias.\n")
    (vault / "bad-date.md").write_text("---\ncreated: 2024-13-45\n---\nA date that does not exist.\n")
    (vault / "fat-frontmatter.md").write_text("---\nk: " + "x" * (MAX_FRONTMATTER_BYTES + 10) + "\n---\nbody\n")
    with (vault / "huge.md").open("w") as handle:
        handle.write("huge words " * (30 * 1024 * 1024 // 11 + 1))
    return vault


def test_hostile_vault_reads_nothing_outside_and_reports_every_skip(hostile_vault, opened):
    opened.clear()
    started = time.monotonic()
    adapter = ObsidianAdapter(hostile_vault)
    records = {r["metadata"]["path"]: r for r in adapter.records()}
    skipped = {s["path"]: s["reason"] for s in adapter.stats()["skipped"]}
    touched = list(opened)
    assert time.monotonic() - started < 30

    assert sorted(records) == ["Docs.md", "Folder/Other.md", "Keep.md", "bad-date.md", "fat-frontmatter.md",
                               "laughs.md", "self.md"]
    assert records["Keep.md"]["metadata"]["title"] == "Kept note"
    assert "Plain text reached through a link" in records["Docs.md"]["text"]
    for path in ("laughs.md", "self.md", "bad-date.md", "fat-frontmatter.md"):
        assert records[path]["metadata"]["frontmatter"] == {}
        assert skipped[path].startswith("frontmatter skipped, note ingested without it: ")
    assert "The laughs note body survives." in records["laughs.md"]["text"]
    assert len(records["laughs.md"]["text"]) < 2000
    assert "alias" in skipped["laughs.md"] and "alias" in skipped["self.md"]
    assert "cannot build" in skipped["bad-date.md"]
    assert f"larger than {MAX_FRONTMATTER_BYTES} bytes" in skipped["fat-frontmatter.md"]

    for path in ("leak.md", "relative-leak.md", "environ.md", "Shared"):
        assert skipped[path].startswith("symlink leads outside the vault"), (path, skipped[path])
    assert skipped["Loop"] == "symlinked folder: its notes are read under the vault root"
    assert skipped["Again.md"] == "symlink to Keep.md, which is read under its own path"
    assert skipped["Sneaky.md"].startswith("symlink into the hidden folder")
    assert skipped["dangling.md"].startswith("missing")
    assert skipped["pipe.md"] == "not a regular file (a FIFO)"
    assert skipped["huge.md"].startswith(f"larger than {MAX_NOTE_BYTES} bytes")
    assert set(skipped) == set(records) - {"Docs.md", "Folder/Other.md", "Keep.md"} | {
        "leak.md", "relative-leak.md", "environ.md", "Shared", "Loop", "Again.md", "Sneaky.md", "dangling.md",
        "pipe.md", "huge.md"}

    _assert_nothing_outside_leaked(list(records.values()))
    assert not {"outside-secret.md", "outside", "environ", "pipe.md", "huge.md", "leak.md", "app.md"} & {
        Path(p).name for p in touched}
    vault = hostile_vault.resolve()
    assert all(Path(p).resolve().is_relative_to(vault) for p in touched if os.path.isabs(p))


def test_one_bad_frontmatter_does_not_stop_the_vault(tmp_path):
    vault = tmp_path / "v"
    vault.mkdir()
    (vault / "a.md").write_text("---\ntags: 5\nx: &x 1\ny: *x\n---\nalias note\n")
    (vault / "b.md").write_text("---\ntags: 5\n---\nscalar tags\n")
    (vault / "c.md").write_text("---\n" + "[" * 5000 + "\n---\ndeep\n")
    adapter = ObsidianAdapter(vault)
    records = {r["metadata"]["path"]: r["metadata"] for r in adapter.records()}
    assert sorted(records) == ["a.md", "b.md", "c.md"]
    assert records["b.md"]["tags"] == ["5"]
    reasons = {s["path"]: s["reason"] for s in adapter.stats()["skipped"]}
    assert set(reasons) == {"a.md", "c.md"} and "alias" in reasons["a.md"]


def test_frontmatter_aliases_are_refused_before_they_expand():
    started = time.monotonic()
    with pytest.raises(ValueError, match="alias"):
        load_frontmatter(_billion_laughs().split("---")[1])
    assert time.monotonic() - started < 1
    assert load_frontmatter("anchor: &only_an_anchor 1\nb: [1, 2]") == {"anchor": 1, "b": [1, 2]}


def test_pathological_markdown_parses_in_linear_time(tmp_path):
    parser = ObsidianParser(tmp_path)
    started = time.monotonic()
    for body in ("[[" * 20000, "[[#" * 20000, "[[a|" * 20000, "# a" + " " * 20000 + "b"):
        parser.parse_note("x.md", body)
    assert time.monotonic() - started < 5
    note = parser.parse_note("x.md", "# Title ##\n# C#\n[[Page#Part|shown]] [[[odd]]")
    assert [h["text"] for h in note.headings] == ["Title", "C"]
    assert [(link.target, link.heading, link.alias) for link in note.links] == [("Page", "Part", "shown"),
                                                                              ("odd", None, None)]


def test_confined_root_refuses_before_opening(tmp_path, opened):
    (tmp_path / "root").mkdir()
    (tmp_path / "secret.txt").write_text(SECRET)
    (tmp_path / "root" / "link.txt").symlink_to(tmp_path / "secret.txt")
    (tmp_path / "root" / "ok.txt").write_text("fine")
    confined = ConfinedRoot(tmp_path / "root", "test root")
    opened.clear()
    with pytest.raises(RefusedFile, match="outside the test root"):
        confined.read_bytes("link.txt", 100)
    with pytest.raises(RefusedFile, match="larger than 2 bytes"):
        confined.read_bytes("ok.txt", 2)
    assert confined.read_bytes("ok.txt", 100) == b"fine"
    assert "secret.txt" not in {Path(p).name for p in opened}


def _hard_linked_vault(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(f"# Secret\n{SECRET}\n")
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Keep.md").write_text("An ordinary note.\n")
    return outside / "secret.md", vault


def test_a_hard_link_to_a_file_outside_the_vault_is_refused(tmp_path, opened):
    secret, vault = _hard_linked_vault(tmp_path)
    os.link(secret, vault / "linked.md")  # a second name for the secret's inode, inside the vault
    adapter = ObsidianAdapter(vault)
    records = {r["metadata"]["path"]: r for r in adapter.records()}
    skipped = {s["path"]: s["reason"] for s in adapter.stats()["skipped"]}
    assert sorted(records) == ["Keep.md"]
    assert skipped["linked.md"].startswith("a hard link (2 names)"), skipped
    _assert_nothing_outside_leaked(list(records.values()))
    assert "linked.md" not in {Path(p).name for p in opened}  # refused from its metadata, never opened
    with pytest.raises(RefusedFile, match="hard link"):
        ConfinedRoot(vault, "vault").read_bytes("linked.md", 1000)


def test_a_hard_link_unpacked_from_a_tarball_is_refused(tmp_path):
    # tarfile's behaviour before Python 3.14 (and the `fully_trusted` filter after): a hard-link member
    # whose target is an absolute path outside the folder is created as a real hard link
    secret, vault = _hard_linked_vault(tmp_path)
    tarball = tmp_path / "vault.tar"
    with tarfile.open(tarball, "w") as archive:
        member = tarfile.TarInfo("linked.md")
        member.type, member.linkname = tarfile.LNKTYPE, str(secret)
        archive.addfile(member)
    with tarfile.open(tarball) as archive:
        archive.extractall(vault, **({"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}))
    assert os.stat(vault / "linked.md").st_ino == os.stat(secret).st_ino
    adapter = ObsidianAdapter(vault)
    assert [r["metadata"]["path"] for r in adapter.records()] == ["Keep.md"]
    assert {s["path"] for s in adapter.stats()["skipped"]} == {"linked.md"}


def _plain_git(root, *args):
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
                   check=True, capture_output=True, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})


@pytest.fixture()
def hostile_repo(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "config.txt").write_text(f"{SECRET}\n")
    (outside / "leak-target.txt").write_text(f"{SECRET}\n")
    root = tmp_path / "repo"
    (root / "folder").mkdir(parents=True)
    (root / "keep.py").write_text('def kept():\n    """Still ingested."""\n    return 1\n')
    (root / "README.md").write_text("# Repo\nThe rest ingests.\n")
    (root / "folder" / "config.txt").write_text("inside content\n")
    (root / ".gitignore").write_text(".env\n")
    (root / ".env").write_text(f"TOKEN={SECRET}\n")
    (root / "big.txt").write_text("y" * (DEFAULT_MAX_FILE_BYTES + 1))
    _plain_git(root, "init", "-q")
    _plain_git(root, "add", "-A")
    _plain_git(root, "commit", "-qm", "first")
    marker = tmp_path / "marker"
    hook = tmp_path / "fsmonitor.sh"
    hook.write_text(f"#!/bin/sh\necho ran >> '{marker}'\n")
    hook.chmod(0o755)
    _plain_git(root, "config", "core.fsmonitor", str(hook))
    hooks = root / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "post-index-change").write_text(f"#!/bin/sh\necho hook >> '{marker}'\n")
    (hooks / "post-index-change").chmod(0o755)
    (root / "folder" / "config.txt").unlink()
    (root / "folder").rmdir()
    (root / "folder").symlink_to(outside, target_is_directory=True)
    (root / "leak.txt").symlink_to(outside / "leak-target.txt")
    (root / "alias.md").symlink_to("README.md")
    (root / "env-link.txt").symlink_to(".env")
    return root, marker


def test_hostile_repository_runs_no_program_and_reads_nothing_outside(hostile_repo, tmp_path, monkeypatch, opened):
    root, marker = hostile_repo
    monkeypatch.setenv("GIT_DIR", str(tmp_path / "not-a-git-dir"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", f"'core.fsmonitor={tmp_path / 'fsmonitor.sh'}'")
    opened.clear()
    adapter = GitRepositoryAdapter(root)
    records = adapter.records()
    skipped = {s["path"]: s["reason"] for s in adapter.stats()["skipped"]}
    touched = list(opened)

    assert not marker.exists()
    files = sorted(r["metadata"]["path"] for r in records if r["metadata"]["record_type"] == "file")
    assert files == [".gitignore", "README.md", "keep.py"]
    assert [r["metadata"]["qualified_name"] for r in records if r["metadata"]["record_type"] == "symbol"] == ["kept"]
    assert skipped["folder/config.txt"].startswith("symlink leads outside the repository")
    assert skipped["leak.txt"].startswith("symlink leads outside the repository")
    assert skipped["alias.md"] == "symlink to README.md, which is read under its own path"
    assert skipped["env-link.txt"] == "symlink to .env, which git does not list"
    assert skipped["big.txt"].startswith(f"larger than {DEFAULT_MAX_FILE_BYTES} bytes")
    assert skipped["folder"].startswith("symlink leads outside the repository")
    assert set(skipped) == {"folder", "folder/config.txt", "leak.txt", "alias.md", "env-link.txt", "big.txt"}
    _assert_nothing_outside_leaked(records)
    assert not {"config.txt", "leak-target.txt", ".env"} & {Path(p).name for p in touched}

    _plain_git(root, "status", "--porcelain")
    assert marker.exists(), "the fsmonitor hook is live: plain git runs it, the adapter did not"
