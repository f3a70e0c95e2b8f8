"""The library-off rule and the tampering rule, read from the answers' source.

At run time the worker makes the forbidden functions raise; a submission can still reach one it
captured first (a default argument, `functools.partial`, an alias, another path to the same
kernel). Here the answer's source is read instead: every global name, attribute, import and
string in the exercise's answer cells, and in the statements of earlier answer cells that define
what those use, against the exercise's forbidden list and its equivalents. Parameters and
locals of the student's own functions are theirs. IPython's magics are read through (`%%time`
and `%%capture` run code); a cell with anything else the grader cannot read, a shell command or
`%run` included, fails both rules.

What students write for themselves in Jupyter and Colab is no tampering: help (`x?`), timing,
`%matplotlib`, `%load_ext autoreload` and `%autoreload`, Colab's form comments, and a guarded
`if "google.colab" in sys.modules:`. A package install (`%pip install`, `!pip install`, ...)
is taken out of the cell before anything reads or runs it (`without_habits`), and so is
`%matplotlib`: grading installs and draws nothing; a note says whether the package is there.
"""

import ast
import importlib.util
import re

# core name of a forbidden function -> patterns (searched) of names that reach the same thing
EQUIVALENTS = {
    "softmax": [r"(?i)soft_?m(ax|in)"],
    "scaled_dot_product_attention": [
        r"(?i)scaled_dot|sdpa|flash_attention|efficient_attention|flex_attention",
        r"(?i)multi_?head_?attention|_native_multi_head|cudnn_attention",
    ],
    "attend": [r"^attend$", r"^MultiHeadAttention$"],
    # every normalisation that computes a LayerNorm when its groups are the right size, and
    # F.normalize, which does on centred input
    "layer_norm": [
        r"(?i)(layer|group|instance|batch|rms|local_response)_?norm",
        r"^normalize$",
    ],
    "gelu": [r"(?i)gelu"],
    "cross_entropy": [r"(?i)cross_?entropy"],
    "nll_loss": [r"(?i)nll_?loss"],
    "clip_grad_norm_": [r"(?i)clip_grad|get_total_norm"],
    "rearrange": [r"(?i)rearrange|einsum|einmix"],
    "unfold": [r"(?i)unfold|im2col"],
}
BUILTINS = {
    "eval",
    "exec",
    "compile",
    "__import__",
    "globals",
    "vars",
    "locals",
    "getattr",
}
LOOKUPS = {  # attributes that fetch a name given as data
    "__dict__", "__getattribute__", "__getattr__", "__globals__", "__closure__", "__code__",
    "getattr_static", "attrgetter", "methodcaller", "getmembers", "resolve_name",
    "import_module", "get_field", "ops", "_C", "get_objects", "get_referrers",
    "get_referents",
}  # fmt: skip
MODULES = {  # modules whose point is to reach things by name, or around Python
    "importlib", "pickle", "marshal", "dill", "cloudpickle", "copyreg", "ctypes", "inspect",
    "pkgutil", "builtins", "operator",
}  # fmt: skip
FRAMES = {"_getframe", "currentframe", "f_back", "f_globals", "f_locals", "f_builtins"}
# what the checks watch an answer with: a tracer (6a.3's loop counter), the torch function
# mode stack, audit hooks (6c.2's writes and renames)
WATCHERS = {
    "settrace", "setprofile", "addaudithook", "DisableTorchFunction",
    "DisableTorchFunctionSubclass", "_pop_mode", "_get_current_function_mode_stack",
}  # fmt: skip
HOOKS = {
    "input_transformers_post", "input_transformers_cleanup", "register_transformer",
    "events", "ast_transformers",
}  # fmt: skip
LINE_MAGICS = {"time", "timeit", "prun"}  # their line is Python
CELL_MAGICS = {"time", "timeit", "prun", "capture"}  # their cell is Python
HARMLESS = {  # a student's own habits: help, display, reloading edited files
    "xmode", "matplotlib", "precision", "pprint", "who", "whos", "pdef", "pdoc",
    "pinfo", "pinfo2", "psearch", "autoreload",
}  # fmt: skip
HARMLESS_WITH = {  # magics harmless with these arguments only
    "load_ext": ("autoreload",),
    "config": ("InlineBackend.",),
}
DISPLAY = re.compile(r"^(?P<indent>[ \t]*)%matplotlib\b.*$", re.M)
# a package install, as a line of its own: `%pip install x`, `!pip install -q x`, ...
INSTALL = re.compile(
    r"^(?P<indent>[ \t]*)[%!][ \t]*(?:(?:python3?[ \t]+-m[ \t]+)?pip3?|conda|mamba|uv[ \t]+pip)"
    r"[ \t]+install\b(?P<args>.*)$",
    re.M,
)


