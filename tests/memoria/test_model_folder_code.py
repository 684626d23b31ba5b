"""A model folder may not bring code: `modules.json` names sentence-transformers' own module classes only, the
project's check refuses anything else whatever version is installed, and the version it requires refuses it too."""

import json
import os
import shutil
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement

from memoria import model_files
from memoria.model_files import ModelFilesError, resolve
from tests.conftest import REPO

#: What the crafted module does when it is imported: leave this file behind.
PAYLOAD = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\nimport torch\n\n" \
          "class Evil(torch.nn.Module):\n    pass\n"


def _crafted(tmp_path, module_type="modeling_evil.Evil", module_path="2_Evil"):
    """A copy of the packaged MiniLM (weights hard-linked where possible) whose modules.json adds a module of class
    `module_type`, defined in a file inside the folder that writes a marker when it runs."""
    folder, marker = tmp_path / "crafted", tmp_path / "it-ran"

    def link_or_copy(src, dest):
        try:
            os.link(src, dest)
        except OSError:
            shutil.copy2(src, dest)

    shutil.copytree(model_files.resolve("minilm").root, folder, copy_function=link_or_copy)
    (folder / "modeling_evil.py").write_text(PAYLOAD.format(marker=str(marker)))
    modules = json.loads((folder / "modules.json").read_text())
    modules.append({"idx": len(modules), "name": str(len(modules)), "path": module_path, "type": module_type})
    (folder / "modules.json").unlink()  # a hard link to the installed file: replace it, never write through it
    (folder / "modules.json").write_text(json.dumps(modules))
    return folder, marker


@pytest.fixture(autouse=True)
def _fresh_checks():
    resolve.cache_clear()
    yield
    resolve.cache_clear()


def test_a_module_class_from_a_file_in_the_folder_is_refused_before_anything_runs(tmp_path):
    folder, marker = _crafted(tmp_path)
    with pytest.raises(ModelFilesError, match=r"modules.json: module 3 has type 'modeling_evil.Evil'"):
        resolve(str(folder))
    from memoria.embedder import Embedder

    with pytest.raises(ModelFilesError, match="may not bring its own code"):
        Embedder(embedder=str(folder))
    assert not marker.exists()


@pytest.mark.parametrize("module_type, module_path, said", [
    ("sentence_transformers.models.Evil", "2_Evil", "type 'sentence_transformers.models.Evil'"),
    ("sentence_transformersx.models.Pooling", "2_Evil", "type 'sentence_transformersx"),
    ("sentence_transformers.models.Normalize", "../elsewhere", "path '../elsewhere', not a folder inside"),
    ("sentence_transformers.models.Normalize", "/etc", "path '/etc'"),
])
def test_unknown_classes_and_paths_out_of_the_folder_are_refused(tmp_path, module_type, module_path, said):
    folder, _ = _crafted(tmp_path, module_type, module_path)
    (folder / "modeling_evil.py").unlink()
    with pytest.raises(ModelFilesError, match=said.replace(".", r"\.").replace("(", r"\(")):
        resolve(str(folder))


def test_a_folder_holding_python_files_is_refused_even_with_known_modules(tmp_path):
    folder, _ = _crafted(tmp_path, "sentence_transformers.models.Normalize", "")
    with pytest.raises(ModelFilesError, match=r"modeling_evil.py: a model folder may not hold code"):
        resolve(str(folder))
    (folder / "modeling_evil.py").unlink()
    assert resolve(str(folder)).dimension == 384, "the same folder without the file is an ordinary model"


def test_the_required_sentence_transformers_refuses_such_a_folder_by_itself(tmp_path):
    """The floor in pyproject.toml excludes the versions that ran the folder's file (5.1.2 did), and the version
    installed here, loading the crafted folder directly, refuses it without running anything."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    floor = next(Requirement(d) for d in project["dependencies"] if d.startswith("sentence-transformers"))
    assert "5.1.2" not in floor.specifier and "5.7.0" not in floor.specifier
    assert floor.specifier.contains(metadata.version("sentence-transformers"))
    from sentence_transformers import SentenceTransformer

    folder, marker = _crafted(tmp_path)
    with pytest.raises(ValueError, match="not part of Sentence Transformers"):
        SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    assert not marker.exists()
