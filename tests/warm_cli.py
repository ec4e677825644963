"""`metaxlm` CLI processes for the tests, forked from a warm process instead of started cold.

A cold `python -m metaxlm.cli ...` spends 6-10 s importing torch, transformers and datasets before it does anything;
the test suite starts over a hundred of them. Here one "zygote" process per test worker imports the CLI's modules
once and forks a child per command: a real process of its own (own pid, own exit status, killable with SIGKILL,
its own stdin/stdout/stderr and environment) that runs `metaxlm.cli` as `python -m` would, in ~0.1 s.

What a forked child cannot have:
- a hash seed of its own: every child shares its zygote's, so a run that depended on the order of a set of strings
  would look deterministic across forked runs. `zygote=1` forks from a second zygote whose hash seed differs from
  the first's: the resume tests resume there, so the resumed run and its reference never share a hash seed.
- environment read at import time (HF_* hub settings, thread-pool sizes other than OMP_NUM_THREADS, which is
  applied per child with torch.set_num_threads): an `env` that differs from the zygote's in any key outside
  WARM_ENV_KEYS runs in a fresh interpreter by itself (as does `cold=True`).
"""

from __future__ import annotations

import atexit
import json
import locale
import os
import random
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading

# environment keys a child may differ in from the zygote: read when used, never at import
WARM_ENV_KEYS = frozenset({"OMP_NUM_THREADS", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                           "MASTER_PORT", "COLUMNS", "METAXLM_PRECISION_CACHE", "TQDM_DISABLE",
                           "PYTEST_CURRENT_TEST"})
WARM_MODULES = ("metaxlm.cli", "metaxlm.models", "metaxlm.pretrain.variant", "metaxlm.pipeline",
                "metaxlm.evaluation.recipe", "metaxlm.finetune.translate")
_MAX_MESSAGE = 1 << 20


# -- the zygote (runs as `python warm_cli.py SOCKET`) ----------------------------------------------------------------
def _child(request: dict, fds: list[int]) -> None:
    """In the forked child: become `python -m metaxlm.cli ARGS` with the request's environment and streams."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads and threads.isdigit():
        import torch

        torch.set_num_threads(int(threads))
    script = request.get("script")
    sys.argv = [script or "metaxlm.cli", *request["args"]]
    # sys.path[0] as `python -m` (the directory) or `python SCRIPT` (the script's) has it
    sys.path[0] = os.path.dirname(os.path.abspath(script)) if script else request["cwd"]
    try:
        if script:
            import runpy

            runpy.run_path(script, run_name="__main__")
            code = 0
        else:
            from metaxlm.cli import main

            code = main()
    except SystemExit as done:
        code = done.code
    except BaseException:  # as the interpreter does: the traceback on stderr, status 1
        sys.excepthook(*sys.exc_info())
        code = 1
    if code is not None and not isinstance(code, int):  # sys.exit("message")
        print(code, file=sys.stderr)
        code = 1
    # the interpreter's exit as far as anyone can see it (non-daemon threads joined, atexit handlers, streams
    # flushed), without tearing down every module: in a fork that touches, and so copies, the zygote's whole heap
    threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code or 0)


def _serve(path: str) -> None:
    import gc
    import importlib
    import selectors

    for name in WARM_MODULES:
        importlib.import_module(name)
    gc.freeze()  # the children's collections leave the imported objects (and their pages) alone
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    children: dict[int, socket.socket] = {}
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(wake_r, selectors.EVENT_READ)
    sel.register(sys.stdin, selectors.EVENT_READ)  # the test worker's pipe: end of file when the worker is gone
    print("ready", flush=True)
    while True:
        for key, _ in sel.select():
            if key.fileobj is listener:
                conn, _ = listener.accept()
                try:
                    payload, fds, _, _ = socket.recv_fds(conn, _MAX_MESSAGE, 3)
                except OSError:
                    conn.close()
                    continue
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    for fd in (listener.fileno(), wake_r, wake_w, *(c.fileno() for c in children.values())):
                        os.close(fd)
                    conn.close()
                    _child(json.loads(payload), fds)
                for fd in fds:
                    os.close(fd)
                conn.send(json.dumps({"pid": pid}).encode())
                children[pid] = conn
            elif key.fileobj is sys.stdin:
                if not os.read(sys.stdin.fileno(), 4096):  # the worker died without closing us: end too
                    _remove_socket(path)
                    os._exit(0)
            else:
                os.read(wake_r, 4096)
            while children:
                try:
                    pid, status = os.waitpid(-1, os.WNOHANG)
                except ChildProcessError:
                    break
                if pid == 0:
                    break
                conn = children.pop(pid, None)
                if conn is not None:
                    try:
                        conn.send(json.dumps({"returncode": os.waitstatus_to_exitcode(status)}).encode())
                    except OSError:
                        pass
                    conn.close()


def _remove_socket(path: str) -> None:
    """The socket and the private directory that holds it (whichever of the zygote and the worker ends first)."""
    try:
        os.unlink(path)
        os.rmdir(os.path.dirname(path))
    except OSError:
        pass


def _cold_command(args: list[str], script: str | None = None) -> list[str]:
    """The fresh-interpreter command a warm child stands for."""
    return [sys.executable, *([script] if script else ["-m", "metaxlm.cli"]), *args]


# -- the client (imported by the tests) -------------------------------------------------------------------------------
class _Zygote:
    def __init__(self, hash_seed: int) -> None:
        self.path = os.path.join(tempfile.mkdtemp(prefix="metaxlm-warm-"), "socket")
        self.env = dict(os.environ)
        self.proc = subprocess.Popen([sys.executable, __file__, self.path], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True,
                                     env={**self.env, "PYTHONHASHSEED": str(hash_seed)})
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the warm CLI process did not start (exit {self.proc.wait()})")
        atexit.register(self.close)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        _remove_socket(self.path)


_zygotes: dict[int, _Zygote] = {}
_HASH_SEED = random.SystemRandom().randrange(2**32 - 2)  # zygote k runs with hash seed _HASH_SEED + k


def _warm(zygote: int) -> _Zygote:
    if zygote not in _zygotes or _zygotes[zygote].proc.poll() is not None:
        _zygotes[zygote] = _Zygote(_HASH_SEED + zygote)
    return _zygotes[zygote]


class WarmProcess:
    """A forked `metaxlm` process with the part of subprocess.Popen's interface the tests use."""

    def __init__(self, args: list[str], env: dict, stdin: int, stdout: int, stderr: int, zygote: int = 0,
                 script: str | None = None) -> None:
        zygote = _warm(zygote)
        self.args = args
        self.returncode: int | None = None
        self._conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._conn.connect(zygote.path)
        request = {"args": list(args), "env": env, "cwd": os.getcwd(), "script": script}
        socket.send_fds(self._conn, [json.dumps(request).encode()], [stdin, stdout, stderr])
        self.pid = json.loads(self._conn.recv(_MAX_MESSAGE))["pid"]

    def _receive(self, timeout: float | None) -> int | None:
        if self.returncode is None:
            ready, _, _ = select.select([self._conn], [], [], timeout)
            if ready:
                message = self._conn.recv(_MAX_MESSAGE)
                if not message:
                    raise RuntimeError("the warm CLI process died")
                self.returncode = json.loads(message)["returncode"]
                self._conn.close()
        return self.returncode

    def poll(self) -> int | None:
        return self._receive(0)

    def wait(self, timeout: float | None = None) -> int:
        if self._receive(timeout) is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _cold_env_needed(env: dict) -> bool:
    base = _zygotes[0].env if 0 in _zygotes else os.environ
    keys = set(env) | set(base)
    return any(env.get(k) != base.get(k) for k in keys - WARM_ENV_KEYS)