class Unreadable(Exception):
    pass


def patterns(forbidden: str) -> list:
    """(pattern, searched?) for a forbidden function's name and its equivalents."""
    core = forbidden.rsplit(".", 1)[-1]
    if core in EQUIVALENTS:
        return [(re.compile(p), True) for p in EQUIVALENTS[core]]
    return [(re.compile(re.escape(core)), False)]


def _python(text: str):
    """Plain Python, after IPython's rewriting of magics; raises Unreadable."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        text = TransformerManager().transform_cell(text)
    except ImportError:
        pass
    except Exception:  # a cell IPython itself cannot rewrite
        raise Unreadable from None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        raise Unreadable from None


def _magic_code(call) -> str | None:
    """The Python a magic runs (`%time x = 1` -> 'x = 1'), '' for a harmless magic; Unreadable
    for one that runs what the grader cannot read (a shell command, %run, %%writefile)."""
    how = call.func.attr
    args = [a.value if isinstance(a, ast.Constant) else None for a in call.args]
    if how in ("system", "getoutput") or not args or not isinstance(args[0], str):
        raise Unreadable
    name = args[0]
    if name in HARMLESS:
        return ""
    given = args[1] if len(args) > 1 and isinstance(args[1], str) else None
    if how == "run_line_magic" and given is not None and name in HARMLESS_WITH:
        if given.strip().startswith(HARMLESS_WITH[name]):
            return ""
    if how == "run_line_magic" and name in LINE_MAGICS and isinstance(args[1], str):
        words = args[1].split()
        while words and words[0].startswith("-"):  # %timeit -n 10 -r 3 code
            words = words[2:] if words[0] in ("-n", "-r", "-o") else words[1:]
        return " ".join(words)
    if how == "run_cell_magic" and name in CELL_MAGICS and len(args) > 2:
        return args[2]
    raise Unreadable


def parse(source: str, depth: int = 0):
    """The cell as a Python tree, the code inside its magics included; None when unreadable."""
    try:
        tree = _python(source)
        for node in list(ast.walk(tree)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr
                in ("run_line_magic", "run_cell_magic", "system", "getoutput")
            ):
                code = _magic_code(node)
                if code and depth < 3:
                    inner = parse(code, depth + 1)
                    if inner is None:
                        return None
                    tree.body += inner.body
    except Unreadable:
        return None
    return tree


def without_habits(source: str) -> tuple:
    """(the cell as the grader runs it, a note for each line taken out). A package install
    becomes `pass`: grading installs nothing (the sandbox has no network), and the note says
    whether the package is there anyway (an answer that imports a missing one fails).
    `%matplotlib` becomes `pass` too: the grader's shell draws nothing, and has no GUI
    loop for the magic to start."""
    notes = []
    source = DISPLAY.sub(lambda m: m["indent"] + "pass", source)

    def skip(match):
        line = " ".join(match.group(0).split())
        packages = [w for w in match["args"].split() if not w.startswith("-")]
        names = [re.split(r"[<>=!~\[;@ ]", p)[0] for p in packages if p[:1].isalpha()]
        there = [n for n in names if _importable(n)]
        missing = [n for n in names if n not in there]
        said = []
        if there:
            said.append(f"{', '.join(there)} is there")
        if missing:
            said.append(
                f"{', '.join(missing)} is not, and an answer that imports it fails"
            )
        what = "; ".join(said) or "it names no package"
        notes.append(f"`{line}` was not run: grading installs nothing ({what})")
        return match["indent"] + "pass"

    return INSTALL.sub(skip, source), notes


def _importable(package: str) -> bool:
    """Whether a package of that name (its import name: dashes become underscores) imports."""
    module = package.replace("-", "_").lower()
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _membership_tests(tree) -> set:
    """The ids of the nodes that stand right of `in` / `not in`: `"google.colab" in
    sys.modules` asks what is loaded; it reaches into nothing."""
    return {
        id(right)
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare)
        and all(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
        for right in node.comparators
    }


class _Scopes(ast.NodeVisitor):
    """Which name loads are global: not a parameter or local of an enclosing function, nor a
    comprehension's variable. Defaults and decorators belong to the enclosing scope."""

    def __init__(self):
        self.stack, self.free = [], []

    @staticmethod
    def _stored(body) -> set:
        names = set()
        for stmt in body:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
                elif isinstance(
                    node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
                ):
                    names.add(node.name)
                elif isinstance(node, ast.alias):
                    names.add((node.asname or node.name).split(".")[0])
                elif isinstance(node, ast.arg):
                    names.add(node.arg)
        globals_ = {
            n
            for s in body
            for g in ast.walk(s)
            if isinstance(g, ast.Global)
            for n in g.names
        }
        return names - globals_

    def _function(self, node, body):
        for outer in [*node.args.defaults, *node.args.kw_defaults,
                      *getattr(node, "decorator_list", [])]:  # fmt: skip
            if outer is not None:
                self.visit(outer)
        params = {a.arg for a in [*node.args.posonlyargs, *node.args.args,
                                  *node.args.kwonlyargs, node.args.vararg, node.args.kwarg] if a}  # fmt: skip
        self.stack.append(
            params | self._stored(body if isinstance(body, list) else [body])
        )
        for stmt in body if isinstance(body, list) else [body]:
            self.visit(stmt)
        self.stack.pop()

    def visit_FunctionDef(self, node):
        self._function(node, node.body)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Lambda(self, node):
        self._function(node, node.body)

    def visit_ClassDef(self, node):
        for outer in [*node.bases, *node.decorator_list]:
            self.visit(outer)
        self.stack.append(self._stored(node.body))
        for stmt in node.body:
            self.visit(stmt)
        self.stack.pop()

    def _comprehension(self, node):
        self.visit(node.generators[0].iter)
        self.stack.append({n.id for g in node.generators for n in ast.walk(g.target)
                           if isinstance(n, ast.Name)})  # fmt: skip
        for g in node.generators:
            for part in [
                g.target,
                *g.ifs,
                *([g.iter] if g is not node.generators[0] else []),
            ]:
                self.visit(part)
        for part in ("elt", "key", "value"):
            if hasattr(node, part):
                self.visit(getattr(node, part))
        self.stack.pop()

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = (
        _comprehension
    )

    def visit_Name(self, node):
        if isinstance(node.ctx, ast.Load) and not any(node.id in s for s in self.stack):
            self.free.append(node)


