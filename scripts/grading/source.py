"""The library-off rule and the tampering rule, read from the answers' source.

At run time the worker makes the forbidden functions raise; a submission can still reach one it
captured first (a default argument, `functools.partial`, an alias, another path to the same
kernel). Here the answer's source is read instead: every name, attribute, import and string in
the exercise's answer cells, the cells that define the graded functions, and the answer cells
that define what those use, against the exercise's forbidden list and its equivalents. Names
the student binds themselves (arguments, variables, their own functions) are theirs. A cell
that cannot be read (after IPython's own rewriting of magics) fails both rules.
"""

import ast
import re

# core name of a forbidden function -> patterns (searched) of names that reach the same thing
EQUIVALENTS = {
    "softmax": [r"(?i)soft_?m(ax|in)"],
    "scaled_dot_product_attention": [
        r"(?i)scaled_dot|sdpa|flash_attention|efficient_attention|flex_attention",
        r"(?i)multi_?head_?attention|_native_multi_head|cudnn_attention",
    ],
    "attend": [r"^attend$", r"^MultiHeadAttention$"],
    "layer_norm": [r"(?i)layer_?norm"],
    "gelu": [r"(?i)gelu"],
    "cross_entropy": [r"(?i)cross_?entropy"],
    "nll_loss": [r"(?i)nll_?loss"],
    "clip_grad_norm_": [r"(?i)clip_grad|get_total_norm"],
    "rearrange": [r"(?i)rearrange|einsum|einmix"],
    "unfold": [r"(?i)unfold|im2col"],
}
DYNAMIC = {  # ways to reach a name the source does not spell
    "eval", "exec", "compile", "__import__", "importlib", "globals", "vars", "locals",
    "__dict__", "__getattribute__", "__getattr__", "__builtins__", "builtins", "getattr",
    "getattr_static", "attrgetter", "methodcaller", "__globals__", "__closure__", "__code__",
    "__reduce__", "__reduce_ex__", "pickle", "marshal", "dill", "cloudpickle", "copyreg",
    "ctypes", "inspect", "getmembers", "gc",
}  # fmt: skip
BACK_DOORS = {"ops", "_C"}  # torch.ops.aten..., torch._C...: the kernels under any name
HOOKS = {
    "input_transformers_post", "input_transformers_cleanup", "register_transformer",
    "events", "ast_transformers",
}  # fmt: skip
MEDDLING = {  # in an answer, these change or reach inside modules: the tampering rule
    "setattr", "delattr", "__setattr__", "__delattr__", "__dict__", "modules", "gc",
    "ctypes", "importlib", "__import__", "builtins", "__builtins__", "reload",
}  # fmt: skip


def patterns(forbidden: str) -> list:
    """(pattern, searched?) for a forbidden function's name and its equivalents."""
    core = forbidden.rsplit(".", 1)[-1]
    if core in EQUIVALENTS:
        return [(re.compile(p), True) for p in EQUIVALENTS[core]]
    return [(re.compile(re.escape(core)), False)]


def _parse(source: str):
    """The cell as Python, after IPython turns its magics (`%xmode`, `!ls`, `x?`) into calls;
    None when even that cannot be read."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        source = TransformerManager().transform_cell(source)
    except Exception:  # IPython missing, or a cell it cannot rewrite: read it as it is
        pass
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError):
        return None


def _bound(tree) -> set:
    """Names the student's code binds: arguments, targets, its own functions and classes."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.MatchAs) and node.name:
            names.add(node.name)
    return names


def defined(source: str) -> set:
    """The names a cell binds at its top level, in any statement (an assignment, a def, a for
    or with target, an import, a walrus): not the locals of its functions."""
    tree = _parse(source)
    if tree is None:
        return set()
    names = set()

    def visit(node):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return  # its body is its own
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.MatchAs) and node.name:
            names.add(node.name)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return names


def used(source: str) -> set:
    tree = _parse(source)
    if tree is None:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def reached(own: list, others: list) -> list:
    """The exercise's cells and, transitively, the other answer cells that define a name they
    use."""
    cells, names = list(own), set().union(*(used(s) for s in own)) if own else set()
    left = list(others)
    changed = True
    while changed:
        changed = False
        for source in list(left):
            if defined(source) & names:
                cells.append(source)
                names |= used(source)
                left.remove(source)
                changed = True
    return cells


