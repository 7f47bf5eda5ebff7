"""JAX's persistent compilation cache, on by default: a script run a second time loads its compiled programs from
disk instead of compiling them again.

``import tallmcmc`` points JAX's cache (``jax_compilation_cache_dir``) at a folder in the user's cache directory
(:func:`default_directory`, e.g. ``~/.cache/tallmcmc/jax`` on Linux), caches every compilation however short
(JAX's own default keeps only those over a second, and most of a run's programs compile faster). It changes nothing
if the cache is already configured (``JAX_COMPILATION_CACHE_DIR`` or ``jax.config.update("jax_compilation_cache_dir",
…)`` before the import). It never starts JAX's backend, so ``tallmcmc.distributed.initialize`` can still run after the
import.

The folder tallmcmc chooses is bounded (:data:`DEFAULT_MAX_BYTES`, 1 GiB): at most once a day (:func:`prune_if_due`,
at the import) the least recently used files are deleted until the folder holds at most
:data:`PRUNED_FRACTION` of the bound. A deleted program is compiled again when next needed; nothing else changes.
JAX's own bound (``jax_compilation_cache_max_size``) is not used: it needs the ``filelock`` package and scans the
whole folder at every write (``docs/compilation.md``, "A bounded folder").

Opt out, or choose the folder, with the environment variable ``TALLMCMC_COMPILATION_CACHE``: ``0`` (or ``off``,
``false``, ``no``) leaves JAX's cache off; a path puts the cache there. ``TALLMCMC_COMPILATION_CACHE_MAX_SIZE`` sets
the bound (``500M``, ``2G``, a number of bytes, or ``unbounded``). ``tallmcmc cache`` shows the folder, its size and
its bound, and prunes or clears it. Measured: ``docs/compilation.md``.
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple

import jax

from tallmcmc._switches import is_off

__all__ = [
    "CACHE_FILES",
    "DEFAULT_MAX_BYTES",
    "ENVIRONMENT_VARIABLE",
    "MAX_SIZE_VARIABLE",
    "PROGRAMS_FOLDER",
    "PRUNED_FRACTION",
    "PRUNE_INTERVAL_SECONDS",
    "CacheFile",
    "CacheFolder",
    "Pruned",
    "configure",
    "default_directory",
    "managed_folder",
    "max_bytes",
    "prune",
    "prune_if_due",
    "usage",
]

ENVIRONMENT_VARIABLE = "TALLMCMC_COMPILATION_CACHE"
#: The environment variable that sets the folder's bound.
MAX_SIZE_VARIABLE = "TALLMCMC_COMPILATION_CACHE_MAX_SIZE"
#: The bound of the folder tallmcmc chooses, in bytes (a small run's programs take about 0.5 MB).
DEFAULT_MAX_BYTES = 1 << 30
#: A prune deletes the least recently used files until the folder holds at most this fraction of the bound (so that
#: the next day's programs do not prune again at once).
PRUNED_FRACTION = 0.8
#: The folder is looked at, and pruned if over its bound, at most this often (at ``import tallmcmc``).
PRUNE_INTERVAL_SECONDS = 24 * 3600
#: The file whose modification time says when the folder was last looked at.
STAMP_NAME = ".tallmcmc-pruned"
#: The folder, inside the cache's folder, of tallmcmc's kept programs (:mod:`tallmcmc.program_cache`).
PROGRAMS_FOLDER = "tallmcmc-programs"
#: The files the cache writes, by path inside its folder: JAX's entries (``<key>-cache``, and ``<key>-atime`` where
#: JAX's own bound is set) and, in :data:`PROGRAMS_FOLDER`, the kept programs, their half-written temporary files and
#: the compile-ahead marks (``tallmcmc.sampling.ahead.MARKS``; a test checks the name). Nothing else in the folder is
#: counted, pruned or cleared: a folder named by ``TALLMCMC_COMPILATION_CACHE`` may hold other files.
CACHE_FILES = re.compile(
    r"[^/]+-(?:cache|atime)|"
    + re.escape(PROGRAMS_FOLDER)
    + r"/(?:[^/]+\.jaxexport|\.writing-[^/]+|compiled-ahead/[0-9a-f]{64})"
)

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"(\d+(?:\.\d*)?)\s*([kmgt]?)(?:i?b)?")
_UNBOUNDED = frozenset({"unbounded", "none", "-1"})

_managed: Path | None = None  # the folder configure() chose, if it chose one


def default_directory() -> Path:
    """The user's cache directory for tallmcmc's compiled programs (``platformdirs.user_cache_dir``)."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("tallmcmc")) / "jax"


def configure(environ: dict[str, str] | None = None) -> Path | None:
    """Turn JAX's persistent compilation cache on (see the module docstring); returns its folder, or ``None``.

    ``None`` when ``TALLMCMC_COMPILATION_CACHE`` opts out, or when JAX's cache
    was configured before (it is then left as it is, and its folder returned).
    """
    environ = os.environ if environ is None else environ
    already = jax.config.jax_compilation_cache_dir
    if already:
        return Path(already)
    value = environ.get(ENVIRONMENT_VARIABLE, "").strip()
    if is_off(value):
        return None
    bound = max_bytes(environ)
    directory = Path(value).expanduser() if value else default_directory()
    jax.config.update("jax_compilation_cache_dir", str(directory))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    global _managed
    _managed = directory
    if bound is not None:
        try:
            prune_if_due(directory, bound)
        except OSError:  # a folder that cannot be read or written: the cache itself copes (it warns, or compiles)
            pass
    return directory


