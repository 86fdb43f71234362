"""Chromium's sandbox under deploy/seccomp/kitsune-chromium.json, for real: the profile made into a seccomp
filter as a container runtime would (its refused calls answer EPERM, the rest is allowed), then the
image's Chromium started under it as a user that is not root, with no capability gained
(no_new_privs), as the pods and compose run it. Beside it, the runtime's default (RuntimeDefault)
refusal of new user namespaces, which leaves Chromium no sandbox: the reason the profile ships.

This module is also the launcher: ``python test_deploy_sandbox.py FILTER COMMAND...`` installs the filter
(hex) and becomes COMMAND, so that nothing runs between fork and exec in the test process."""

from __future__ import annotations

import ctypes
import json
import os
import platform
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from driver import find_chromium

PROFILE = Path(__file__).resolve().parents[2] / "deploy" / "seccomp" / "kitsune-chromium.json"
HEADER = Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h")
CHROMIUM = find_chromium()
SYSTEM_PYTHON = Path("/usr/bin/python3")
"""The probe's interpreter: one user nobody may run (the tests' may live under root's home)."""
NOBODY = 65534
NO_SANDBOX = "No usable sandbox"

_LOAD, _JEQ, _JSET, _RET = 0x20, 0x15, 0x45, 0x06
_ARCH_X86_64 = 0xC000003E
_ALLOW, _KILL, _ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_EPERM, _ENOSYS = 1, 38
_CLONE_NEWUSER = 0x10000000
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2


def _numbers() -> dict[str, int]:
    """x86_64's system call numbers by name, from the kernel's headers."""
    if platform.machine() != "x86_64":  # a real reason: the shipped image and this filter are x86_64's
        pytest.skip(f"the filter is built for x86_64, not {platform.machine()}")
    assert HEADER.is_file(), f"{HEADER} is missing: ./scripts/setup installs it (Debian's linux-libc-dev)"
    return {name: int(number) for name, number in re.findall(r"#define __NR_(\w+)\s+(\d+)", HEADER.read_text())}


def _op(code: int, k: int, true: int = 0, false: int = 0) -> bytes:
    return struct.pack("HBBI", code, true, false, k)


def _filter(refused: Iterable[int], runtime_default: dict[str, int] | None = None) -> bytes:
    """A BPF program: another architecture killed, each ``refused`` call EPERM; with ``runtime_default``
    (the numbers), also what the runtimes' default profiles do without CAP_SYS_ADMIN to user namespaces:
    ``unshare`` EPERM, ``clone`` with CLONE_NEWUSER EPERM, ``clone3`` ENOSYS (so that glibc falls back to clone)."""
    program = [_op(_LOAD, 4), _op(_JEQ, _ARCH_X86_64, 1, 0), _op(_RET, _KILL), _op(_LOAD, 0)]
    denied = set(refused) | ({runtime_default["unshare"]} if runtime_default else set())
    for number in sorted(denied):
        program += [_op(_JEQ, number, 0, 1), _op(_RET, _ERRNO | _EPERM)]
    if runtime_default:
        program += [_op(_JEQ, runtime_default["clone"], 0, 3), _op(_LOAD, 16), _op(_JSET, _CLONE_NEWUSER, 0, 1),
                    _op(_RET, _ERRNO | _EPERM), _op(_LOAD, 0),
                    _op(_JEQ, runtime_default["clone3"], 0, 1), _op(_RET, _ERRNO | _ENOSYS)]
    return b"".join([*program, _op(_RET, _ALLOW)])


def _profile_filter(runtime_default: bool = False) -> bytes:
    """The shipped profile as a filter (names this architecture lacks are left out, as runtimes do)."""
    numbers = _numbers()
    profile = json.loads(PROFILE.read_text())
    assert profile["defaultAction"] == "SCMP_ACT_ALLOW"
    refused = {numbers[name] for rule in profile["syscalls"] for name in rule["names"] if name in numbers}
    return _filter(refused, numbers if runtime_default else None)