def _docstrings(tree) -> set:
    """ids of string constants that are statements of their own (docstrings), parts of
    f-strings or printed: words for people, not names."""
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            skip.add(id(node.value))
        elif isinstance(node, ast.JoinedStr):
            skip |= {id(v) for v in node.values}
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "print"
        ):
            skip |= {id(a) for a in node.args if isinstance(a, ast.Constant)}
    return skip


def _aliases(tree, module: str) -> set:
    """Names the cell binds to `module` (`import sys as s` -> {'s'})."""
    names = {module}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name == module and a.asname}
    return names


def violations(sources: list, forbidden) -> list:
    """Each use of a forbidden function (or an equivalent, a back door to the kernels, or a
    name looked up at run time) in `sources`, as 'line N: `name` (why)'. Empty when nothing
    is forbidden."""
    if not forbidden:
        return []
    rules = [
        (name, p, searched) for name in forbidden for p, searched in patterns(name)
    ]
    found = []
    for cell, source in enumerate(sources):
        where_cell = f" of cell {cell + 1}" if len(sources) > 1 else ""
        tree = _parse(source)
        if tree is None:
            if source.strip():
                found.append(f"cell{where_cell or ' 1'}: it cannot be read as Python")
            continue
        bound, words, sys_names = _bound(tree), _docstrings(tree), _aliases(tree, "sys")

        def flag(node, text, why, where_cell=where_cell):
            line = getattr(node, "lineno", "?")
            found.append(f"line {line}{where_cell}: `{text}` ({why})")

        def matches(word, name, p, searched):
            return bool(p.search(word) if searched else p.fullmatch(word))

        for node in ast.walk(tree):
            spelled = []
            if isinstance(node, ast.Attribute):
                spelled.append(node.attr)
                if node.attr in BACK_DOORS:
                    flag(node, node.attr, "a back door to the library's kernels")
                if node.attr == "modules" and isinstance(node.value, ast.Name):
                    if node.value.id in sys_names:
                        flag(node, "sys.modules", "a name looked up at run time")
            elif isinstance(node, ast.Name) and node.id not in bound:
                spelled.append(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    spelled += alias.name.split(".")
                if isinstance(node, ast.ImportFrom) and node.module:
                    spelled += node.module.split(".")
            elif isinstance(node, ast.MatchClass):
                spelled += node.kwd_attrs
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if id(node) not in words:
                    for name, p, _searched in rules:
                        if p.search(node.value):
                            flag(node, repr(node.value)[:40], f"a string naming {name}")
                            break
            for word in spelled:
                hit = next((n for n, p, s in rules if matches(word, n, p, s)), None)
                if hit is not None:
                    flag(node, word, f"the exercise is to write {hit} yourself")
                elif word in DYNAMIC:
                    flag(node, word, "a name looked up at run time")
    return list(dict.fromkeys(found))


def tampering(source: str) -> list:
    """Lines that change the book's modules, reach inside modules, or hook the shell:
    `checks.x = ...`, `setattr(...)`, `sys.modules`, `gc`, `get_ipython().events...`. A cell
    that cannot be read is tampering too: nothing can be said of it."""
    tree = _parse(source)
    if tree is None:
        return ["it cannot be read as Python"] if source.strip() else []
    roots = {"checks", "vitlib"}
    for node in ast.walk(
        tree
    ):  # import vitlib.checks as vc, from vitlib import checks as c
        if isinstance(node, ast.Import):
            roots |= {
                a.asname for a in node.names if a.asname and a.name.startswith("vitlib")
            }
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "vitlib"
        ):
            roots |= {a.asname or a.name for a in node.names if a.name == "checks"}
    found = []

    def root(node):
        while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
            node = node.func if isinstance(node, ast.Call) else node.value
        return node.id if isinstance(node, ast.Name) else None

    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = getattr(node, "targets", None) or [node.target]
        for t in targets:
            if isinstance(t, (ast.Attribute, ast.Subscript)) and root(t) in roots:
                found.append(f"line {node.lineno}: it changes `{root(t)}`")
        word = None
        if isinstance(node, ast.Attribute):
            word = node.attr
        elif isinstance(node, ast.Name):
            word = node.id
        elif isinstance(node, ast.alias):
            word = node.name.split(".")[0]
        if word in MEDDLING:
            found.append(
                f"line {getattr(node, 'lineno', '?')}: `{word}` reaches inside modules"
            )
        if word in HOOKS:
            found.append(
                f"line {getattr(node, 'lineno', '?')}: it hooks the shell (`{word}`)"
            )
    return list(dict.fromkeys(found))