def managed_folder() -> Path | None:
    """The folder :func:`configure` chose (and bounds), or ``None`` when the cache is off or was configured
    outside tallmcmc."""
    return _managed


def max_bytes(environ: Mapping[str, str] | None = None) -> int | None:
    """The folder's bound in bytes from ``TALLMCMC_COMPILATION_CACHE_MAX_SIZE`` (``None``: unbounded).

    Unset or empty: :data:`DEFAULT_MAX_BYTES`. A number of bytes (``500000000``), a number with a unit of
    1024-powers (``500M``, ``2G``, ``1.5GiB``, ``512kb``; any case), or ``unbounded``.

    Raises
    ------
    ValueError
        If the value is none of these, naming the variable and the forms it takes.
    """
    environ = os.environ if environ is None else environ
    value = environ.get(MAX_SIZE_VARIABLE, "").strip().lower()
    if not value:
        return DEFAULT_MAX_BYTES
    if value in _UNBOUNDED:
        return None
    match = _SIZE.fullmatch(value)
    if match is None:
        raise ValueError(
            f"{MAX_SIZE_VARIABLE}={environ[MAX_SIZE_VARIABLE]!r} is not a size: give a number of bytes (500000000), "
            "a number with a unit (500M, 2G, 1.5GiB) or 'unbounded'"
        )
    return int(float(match.group(1)) * _UNITS[match.group(2)])


class CacheFile(NamedTuple):
    """One file of the folder: its path, size in bytes, and when it was last used (the later of its access and
    modification times, in seconds since the epoch)."""

    path: Path
    size: int
    last_used: float


class CacheFolder(NamedTuple):
    """What :func:`usage` found in a folder: its files, least recently used first."""

    directory: Path
    files: list[CacheFile]

    @property
    def size(self) -> int:
        """The files' bytes, together."""
        return sum(file.size for file in self.files)


class Pruned(NamedTuple):
    """What :func:`prune` did: the files and bytes deleted, and the bytes left."""

    removed_files: int
    removed_bytes: int
    kept_bytes: int


def usage(directory: Path) -> CacheFolder:
    """The cache's files in ``directory`` (:data:`CACHE_FILES`: JAX's programs and tallmcmc's kept programs), least
    recently used first; other files are left out. An absent folder has no files."""
    directory = Path(directory)
    if not directory.is_dir():
        return CacheFolder(directory, [])
    # the folder's own entries and everything under the kept programs' folder, nothing deeper elsewhere (a folder
    # named by TALLMCMC_COMPILATION_CACHE may be large)
    candidates = [*directory.iterdir(), *(directory / PROGRAMS_FOLDER).rglob("*")]
    files = []
    for path in candidates:
        if not CACHE_FILES.fullmatch(path.relative_to(directory).as_posix()):
            continue
        try:
            status = path.stat()
        except OSError:  # deleted meanwhile by another process
            continue
        if stat.S_ISREG(status.st_mode):
            files.append(CacheFile(path, status.st_size, max(status.st_atime, status.st_mtime)))
    files.sort(key=lambda file: file.last_used)
    return CacheFolder(directory, files)


def prune(directory: Path, bound: int) -> Pruned:
    """Delete the least recently used files of ``directory`` until it holds at most :data:`PRUNED_FRACTION` of
    ``bound`` bytes; nothing if it holds ``bound`` bytes or fewer.

    "Used" is the later of a file's access and modification times, so that a program read often stays even where
    the file system updates access times at most daily (``relatime``); where it never does (``noatime``), the
    oldest programs go first. A program deleted while another process is about to read it is compiled again
    there (JAX warns that it could not read the entry).
    """
    folder = usage(directory)
    total = folder.size
    if total <= bound:
        return Pruned(0, 0, total)
    target = PRUNED_FRACTION * bound
    removed = removed_bytes = 0
    for file in folder.files:
        if total <= target:
            break
        try:
            file.path.unlink()
        except FileNotFoundError:  # another process pruned it first
            pass
        total -= file.size
        removed += 1
        removed_bytes += file.size
    return Pruned(removed, removed_bytes, total)


def prune_if_due(directory: Path, bound: int, *, now: float | None = None) -> Pruned | None:
    """:func:`prune` ``directory`` to ``bound`` if it was last looked at :data:`PRUNE_INTERVAL_SECONDS` ago or more
    (or never); ``None`` if not due or the folder does not exist yet. Marks the folder looked at."""
    directory = Path(directory)
    if not directory.is_dir():
        return None
    now = time.time() if now is None else now
    stamp = directory / STAMP_NAME
    try:
        if now - stamp.stat().st_mtime < PRUNE_INTERVAL_SECONDS:
            return None
    except FileNotFoundError:
        pass
    pruned = prune(directory, bound)
    stamp.touch()
    os.utime(stamp, (now, now))
    return pruned
