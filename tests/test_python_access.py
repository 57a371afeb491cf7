"""A Python other users cannot read is found before any run: a strategy whose runs (a uid of their own) could not
start it is refused in one sentence naming the folder and the fix (grader/sandbox/python_access.py).

The unreadable case is built here: a Python installation's files under a 0700 folder (as pyenv under /root), and the
check pointed at them; nothing runs as another user. Where this machine's own Python is such a one (root, and a
Python under /root), the real strategies are checked too: bubblewrap, which shows the installation with the folders
above it enterable, still works; the strategies without it are refused with the sentence, and never probed."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from grader.sandbox import isolation, python_access
from grader.sandbox.isolation import Bubblewrap, ProcessGroup, Unshare, WeakIsolation, require_isolation
from grader.sandbox.python_access import Needed, cannot_start
from tests.python_for_others import WHY


@pytest.fixture
def installation():
    """`<base>/root` (0700) holding a Python installation (0755 folders, an executable, a libpython), in a folder
    every user may enter."""
    base = Path(tempfile.mkdtemp(dir="/tmp" if os.path.isdir("/tmp") else None))
    try:
        base.chmod(0o755)
        home = base / "root"
        prefix = home / ".pyenv" / "versions" / "3.11.7"
        (prefix / "bin").mkdir(parents=True)
        (prefix / "lib" / "python3.11" / "lib-dynload").mkdir(parents=True)
        interpreter = prefix / "bin" / "python3.11"
        interpreter.write_text("")
        interpreter.chmod(0o755)
        (prefix / "lib" / "libpython3.11.so.1.0").write_text("")
        (prefix / "lib" / "libpython3.11.so.1.0").chmod(0o644)
        for folder in (prefix, *prefix.parents):
            if folder == base:
                break
            folder.chmod(0o755)
        home.chmod(0o700)
        if any(not os.stat(parent).st_mode & 0o001 for parent in base.parents):
            pytest.skip(f"a folder above {base} is not enterable by other users: the case needs one that is")
        yield base, prefix
    finally:
        for folder, _, _ in os.walk(base):
            os.chmod(folder, 0o755)
        shutil.rmtree(base, ignore_errors=True)


def needs(prefix: Path) -> list[Needed]:
    return [Needed("interpreter", prefix / "bin" / "python3.11", "x"),
            Needed("libpython", prefix / "lib" / "libpython3.11.so.1.0", "r"),
            Needed("standard library", prefix / "lib" / "python3.11", "rx")]


def test_a_python_under_a_folder_others_cannot_enter_is_named_with_the_fix(installation):
    base, prefix = installation
    assert cannot_start(needs(prefix)) == (
        f"a run's user (a uid of its own) cannot enter {base / 'root'} (mode 0700), a folder on the way to this "
        f"Python's interpreter {prefix / 'bin' / 'python3.11'}, so it cannot start this Python: make the folder "
        f"enterable by other users (chmod o+x {base / 'root'}) or use a Python installed under /usr or /opt")
    (base / "root").chmod(0o711)   # enterable, not listable: enough
    assert cannot_start(needs(prefix)) is None
    (prefix / "lib" / "libpython3.11.so.1.0").chmod(0o600)
    assert cannot_start(needs(prefix)) == (
        f"a run's user (a uid of its own) cannot read this Python's libpython "
        f"{prefix / 'lib' / 'libpython3.11.so.1.0'} (mode 0600), so it cannot start this Python: make it usable "
        f"by other users (chmod o+r {prefix / 'lib' / 'libpython3.11.so.1.0'}) or use a Python installed under "
        "/usr or /opt")


def test_under_bubblewrap_only_the_folders_it_shows_count(installation):
    base, prefix = installation
    assert cannot_start(needs(prefix), shown=[prefix]) is None   # /root is made enterable inside the sandbox
    prefix.chmod(0o700)
    assert f"cannot enter {prefix} (mode 0700)" in (cannot_start(needs(prefix), shown=[prefix]) or "")


def test_a_link_to_the_interpreter_outside_the_shown_folders_is_named_with_the_fix(installation, tmp_path):
    """A virtualenv made with a `python3` that is a link in a folder of its own (~/bin, a tool's shim folder): the
    sandbox shows the installation and the virtualenv, not that folder, so the run's interpreter path is missing."""
    base, prefix = installation
    links = tmp_path / "bin"
    links.mkdir()
    (links / "python3").symlink_to(prefix / "bin" / "python3.11")
    chain = [Needed("interpreter", links / "python3", ""), *needs(prefix)]
    sentence = cannot_start(chain, shown=[prefix])
    assert sentence == (f"a run cannot start this Python: it is reached through the link {links / 'python3'}, in a "
                        f"folder the sandbox does not show ({links}): make the virtualenv with the interpreter "
                        f"itself ({prefix / 'bin' / 'python3.11'} -m venv ...) or use a Python installed under /usr "
                        "or /opt")
    assert cannot_start(chain, shown=[prefix, links]) is None   # shown: the link is there inside too
    # without a sandbox's view (a strategy that shows the whole machine) the link is there: not this rule
    assert not (cannot_start(chain) or "").startswith("a run cannot start this Python: it is reached through")


def test_a_strategy_whose_runs_cannot_start_this_python_is_refused_in_one_sentence_without_a_run(installation,
                                                                                                 monkeypatch):
    base, prefix = installation
    monkeypatch.setattr(python_access, "needed_paths", lambda: needs(prefix))
    monkeypatch.setattr(isolation.Isolation, "switches_uid", property(lambda self: True))   # as root, with setpriv

    def no_probe(run):
        raise AssertionError("the probe ran: the refusal must come before any run")

    monkeypatch.setattr(isolation, "inspect_with", no_probe)
    sentence = cannot_start(needs(prefix))
    assert sentence and f"chmod o+x {base / 'root'}" in sentence
    for strategy in (ProcessGroup(), Unshare()):
        assert strategy.facts.failure == sentence and strategy.facts.cannot_start_python and not strategy.works()
        assert strategy.facts.weaknesses() == [sentence]
        with pytest.raises(WeakIsolation) as refused:
            require_isolation(strategy, allow_weak=True)   # even asked for by name: its runs could not start
        assert str(refused.value) == f"refusing to grade: {sentence}"
    # bubblewrap shows the installation with the folders above it enterable: not refused for it
    shown = Bubblewrap()
    monkeypatch.setattr(isolation, "python_dirs", lambda: [prefix])
    assert shown.python_problem() is None


@pytest.mark.skipif(WHY is None, reason="this machine's runs can start its Python: the case is built above instead")
def test_on_this_machine_bubblewrap_works_and_the_strategies_without_it_are_refused_up_front():
    assert isolation.recheck().facts.strong and isinstance(isolation.strongest_available(), Bubblewrap)
    for strategy in (Unshare(), ProcessGroup()):
        assert strategy.facts.failure == WHY and strategy.facts.cannot_start_python