def popen(args: list[str], *, env: dict | None = None, stdout=None, stderr=None, cold: bool = False,
          zygote: int = 0, script: str | None = None):
    """Start `metaxlm ARGS`, or `python SCRIPT ARGS` (a script that runs metaxlm: its imports are the warm ones).
    stdout/stderr: None = inherit, subprocess.DEVNULL, an open file, or (stderr) subprocess.STDOUT."""
    env = dict(os.environ if env is None else env)
    if cold or _cold_env_needed(env):
        return subprocess.Popen(_cold_command(args, script), env=env, stdout=stdout, stderr=stderr,
                                stdin=subprocess.DEVNULL)
    with open(os.devnull, "r+b") as null:
        out = _fd(stdout, null, 1)
        err = out if stderr == subprocess.STDOUT else _fd(stderr, null, 2)
        return WarmProcess(args, env, null.fileno(), out, err, zygote=zygote, script=script)


def _fd(stream, null, inherited: int) -> int:
    if stream is None:
        return inherited
    if stream == subprocess.DEVNULL:
        return null.fileno()
    return stream.fileno()


def run(args: list[str], *, env: dict | None = None, input: bytes | str | None = None, text: bool = True,
        timeout: float | None = None, cold: bool = False, zygote: int = 0) -> subprocess.CompletedProcess:
    """subprocess.run(["python", "-m", "metaxlm.cli", *args], capture_output=True, ...) in a warm fork."""
    env = dict(os.environ if env is None else env)
    if cold or _cold_env_needed(env):
        return subprocess.run(_cold_command(args), env=env, capture_output=True, text=text, input=input,
                              timeout=timeout)
    encoding = locale.getpreferredencoding(False)
    with tempfile.TemporaryFile() as src, tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        if input is not None:
            src.write(input.encode(encoding) if isinstance(input, str) else input)
            src.seek(0)
        proc = WarmProcess(args, env, src.fileno(), out.fileno(), err.fileno(), zygote=zygote)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if text:
        stdout, stderr = stdout.decode(encoding), stderr.decode(encoding)
    return subprocess.CompletedProcess(["metaxlm", *args], code, stdout, stderr)


if __name__ == "__main__":
    _serve(sys.argv[1])