def free_loads(tree) -> list:
    scopes = _Scopes()
    scopes.visit(tree)
    return scopes.free


def _own_defs(tree) -> set:
    """The functions and classes the cell defines at its top level."""
    return {
        n.name for n in tree.body
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }  # fmt: skip


def _binds(stmt) -> set:
    """The global names a top-level statement binds: a def, an assignment, a for or with
    target, a walrus, `from x import y`; not `import module`."""
    names = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, ast.MatchAs) and node.name:
            names.add(node.name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(stmt)
    return names


def defined(source: str) -> set:
    tree = parse(source)
    return set().union(*(_binds(s) for s in tree.body)) if tree else set()


def reached(own: list, others: list) -> list:
    """The exercise's cells and the statements of the other (earlier) answer cells that
    define a global they use, followed through what those use in turn."""
    trees = [t for t in (parse(s) for s in own) if t is not None]
    needed = {n.id for t in trees for n in free_loads(t)}
    statements = []
    for source in others:
        tree = parse(source)
        if tree is None:
            statements.append((None, source))  # unreadable: scanned whole, and it fails
            continue
        statements += [(stmt, None) for stmt in tree.body]
    taken, changed = [], True
    while changed:
        changed = False
        for item in list(statements):
            stmt, raw = item
            if raw is not None or _binds(stmt) & needed:
                taken.append(raw if raw is not None else ast.unparse(stmt))
                if stmt is not None:
                    needed |= {n.id for n in free_loads(ast.Module([stmt], []))}
                statements.remove(item)
                changed = True
    return list(own) + taken


def _strings(tree):
    """(node, text) of the strings a lookup is given: a subscript's key (`F.__dict__['...']`)
    or an argument of getattr, resolve_name and their kind, sums and f-strings joined. Words in
    messages, labels and prints are not names."""

    def text(node):
        parts = [
            n.value
            for n in ast.walk(node)
            if isinstance(n, ast.Constant) and isinstance(n.value, str)
        ]
        return "".join(parts)

    for node in ast.walk(tree):
        given = []
        if isinstance(node, ast.Subscript):
            given = [node.slice]
        elif isinstance(node, ast.Call):
            func = node.func
            name = (
                func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            )
            if name in BUILTINS or name in LOOKUPS:
                given = [*node.args, *(k.value for k in node.keywords)]
        for part in given:
            joined = text(part)
            if joined:
                yield part, joined


def _aliases(tree, module: str) -> set:
    names = {module}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name == module and a.asname}
    return names


