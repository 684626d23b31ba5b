"""Where BEAM's chats are: the folders a `--dataset` names, and the files of each chat.

BEAM keeps one folder per chat, `chats/<size>/<n>/`, holding `chat.json` and
`probing_questions/probing_questions.json` (and files the farm does not read: plans, topics, pickles). A
`--dataset` is the `chats/` folder, one size folder, one chat folder, or a folder holding `chats/` (the
development copy, `data/beam_dev/`). A chat folder is one that holds `chat.json`, a `plan-<k>/` folder or a
`probing_questions/` folder, so a chat missing one of its files is still found, and fails by name.

A 10M chat keeps its parts in `plan-0/`, `plan-1/`, ... each with its own `chat.json` whose message ids start
again at 0; BEAM's loader (`combine_10m_chats` in its `download_dataset.py`) joins them in plan order, shifting
each part's ids to follow the last id of the part before, and its probing questions name those shifted ids. The
parts are read here the same way (`reader`). Such a folder may also hold BEAM's combined `chat.json` (a list
of `{"plan-<k>": batches}`): the parts are read and it is not, since it holds the same messages.

A chat's id is `<size>/<n>`, its two folder names, so ids are unique by construction; question ids are
`<chat id>:<ability>:<index>`, so a folder name holding `:` is refused (two chats' question ids could meet).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from adapters.errors import DatasetError

CHAT_FILE = "chat.json"
PROBING_FILE = Path("probing_questions") / "probing_questions.json"
#: What BEAM's own answer generation reads instead of `chat.json` where it exists (the chat cut to its size).
TRUNCATED_FILE = "chat_trunecated.json"
_PART = re.compile(r"^plan-(\d+)$")
_SIZE = re.compile(r"^(\d+)([KM])$")


@dataclass(frozen=True)
class ChatFolder:
    """One chat: its id, its folder and its size (the size folder's name, `100K` for the 128K chats)."""

    chat_id: str
    folder: Path
    size: str

    @property
    def probing_file(self) -> Path:
        return self.folder / PROBING_FILE

    def parts(self) -> list[tuple[int, Path]]:
        """The `plan-<k>` folders of a 10M chat as (k, folder), in plan order; none for a single-file chat."""
        found = [(int(m.group(1)), p) for p in self.folder.iterdir() if p.is_dir() and (m := _PART.match(p.name))]
        return sorted(found, key=lambda part: part[0])

    def chat_files(self) -> list[tuple[int | None, Path]]:
        """The chat's files in reading order: each part's `chat.json` with its plan number, or the one `chat.json`
        (plan number None). A missing file is listed all the same: reading it names it."""
        parts = self.parts()
        if parts:
            return [(k, folder / CHAT_FILE) for k, folder in parts]
        return [(None, self.folder / CHAT_FILE)]


def is_chat_folder(path: Path) -> bool:
    if not path.is_dir():
        return False
    if (path / CHAT_FILE).is_file() or (path / PROBING_FILE.parent).is_dir():
        return True
    return any(p.is_dir() and _PART.match(p.name) for p in path.iterdir())


def find_chats(path: str | Path) -> list[ChatFolder]:
    """Every chat a `--dataset` names, sizes by their token count and chats by their number."""
    path = Path(path)
    if not path.is_dir():
        raise DatasetError(f"{path}: not a folder; BEAM is read from its chats/ folder, one size folder of it "
                           "(chats/500K) or one chat folder (chats/500K/3)")
    if is_chat_folder(path):
        found = [ChatFolder(f"{path.parent.name}/{path.name}", path, path.parent.name)]
    elif any(is_chat_folder(child) for child in _children(path)):
        found = _chats_of_size(path)
    else:
        root = path / "chats" if (path / "chats").is_dir() else path
        found = [chat for size in sorted(_children(root), key=_size_order) for chat in _chats_of_size(size)]
    if not found:
        raise DatasetError(f"{path}: holds no BEAM chat (a folder with chat.json, plan-<k>/ parts or "
                           "probing_questions/), neither directly nor in size folders")
    for chat in found:
        if ":" in chat.chat_id:
            raise DatasetError(f"{chat.folder}: a chat's folder names may not hold ':' (its id {chat.chat_id!r} "
                               "starts its question ids, '<chat>:<ability>:<index>')")
    return found


def _chats_of_size(folder: Path) -> list[ChatFolder]:
    chats = sorted((c for c in _children(folder) if is_chat_folder(c)), key=_number_order)
    return [ChatFolder(f"{folder.name}/{chat.name}", chat, folder.name) for chat in chats]


def _children(folder: Path) -> list[Path]:
    return [p for p in folder.iterdir() if p.is_dir()]


def _number_order(path: Path) -> tuple:
    """Numbered chat folders by number, then any others by name."""
    name = path.name
    return (0, int(name), "") if name.isdigit() and len(name) <= 9 else (1, 0, name)


def _size_order(path: Path) -> tuple:
    """Size folders by the tokens they name (100K, 500K, 1M, 10M), then any others by name."""
    match = _SIZE.match(path.name)
    if match:
        return (0, int(match.group(1)) * (1_000 if match.group(2) == "K" else 1_000_000), "")
    return (1, 0, path.name)
