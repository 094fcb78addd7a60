#!/usr/bin/python3 -SI
"""A fork server for the tests' Python checks: torch imported once, each check a fork.

Importing torch 1.13 costs about 1.6 s of CPU, and the suite's shell tests run a
few hundred small Python checks that import it; `make test` (tests/run_all.sh)
starts one server and the `$PY ...` checks that use torch run as forks of it.

  pyfork.py --serve SOCKET PID   the server: imports torch and numpy (where
                                 /usr/bin/python3 has them), listens on the unix
                                 socket SOCKET, and ends when process PID does
  pyfork.py ARGS...              a client, in place of `/usr/bin/python3 ARGS...`:
                                 ARGS is `-c CODE [ARG...]`, `- [ARG...]` (the
                                 program on stdin) or `SCRIPT.py [ARG...]`; a
                                 program whose text names neither torch nor
                                 numpy runs in /usr/bin/python3 (its start costs
                                 less than a fork of the server); else the client
                                 passes its stdin, stdout and stderr, its folder,
                                 environment and arguments to the server, whose
                                 fork runs the program as python3 would (sys.argv,
                                 sys.path[0], __main__, the exit status, a
                                 traceback on stderr) and whose status it exits
                                 with; SIGINT, SIGTERM and SIGHUP are passed on.

Without $TPC_PY_SOCK, with other arguments, or when the server does not answer,
the client execs /usr/bin/python3 itself: a test run on its own (`meson test
NAME`) behaves the same, only slower.
"""
import os
import struct
import sys

PYTHON = "/usr/bin/python3"
HDR = struct.Struct("<I")


def recv_exact(conn, n):
    b = b""
    while len(b) < n:
        c = conn.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


# -- the client --------------------------------------------------------------
def program_text(args):
    """The program's text: -c's code, the script's file, or all of stdin (as
    python3 reads it); None when it cannot be had."""
    if args[0] == "-c":
        return args[1].encode()
    if args[0] == "-":
        return sys.stdin.buffer.read()
    try:
        with open(args[0], "rb") as f:
            return f.read()
    except OSError:
        return None


def client(args):
    sock = os.environ.get("TPC_PY_SOCK")
    if not sock or not args or not (args[0] in ("-c", "-") or args[0].endswith(".py")) or \
            (args[0] == "-c" and len(args) < 2):
        os.execv(PYTHON, [PYTHON] + args)
    text = program_text(args)
    # a program that names neither torch nor numpy starts faster on its own
    # (a fork of the server costs more than python3's start without them)
    if text is None or not (b"torch" in text or b"numpy" in text):
        if args[0] == "-":  # its text is read: run it as -c (sys.argv[0] "-c")
            args = ["-c", text.decode()] + args[1:]
        os.execv(PYTHON, [PYTHON] + args)
    import socket
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.connect(sock)
    except OSError:
        if args[0] == "-":
            args = ["-c", text.decode()] + args[1:]
        os.execv(PYTHON, [PYTHON] + args)
    code = text.decode() if args[0] == "-" else None
    msg = repr({"argv": args, "code": code, "cwd": os.getcwd(), "env": dict(os.environ)}).encode()
    socket.send_fds(conn, [HDR.pack(len(msg))], [0, 1, 2])
    conn.sendall(msg)
    try:
        pid = HDR.unpack(recv_exact(conn, 4))[0]
    except (EOFError, OSError):
        sys.stderr.write("pyfork: the server did not start the program\n")
        return 1
    import signal

    def forward(sig, _frame):
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, forward)
    while True:
        try:
            return struct.unpack("<i", recv_exact(conn, 4))[0]
        except InterruptedError:
            continue
        except (EOFError, OSError):
            sys.stderr.write("pyfork: the program ended without a status (killed?)\n")
            return 1


# -- the server --------------------------------------------------------------
def run_program(req):
    """In the fork: become `python3 ARGV...` and return its exit status."""
    import builtins, runpy, traceback, types
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    args = req["argv"]
    # a fresh interpreter seeds these from the OS: so does each fork
    if "random" in sys.modules:
        sys.modules["random"].seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    main = types.ModuleType("__main__")
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    try:
        if args[0] == "-c":
            sys.argv = ["-c"] + args[2:]
            sys.path[0] = ""
            exec(compile(args[1], "<string>", "exec"), main.__dict__)
        elif args[0] == "-":
            sys.argv = ["-"] + args[1:]
            sys.path[0] = ""
            exec(compile(req["code"], "<stdin>", "exec"), main.__dict__)  # the client read stdin
        else:
            sys.argv = list(args)
            sys.path[0] = os.path.dirname(os.path.abspath(args[0]))
            main.__dict__.update(runpy.run_path(args[0], run_name="__main__"))
        code = 0
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            sys.stderr.write("%s\n" % (e.code,))
            code = 1
    except BaseException as e:  # the traceback without this function's frame
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)
        code = 130 if isinstance(e, KeyboardInterrupt) else 1
    # what the interpreter's exit does before the status is known: the atexit
    # functions, every file the program left open flushed (text files first:
    # they flush into their buffers), then its objects dropped (those files
    # closed) and the standard streams flushed
    import atexit, gc, io
    try:
        atexit._run_exitfuncs()
    except BaseException:
        pass
    files = [f for f in gc.get_objects() if issubclass(type(f), io.IOBase)]
    files.sort(key=lambda f: not issubclass(type(f), io.TextIOBase))
    for f in files:
        try:
            if not f.closed and f.writable():
                f.flush()
        except BaseException:
            pass
    del files
    main.__dict__.clear()
    gc.collect()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass
    return code & 0xff


def serve_one(conn):
    import signal, socket
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    data, fds, _flags, _addr = socket.recv_fds(conn, 4, 3)
    n = HDR.unpack(data + recv_exact(conn, 4 - len(data)))[0]
    import ast
    req = ast.literal_eval(recv_exact(conn, n).decode())
    for i, fd in enumerate(fds):
        os.dup2(fd, i)
        os.close(fd)
    conn.sendall(HDR.pack(os.getpid()))
    code = run_program(req)
    try:
        conn.sendall(struct.pack("<i", code))
    except OSError:
        pass
    os._exit(code)


def serve(path, owner):
    import signal, socket
    sys.path.insert(0, "")
    import ast, atexit, builtins, io, runpy, traceback, types  # noqa: F401 (what each fork uses)
    for mod in ("torch", "numpy"):
        try:
            __import__(mod)
        except ImportError:
            pass
    # what the imports made stays out of the forks' collections: they neither
    # walk nor touch (copy on write) those pages
    import gc
    gc.collect()
    gc.freeze()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the forks report to their clients
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(64)
    srv.settimeout(2)
    while True:
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            try:
                os.kill(owner, 0)
            except OSError:
                break
            continue
        if os.fork() == 0:
            srv.close()
            try:
                serve_one(conn)
            finally:
                os._exit(1)
        conn.close()
    srv.close()
    os.unlink(path)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(client(sys.argv[1:]))
