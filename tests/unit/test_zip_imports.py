"""The stat-checked zip invalidation Spark's Python workers get (``runtime/dataplane/zip_imports``)."""

from __future__ import annotations

import sys
import zipfile
import zipimport
from pathlib import Path

import pytest

from kconnect.runtime.dataplane.zip_imports import archive_identity, keep_zip_directories

pytestmark = pytest.mark.skipif(sys.version_info >= (3, 12), reason="Python 3.12 invalidates zips lazily")


def write_zip(path: Path, modules: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, source in modules.items():
            archive.writestr(f"{name}.py", source)


def test_an_unchanged_archive_is_not_read_again_and_a_changed_one_is(tmp_path: Path) -> None:
    path = tmp_path / "plugins.zip"
    write_zip(path, {"first": "X = 1\n"})
    importer = zipimport.zipimporter(str(path))
    assert keep_zip_directories()
    assert keep_zip_directories()  # once per process; a second call changes nothing

    importer.invalidate_caches()  # an importer made before: read once more, and stamped
    directory = importer._files  # type: ignore[attr-defined]
    for _ in range(3):
        importer.invalidate_caches()
    assert importer._files is directory  # type: ignore[attr-defined]

    write_zip(path, {"first": "X = 1\n", "second": "Y = 2\n"})
    importer.invalidate_caches()
    assert importer.find_spec("second") is not None
    assert importer.find_spec("first") is not None


def test_a_missing_archive_has_no_identity_and_is_left_to_zipimport(tmp_path: Path) -> None:
    path = tmp_path / "gone.zip"
    write_zip(path, {"first": "X = 1\n"})
    importer = zipimport.zipimporter(str(path))
    keep_zip_directories()
    path.unlink()
    assert archive_identity(str(path)) is None
    importer.invalidate_caches()  # zipimport's own handling: the directory is emptied, nothing raised
    assert importer.find_spec("first") is None
