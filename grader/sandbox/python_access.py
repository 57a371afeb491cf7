"""Whether a run's own uid can start this Python: found from the files' modes before any run, never by a failing run.

As root, a run switches to a uid of its own (isolation.py), which is "other users" to every file of the machine. A
Python installed under a folder other users cannot enter (pyenv or conda under `/root`, mode 0700) cannot then be
started by the run: where another Python of the same version is installed system-wide, the dynamic loader even
falls back to that one's libpython and standard library and the run silently uses another Python than the
grader's; elsewhere it fails to start. So a strategy that switches uid first looks at every folder and file this
Python needs (the interpreter and each link to it, libpython, the standard library, its site-packages, a student's
shared folders), and is refused in one sentence naming the first one other users cannot use and the fix.

Bubblewrap shows the Python installation at its own path, making the folders above it enterable (`--perms 0755
--dir`): there only the shown folders and what is inside them count, not the folders above them.
"""

from __future__ import annotations

import os
import stat
import sys
import sysconfig
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.sandbox.shared_python import folders_to_show

FIX = "or use a Python installed under /usr or /opt"
BITS = {"r": stat.S_IROTH, "w": stat.S_IWOTH, "x": stat.S_IXOTH}


@dataclass(frozen=True)
class Needed:
    """A file or folder the run's Python needs, what it is, and the access other users need to it."""

    what: str
    path: Path
    access: str          # "x" (the interpreter), "r" (a file read), "rx" (a folder read), "" (a link: followed)


def needed_paths() -> list[Needed]:
    """What starting this Python, as a run starts it, reads: the interpreter and each link on the way to it, its
    libpython where it is built shared, the standard library with its extension modules, site-packages, and the
    folders a student's check shares with its runs."""
    found: list[Needed] = []
    link, seen = Path(sys.executable), set()
    while link.is_symlink() and link not in seen:   # each link's folder must be enterable to follow it
        seen.add(link)
        found.append(Needed("interpreter", link, ""))
        target = Path(os.readlink(link))
        link = target if target.is_absolute() else link.parent / target
    found.append(Needed("interpreter", link, "x"))
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir = sysconfig.get_config_var("LIBDIR") or ""
        for name in (sysconfig.get_config_var("INSTSONAME"), sysconfig.get_config_var("LDLIBRARY")):
            if name and libdir and (Path(libdir) / name).exists():
                found.append(Needed("libpython", Path(libdir) / name, "r"))
                break
    paths = sysconfig.get_paths()
    dynload = sysconfig.get_config_var("DESTSHARED") or os.path.join(paths["stdlib"], "lib-dynload")
    found += [Needed("standard library", Path(paths["stdlib"]), "rx"), Needed("extension modules", Path(dynload), "rx")]
    if sys.prefix != sys.base_prefix:
        found.append(Needed("virtual environment's settings", Path(sys.prefix) / "pyvenv.cfg", "r"))
    found += [Needed("site-packages", Path(paths[name]), "rx") for name in ("purelib", "platlib")]
    found += [Needed("shared folder", folder, "rx") for folder in folders_to_show()]
    unique = {(need.path, need.access): need for need in found if need.path.exists() or need.path.is_symlink()}
    return list(unique.values())


def _real(need: Needed) -> Path:
    """The path with every link on the way resolved (a link itself, as needed, is left as it is)."""
    if need.access:
        return Path(os.path.realpath(need.path))
    return Path(os.path.realpath(need.path.parent)) / need.path.name


def _missing(mode: int, access: str) -> str:
    return "".join(bit for bit in access if not mode & BITS[bit])


def blocked(need: Needed, shown: Sequence[Path] | None = None) -> tuple[Path, int, str] | None:
    """The first folder on the way to `need` (or `need` itself) other users cannot use as it needs: (that path, its
    mode, the `chmod o+` bits missing). `shown`: the folders a mount namespace shows at their own paths with the
    folders above them enterable (bubblewrap): only those and what is below them count; a path under none of them is
    not this check's to judge (None)."""
    real = _real(need)
    chain = [*reversed(real.parents), real]
    start = 0
    if shown is not None:
        roots = [Path(os.path.realpath(folder)) for folder in shown]
        under = [index for index, path in enumerate(chain) if path in roots]
        if not under:
            return None
        start = under[0]
    for index in range(start, len(chain)):
        path = chain[index]
        try:
            mode = os.lstat(path).st_mode
        except OSError:
            return None   # gone meanwhile: the probe run says what that means
        access = need.access if index == len(chain) - 1 else "x"
        missing = _missing(mode, access)
        if missing:
            return path, stat.S_IMODE(mode), missing
    return None


def unshown_link(need: Needed, shown: Sequence[Path]) -> bool:
    """A link on the way to the interpreter (a virtualenv made with `python3` that is itself a link, say in ~/bin)
    that lies in no folder the sandbox shows: inside it the link is missing, and the run cannot start."""
    if need.access or need.what != "interpreter":
        return False
    folder = Path(os.path.realpath(need.path.parent))
    roots = [Path(os.path.realpath(root)) for root in shown]
    return not any(folder == root or root in folder.parents for root in roots)


def cannot_start(needs: Iterable[Needed] | None = None, shown: Sequence[Path] | None = None) -> str | None:
    """One sentence saying which folder or file keeps a run's own uid from starting this Python, and the fix; None
    when every one is usable by other users."""
    for need in needed_paths() if needs is None else needs:
        if shown is not None and unshown_link(need, shown):
            target = os.path.realpath(need.path)
            return (f"a run cannot start this Python: it is reached through the link {need.path}, in a folder the "
                    f"sandbox does not show ({need.path.parent}): make the virtualenv with the interpreter itself "
                    f"({target} -m venv ...) {FIX}")
        found = blocked(need, shown)
        if found is None:
            continue
        path, mode, missing = found
        if path == _real(need):
            where = f"cannot {'read' if 'r' in missing else 'run'} this Python's {need.what} {path} (mode {mode:04o})"
            fix = f"make it usable by other users (chmod o+{missing} {path})"
        else:
            where = (f"cannot enter {path} (mode {mode:04o}), a folder on the way to this Python's {need.what} "
                     f"{need.path}")
            fix = f"make the folder enterable by other users (chmod o+{missing} {path})"
        return f"a run's user (a uid of its own) {where}, so it cannot start this Python: {fix} {FIX}"
    return None
