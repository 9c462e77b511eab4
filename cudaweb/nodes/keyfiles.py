"""Key files on the worker host: read only from one directory (CUDAWEB_KEY_DIR), or not at all.

A key path typed into a form used to be opened as given: any file the worker could read, and its error told
whether the file existed. Now a path must lie inside the key directory once symlinks are resolved, and every
failure to read it gives the same message."""

import os

from django.conf import settings


class KeyFileRefused(ValueError):
    """The key path is outside the key directory, key files are off, or the file cannot be read as text."""


def key_file_path(name):
    """The real path of `name` (relative to the key directory, or absolute inside it); raises KeyFileRefused."""
    base = settings.CUDAWEB_KEY_DIR
    if not base:
        raise KeyFileRefused("key files are off here: paste the key, or set CUDAWEB_KEY_DIR to the directory of "
                             "key files on the worker host")
    base = os.path.realpath(base)
    path = os.path.realpath(os.path.join(base, name))
    if os.path.commonpath([base, path]) != base or path == base:
        raise KeyFileRefused("key files are read only from the key directory (CUDAWEB_KEY_DIR)")
    return path


def read_key_file(name, limit=65536):
    path = key_file_path(name)
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read(limit)
    except (OSError, UnicodeDecodeError):
        raise KeyFileRefused("no readable key file %r in the key directory" % name) from None