OWN_LOOKUPS = {"__dict__", "__getattribute__", "__getattr__"}


def _root_is_local(node, free: set) -> bool:
    """True when an attribute chain starts at a parameter or local (the student's object)."""
    while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
        node = node.func if isinstance(node, ast.Call) else node.value
    return isinstance(node, ast.Name) and id(node) not in free


def violations(sources: list, forbidden) -> list:
    """Each use of a forbidden function (or an equivalent, a back door to the kernels, or a
    name looked up at run time) in `sources`, as 'line N: `name` (why)'. Empty when nothing
    is forbidden."""
    if not forbidden:
        return []
    rules = [
        (name, p, searched) for name in forbidden for p, searched in patterns(name)
    ]

    def rule_for(word):
        return next(
            (n for n, p, s in rules if (p.search(word) if s else p.fullmatch(word))),
            None,
        )

    found = []
    for cell, source in enumerate(sources):
        where_cell = f" of part {cell + 1}" if len(sources) > 1 else ""
        tree = parse(source)
        if tree is None:
            if source.strip():
                found.append(
                    f"part {cell + 1}: it cannot be read as Python (a shell command, %run, ...)"
                )
            continue

        def flag(node, text, why, where_cell=where_cell):
            found.append(
                f"line {getattr(node, 'lineno', '?')}{where_cell}: `{text}` ({why})"
            )

        own, sys_names = _own_defs(tree), _aliases(tree, "sys")
        asked = _membership_tests(tree)
        free = {id(n) for n in free_loads(tree)}
        for node in free_loads(tree):
            if node.id in own:
                continue
            hit = rule_for(node.id)
            if hit:
                flag(node, node.id, f"the exercise is to write {hit} yourself")
            elif node.id in BUILTINS or node.id in MODULES:
                flag(node, node.id, "a name looked up at run time")
        for node in ast.walk(tree):
            words = []
            if isinstance(node, ast.Attribute):
                words = [node.attr]
                if (
                    node.attr == "modules"
                    and isinstance(node.value, ast.Name)
                    and node.value.id in sys_names
                    and id(node) not in asked
                ):
                    flag(node, "sys.modules", "a name looked up at run time")
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    if alias.name == "*":
                        flag(node, "import *", "names the source does not spell")
                    words += alias.name.split(".")
                if isinstance(node, ast.ImportFrom) and node.module:
                    words += node.module.split(".")
            elif isinstance(node, ast.MatchClass):
                words = list(node.kwd_attrs)
            for word in words:
                hit = rule_for(word)
                if hit:
                    flag(node, word, f"the exercise is to write {hit} yourself")
                elif word in OWN_LOOKUPS and _root_is_local(node, free):
                    continue  # config.__dict__ of the student's own object
                elif word in LOOKUPS or word in MODULES:
                    flag(node, word, "a name looked up at run time")
        for node, text in _strings(tree):
            hit = next((n for n, p, _ in rules if p.search(text)), None)
            if hit:
                flag(node, repr(text)[:40], f"a string naming {hit}")
    return list(dict.fromkeys(found))


