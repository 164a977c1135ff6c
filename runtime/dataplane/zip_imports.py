"""Spark's Python workers on Python 3.10 and 3.11: keep zip archives' directories between tasks.

PySpark imports itself from ``pyspark.zip`` (Spark puts ``$SPARK_HOME/python/lib/*.zip`` first on a
Python worker's path) and calls ``importlib.invalidate_caches()`` before every Spark task it runs
(``worker_util.setup_spark_files``). On Python 3.10 and 3.11 that makes every ``zipimporter`` in
``sys.path_importer_cache`` (one per package directory imported from the archive) read the archive's whole
central directory again, eagerly: CPython issue gh-103200, fixed in 3.12 by making the invalidation lazy.
Measured on the data-plane bench (2026-11-27, 2 vCPUs): a sink reader's Python worker spent about 38% of
its CPU there, tens of milliseconds per micro-batch task.

``keep_zip_directories`` replaces ``zipimporter.invalidate_caches`` in this process with one that reads an
archive again only when the file changed (its size, modification time or inode), which is all the
invalidation is for: archives on the path are not rewritten while a worker runs, and one that is still
gets read again. Nothing changes on 3.12 and later.
"""

from __future__ import annotations

import os
import sys
import threading
import zipimport
from typing import Any

_lock = threading.Lock()
_installed = False
#: Where the archive's identity is kept on each importer (each holds its own copy of the directory).
_SEEN = "_kconnect_archive_stat"


def archive_identity(path: str) -> tuple[int, int, int] | None:
    """What tells a changed archive from the one already read: size, modification time and inode
    (None when it cannot be read, which never matches, so the importer's own handling runs)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns, st.st_ino


def keep_zip_directories() -> bool:
    """Install the stat-checked invalidation once per process; whether it is (now) installed."""
    global _installed
    if sys.version_info >= (3, 12):
        return False
    with _lock:
        if _installed:
            return True
        eager = zipimport.zipimporter.invalidate_caches

        def invalidate_caches(self: Any) -> None:
            identity = archive_identity(self.archive)
            if identity is not None and getattr(self, _SEEN, None) == identity:
                return
            eager(self)
            setattr(self, _SEEN, identity)

        # Importers created before this call have never been stamped: each reads once more, then not again.
        zipimport.zipimporter.invalidate_caches = invalidate_caches  # type: ignore[method-assign]
        _installed = True
        return True