def _confined(program: bytes, command: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    """``command`` run by this module's launcher under ``program``, as user nobody when the tests run as root."""
    return subprocess.run([sys.executable, __file__, program.hex(), *command], capture_output=True, text=True,
                          env={"HOME": str(home), "TMPDIR": str(home), "PATH": "/usr/bin:/bin"}, timeout=120,
                          check=False)


@pytest.fixture
def home() -> Iterator[Path]:
    """A home the confined user owns (pytest's tmp_path is not reachable by another user)."""
    directory = Path(tempfile.mkdtemp(prefix="kitsune-sandbox-"))
    if os.geteuid() == 0:
        os.chown(directory, NOBODY, NOBODY)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def _chromium(program: bytes, home: Path) -> subprocess.CompletedProcess[str]:
    """Chromium headless, with its sandbox (no --no-sandbox), printing a page's DOM."""
    return _confined(program, [str(CHROMIUM), "--headless", "--disable-gpu", f"--user-data-dir={home / 'profile'}",
                               "--dump-dom", "data:text/html,<p id=marker>sandboxed</p>"], home)


def test_chromium_starts_with_its_sandbox_under_the_shipped_profile(home: Path) -> None:
    answer = _chromium(_profile_filter(), home)
    assert answer.returncode == 0, answer.stderr[-2000:]
    assert '<p id="marker">sandboxed</p>' in answer.stdout and NO_SANDBOX not in answer.stderr


def test_the_runtimes_default_profile_leaves_chromium_no_usable_sandbox(home: Path) -> None:
    """What RuntimeDefault does to an unprivileged process: Chromium refuses to start without --no-sandbox."""
    answer = _chromium(_profile_filter(runtime_default=True), home)
    assert answer.returncode != 0 and NO_SANDBOX in answer.stderr, answer.stderr[-2000:]
    assert "sandboxed" not in answer.stdout


PROBE = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
def errno(number, *args):
    return 0 if libc.syscall(number, *args) != -1 else ctypes.get_errno()
numbers = dict(arg.split("=") for arg in sys.argv[1:])
print(errno(int(numbers["unshare"]), 0x10000000), errno(int(numbers["io_uring_setup"]), 1, None),
      errno(int(numbers["keyctl"]), 0, 0), errno(int(numbers["ptrace"]), 0, 0, None, None))
"""


def test_the_profile_allows_a_user_namespace_and_refuses_what_it_lists(home: Path) -> None:
    """A new user namespace, then io_uring_setup, keyctl and ptrace: refused (EPERM) under the profile, and
    answered otherwise (a bad argument, or done) under a filter that refuses nothing."""
    numbers = _numbers()
    probe = [str(SYSTEM_PYTHON), "-c", PROBE,
             *(f"{name}={numbers[name]}" for name in ("unshare", "io_uring_setup", "keyctl", "ptrace"))]
    confined, control = _confined(_profile_filter(), probe, home), _confined(_filter(()), probe, home)
    assert confined.returncode == 0 == control.returncode, confined.stderr + control.stderr
    assert confined.stdout.split() == ["0", str(_EPERM), str(_EPERM), str(_EPERM)]
    assert control.stdout.split()[0] == "0" and str(_EPERM) not in control.stdout.split()[1:], control.stdout


def _launch(program: bytes, command: list[str]) -> None:
    """Become ``command`` as nobody (when root), with no_new_privs and the filter ``program``."""
    if os.geteuid() == 0:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    libc = ctypes.CDLL(None, use_errno=True)
    code = ctypes.create_string_buffer(program, len(program))
    fprog = ctypes.create_string_buffer(struct.pack("HxxxxxxQ", len(program) // 8, ctypes.addressof(code)))
    for option, args in ((_PR_SET_NO_NEW_PRIVS, (1, 0, 0, 0)),
                         (_PR_SET_SECCOMP, (_SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0))):
        if libc.prctl(ctypes.c_int(option), *(ctypes.c_ulong(arg) for arg in args)) != 0:
            raise OSError(ctypes.get_errno(), f"prctl({option})")
    os.execv(command[0], command)


if __name__ == "__main__":
    _launch(bytes.fromhex(sys.argv[1]), sys.argv[2:])