def tampering(source: str) -> list:
    """Lines that change the book's modules or objects the answer did not create, reach
    inside modules or frames, or hook the shell. A cell that cannot be read is tampering too."""
    tree = parse(source)
    if tree is None:
        return (
            ["it runs code the grader cannot read (a shell command, %run, ...)"]
            if source.strip()
            else []
        )
    roots = {"checks", "vitlib"}

    def root(node):
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call, ast.Starred)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return node.id if isinstance(node, ast.Name) else None

    changed = True
    while (
        changed
    ):  # aliases: import vitlib.checks as vc, c = checks, f = checks.forbidden
        changed = False
        for node in ast.walk(tree):
            new = set()
            if isinstance(node, ast.Import):
                new = {
                    a.asname
                    for a in node.names
                    if a.asname and a.name.startswith("vitlib")
                }
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "vitlib"
            ):
                new = {
                    a.asname or a.name
                    for a in node.names
                    if a.name == "checks" or (node.module or "").endswith("checks")
                }
            elif (
                isinstance(node, (ast.Assign, ast.NamedExpr))
                and root(node.value) in roots
            ):
                targets = (
                    node.targets if isinstance(node, ast.Assign) else [node.target]
                )
                new = {
                    n.id
                    for t in targets
                    for n in ast.walk(t)
                    if isinstance(n, ast.Name)
                }
            if new - roots:
                roots |= new
                changed = True
    bound = {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }
    bound |= {n.arg for n in ast.walk(tree) if isinstance(n, ast.arg)}
    bound |= {
        n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))
    }
    hooked = any(
        isinstance(n, ast.Name) and n.id == "get_ipython" for n in ast.walk(tree)
    )
    asked = _membership_tests(tree)
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", "?")
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = getattr(node, "targets", None) or [node.target]
        for t in targets:
            if isinstance(t, (ast.Attribute, ast.Subscript)):
                name = root(t)
                if name in roots:
                    found.append(f"line {line}: it changes `{name}`")
                elif name is not None and name not in bound:
                    found.append(
                        f"line {line}: it changes `{name}`, which the answer did not create"
                    )
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("setattr", "delattr") and node.args:
                name = root(node.args[0])
                if name is None or name in roots or name not in bound:
                    found.append(
                        f"line {line}: {node.func.id} on something the answer did not create"
                    )
            if node.func.id in ("exec", "eval", "compile", "__import__"):
                found.append(
                    f"line {line}: `{node.func.id}` runs code the grader cannot read"
                )
        words = []
        if isinstance(node, ast.Attribute):
            words = [node.attr]
            if node.attr in ("__dict__", "__code__", "__globals__") and root(
                node
            ) in roots | {None}:
                found.append(f"line {line}: `{node.attr}` reaches inside a module")
            if (
                node.attr == "modules"
                and root(node) in _aliases(tree, "sys")
                and id(node) not in asked
            ):
                found.append(f"line {line}: `sys.modules` reaches inside modules")
        elif isinstance(node, ast.alias):
            words = node.name.split(".")[:1]
        for word in words:
            if word in FRAMES or word in ("get_objects", "get_referrers", "get_referents",
                                          "reload", "import_module", "resolve_name"):  # fmt: skip
                found.append(f"line {line}: `{word}` reaches inside modules or frames")
            if word in ("ctypes", "pkgutil", "importlib", "builtins", "__builtins__"):
                found.append(f"line {line}: `{word}` reaches around Python")
            if word in WATCHERS:
                found.append(f"line {line}: `{word}` turns off what the checks watch")
            if word in HOOKS and hooked:
                found.append(f"line {line}: it hooks the shell (`{word}`)")
    return list(dict.fromkeys(found))


PUBLIC_CHECK = re.compile(r"^(check_\w+|compare_prediction)$")


def _chain(node) -> list:
    """`a.b.c` -> ["a", "b", "c"]; [] for a chain that does not start at a name."""
    names = []
    while isinstance(node, ast.Attribute):
        names.insert(0, node.attr)
        node = node.value
    return [node.id, *names] if isinstance(node, ast.Name) else []


def copies(sources: list) -> list:
    """Each place where an answer reaches into `vitlib.checks` for more than a check to call:
    its chapter modules hold the grader's own answers (the references the checks compare
    with), so an answer built on them is a copy, as 'line N: `name`'."""
    found = []
    for part, source in enumerate(sources):
        tree = parse(source)
        if tree is None:
            continue  # unreadable: the tampering rule answers for it
        where = f" of part {part + 1}" if len(sources) > 1 else ""
        checks, library = {"checks"}, {"vitlib"}  # the book's cells import `checks`
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "vitlib":
                checks |= {a.asname or a.name for a in node.names if a.name == "checks"}
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "vitlib.checks" and a.asname:
                        checks.add(a.asname)
                    elif a.name == "vitlib" and a.asname:
                        library.add(a.asname)

        def flag(node, text, where=where):
            found.append(f"line {getattr(node, 'lineno', '?')}{where}: `{text}`")

        # a chain is read once, whole: not again from each of its inner links
        inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}

        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "vitlib.checks"
            ):
                for a in node.names:
                    if node.module != "vitlib.checks" or not PUBLIC_CHECK.match(a.name):
                        flag(node, f"from {node.module} import {a.name}")
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("vitlib.checks."):
                        flag(node, f"import {a.name}")
            elif isinstance(node, ast.Attribute) and id(node) not in inner:
                chain = _chain(node)
                if chain[:1] and chain[0] in library and chain[1:2] == ["checks"]:
                    chain = chain[1:]
                if chain[:1] and chain[0] in checks and len(chain) > 1:
                    if not PUBLIC_CHECK.match(chain[1]):
                        flag(node, ".".join(chain))
            elif isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
                "getattr",
                "vars",
                "dir",
            ):
                target = _chain(node.args[0]) if node.args else []
                if target[:1] and (target[0] in checks or target[1:2] == ["checks"]):
                    flag(node, f"{node.func.id}({'.'.join(target)}, ...)")
    return list(dict.fromkeys(found))
