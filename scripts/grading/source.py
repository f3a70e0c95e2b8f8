"""The library-off rule, read from the solution's source.

At run time the worker makes the forbidden functions raise; a submission can still reach one
it captured first (a default argument, `functools.partial`, an alias, another path to the same
kernel). Here the answer's source is read instead: every name, attribute, import and string in
the exercise's answer cells, and in the answer cells that define what they use, against the
exercise's forbidden list and its equivalents. Names the student binds themselves (arguments,
variables, their own functions) are theirs.
"""

import ast
import re

# core name of a forbidden function -> patterns of the names that reach the same computation
EQUIVALENTS = {
    "softmax": [r"_*(log_)?softmax\w*", r"softmin", r"_softmax_backward_data"],
    "scaled_dot_product_attention": [r"_*scaled_dot_product\w*", r"\w*flash_attention\w*",
                                     r"_?efficient_attention\w*", r"MultiheadAttention",
                                     r"multi_head_attention_forward"],
    "attend": [r"attend", r"MultiHeadAttention"],
    "layer_norm": [r"_*(native_)?layer_norm\w*", r"LayerNorm"],
    "gelu": [r"_*gelu\w*", r"GELU"],
    "cross_entropy": [r"_*cross_entropy\w*", r"CrossEntropyLoss"],
    "nll_loss": [r"_*nll_loss\w*", r"NLLLoss"],
    "clip_grad_norm_": [r"clip_grad\w*", r"clip_grads_with_norm_", r"get_total_norm"],
    "rearrange": [r"rearrange", r"einsum", r"EinMix", r"Rearrange"],
    "unfold": [r"unfold", r"Unfold", r"im2col"],
    "Distillation": [r"Distillation"],
}  # fmt: skip
DYNAMIC = {  # ways to reach a name the source does not spell
    "eval", "exec", "compile", "__import__", "importlib", "globals", "vars", "locals",
    "__dict__", "__getattribute__", "__getattr__", "__builtins__", "builtins", "getattr",
    "getattr_static", "attrgetter", "methodcaller", "__globals__", "__closure__", "__code__",
    "__reduce__", "__reduce_ex__", "pickle", "marshal", "dill", "cloudpickle", "copyreg",
    "ctypes",
}  # fmt: skip


def patterns(forbidden: str) -> list:
    core = forbidden.rsplit(".", 1)[-1]
    return [re.compile(p) for p in EQUIVALENTS.get(core, [re.escape(core)])]


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
    return names


def _parse(source: str):
    try:
        return ast.parse(source)
    except SyntaxError:
        return None


def defined(source: str) -> set:
    """The top-level names a cell defines."""
    tree = _parse(source)
    if tree is None:
        return set()
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def used(source: str) -> set:
    tree = _parse(source)
    if tree is None:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def reached(own: list, others: list) -> list:
    """The exercise's answer cells and, transitively, the other answer cells that define a
    name they use."""
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


def violations(sources: list, forbidden) -> list:
    """Each use of a forbidden function (or an equivalent, or a dynamic lookup) in `sources`,
    as 'line N: `name`'. Empty when nothing is forbidden."""
    if not forbidden:
        return []
    rules = [(name, p) for name in forbidden for p in patterns(name)]
    found = []
    for cell, source in enumerate(sources):
        tree = _parse(source)
        if tree is None:
            continue
        bound = _bound(tree)

        def flag(node, text, why, cell=cell):
            where = f"line {getattr(node, 'lineno', '?')}" + (
                f" of cell {cell + 1}" if len(sources) > 1 else ""
            )
            found.append(f"{where}: `{text}` ({why})")

        for node in ast.walk(tree):
            spelled = []
            if isinstance(node, ast.Attribute):
                spelled.append(node.attr)
            elif isinstance(node, ast.Name) and node.id not in bound:
                spelled.append(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    spelled += alias.name.split(".")
                if isinstance(node, ast.ImportFrom) and node.module:
                    spelled += node.module.split(".")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                for name, p in rules:
                    if p.search(node.value):
                        flag(node, repr(node.value)[:40], f"a string naming {name}")
                        break
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "modules"
                and isinstance(node.value, ast.Name)
                and node.value.id == "sys"
            ):
                flag(node, "sys.modules", "a name looked up at run time")
            for word in spelled:
                for name, p in rules:
                    if p.fullmatch(word):
                        flag(node, word, f"the exercise is to write {name} yourself")
                        break
                else:
                    if word in DYNAMIC:
                        flag(node, word, "a name looked up at run time")
    return list(dict.fromkeys(found))


def tampering(source: str) -> list:
    """Lines that change the book's modules or the shell's input: `checks.x = ...`,
    `setattr(vitlib...)`, `get_ipython().input_transformers...`."""
    tree = _parse(source)
    if tree is None:
        return []
    roots = {"checks", "vitlib"}
    found = []

    def root(node):
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return node.id if isinstance(node, ast.Name) else None

    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = getattr(node, "targets", None) or [node.target]
        for t in targets:
            if isinstance(t, (ast.Attribute, ast.Subscript)) and root(t) in roots:
                found.append(f"line {node.lineno}: it changes `{root(t)}`")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if (
                node.func.id in ("setattr", "delattr")
                and node.args
                and root(node.args[0]) in roots
            ):
                found.append(
                    f"line {node.lineno}: {node.func.id} on `{root(node.args[0])}`"
                )
        if isinstance(node, ast.Attribute) and node.attr in (
            "input_transformers_post",
            "input_transformers_cleanup",
            "register_transformer",
            "events",
        ):
            found.append(f"line {node.lineno}: it hooks the shell (`{node.attr}`)")
    return found
