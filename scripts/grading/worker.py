"""A submission's worker: runs in the sandbox, as the grader asks, one message at a time.

    python worker.py FD_IN FD_OUT LIMITS_JSON

It runs the notebook's cells in an IPython shell (the book's own cells and the student's answer
cells, in page order) and calls the student's functions on inputs the grader sends. It never
judges anything: the grader compares what comes back with the book's references, in its own
process. What the submission changes here (the environment, the checks module, torch itself)
changes only what this worker answers.
"""

import importlib.util
import json
import os
import pickle
import resource
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import wire  # noqa: E402

LIMITS = {  # resource: the limit's key
    resource.RLIMIT_AS: "address_space",
    resource.RLIMIT_NPROC: "processes",
    resource.RLIMIT_CPU: "cpu_seconds",
    resource.RLIMIT_FSIZE: "file_size",
    resource.RLIMIT_CORE: "core",
    resource.RLIMIT_NOFILE: "open_files",
}


def limit(limits: dict):
    """Soft and hard limits both: an unprivileged process cannot raise them again."""
    for kind, key in LIMITS.items():
        if limits.get(key) is not None:
            value = int(limits[key])
            resource.setrlimit(kind, (value, value))


def private_checks(checks):
    """A private copy of the package vitlib.checks as the sandbox shows it (its public face:
    no references, see public_checks.py), for the work done here (forbidden functions,
    in-place helpers). It is registered in sys.modules
    only while it loads, so that its modules import each other; the answers can reach
    vitlib.checks by name, not this copy."""
    name = "vitlib._grading"
    spec = importlib.util.spec_from_file_location(
        name, checks.__file__, submodule_search_locations=list(checks.__path__)
    )
    private = importlib.util.module_from_spec(spec)
    sys.modules[name] = private
    try:
        spec.loader.exec_module(private)
        for module in private.HOMES:
            private.chapter(module)
    finally:
        for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[loaded]
    return private


def main():
    fd_in, fd_out = int(sys.argv[1]), int(sys.argv[2])
    limit(json.loads(sys.argv[3]))
    for fd in (fd_in, fd_out):
        os.set_inheritable(fd, False)  # not passed on to anything the submission starts
    from IPython.core.interactiveshell import InteractiveShell

    import vitlib.checks as checks

    private = private_checks(checks)

    shell = InteractiveShell.instance()
    shell.display_formatter.active_types = ["text/plain"]
    recorded = []

    def recorder(name):
        def record(*args, **kwargs):
            recorded.append((name, args, kwargs))
            return True

        return record

    graded = [
        n for n in dir(checks) if n.startswith("check_") or n == "compare_prediction"
    ]
    originals = {n: getattr(checks, n) for n in graded}
    send = lambda tree: wire.write_frame(fd_out, wire.dumps(tree))  # noqa: E731
    send({"ready": True})
    while True:
        try:
            message = pickle.loads(wire.read_frame(fd_in, limit=1 << 30))
        except EOFError:
            return
        op = message["op"]
        if op == "run":
            recorded.clear()
            if message.get("grade"):  # the book's grade cell: its checks only record
                for n in graded:
                    setattr(checks, n, recorder(n))
            try:
                result = shell.run_cell(message["source"], store_history=False)
            finally:
                for n, f in originals.items():
                    setattr(checks, n, f)
            error = result.error_in_exec or result.error_before_exec
            answer = {"ok": error is None}
            if error is not None:
                answer["error"] = wire.encode_error(error)
            if message.get("grade"):
                predictions = [
                    {"title": args[0], "actual": wire.encode(args[2]),
                     "hint": kwargs.get("hint", args[3] if len(args) > 3 else "")}
                    for name, args, kwargs in recorded
                    if name == "compare_prediction" and len(args) >= 3
                ]  # fmt: skip
                answer["predictions"] = predictions
            send(answer)
        elif op == "call":
            fn = shell.user_ns.get(message["name"], _Missing(message["name"]))
            helper = (
                private.helper(message["helper"]) if message.get("helper") else None
            )
            try:
                with private.forbidden(fn, *message.get("forbid", ())):
                    if helper is not None:
                        value = helper(fn, *message["args"])
                    elif callable(fn):
                        value = fn(*message["args"])
                    elif not message["args"]:
                        value = fn  # a plain answer: a pattern, a number
                    else:
                        raise TypeError(f"{message['name']} is not a function")
                    # encoded while the library is still off: a value that computes
                    # when it is read computes under the same rule
                    answer = {"value": wire.encode(value)}
            except BaseException as error:  # the student's code may raise anything
                answer = {"error": wire.encode_error(error)}
            sys.stdout.flush()
            send(answer)
        elif op == "bye":
            return


class _Missing:
    def __init__(self, name):
        self.name = name

    def __call__(self, *args):
        raise NameError(
            f"name {self.name!r} is not defined: run the cell that defines it"
        )


if __name__ == "__main__":
    main()
