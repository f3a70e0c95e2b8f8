"""vitlib.checks as the sandbox shows it: the checks' machinery without the grader's answers.

A worker needs of vitlib.checks only what runs where the student's function runs: the core
(`__init__.py`: the rule that forbids library functions, the verdicts, compare_prediction),
each page's check names (a grade cell's calls are recorded there and judged in the grader)
and the helpers a check runs beside the function (`through(fn, "checkpoint._save_scenario",
...)`). The chapter modules also hold what the checks compare with: the references and the
named mistakes. So the sandbox sees each chapter module written anew, with its check names as
stand-ins and its helpers with the module-level code they use, and nothing else; the whole
package stays in the grader's process, which compares. An answer that imports a reference, or
reads it from the file, finds nothing there.
"""

import ast
import shutil
from pathlib import Path

CHECKS = Path(__file__).resolve().parents[2] / "vitlib" / "checks"

STAND_IN = """

def _in_the_grader(name):
    def check(*args, **kwargs):
        print(f"{name}: in the grader's sandbox the checks run in the grader, not here")

    check.__name__ = check.__qualname__ = name
    return check
"""


def helpers(source: Path = CHECKS) -> dict:
    """{module: {helper names}} for every `through(fn, "module.helper", ...)` in the checks."""
    found = {}
    for path in sorted(source.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            names = [node.func, *node.args]
            if not any(isinstance(n, ast.Name) and n.id == "through" for n in names):
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    module, _, name = arg.value.partition(".")
                    if module.isidentifier() and name.isidentifier():
                        found.setdefault(module, set()).add(name)
    return found


def _kept(tree: ast.Module, wanted: set) -> list:
    """The module's imports, and its top-level definitions that `wanted` uses (transitively)."""
    defined = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined[node.name] = node
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    defined[target.id] = node
    keep, todo = set(), list(wanted)
    while todo:
        name = todo.pop()
        if name in keep or name not in defined:
            continue
        keep.add(name)
        used = {n.id for n in ast.walk(defined[name]) if isinstance(n, ast.Name)}
        todo += sorted(used - keep)
    nodes = {id(defined[name]) for name in keep}
    imports = (ast.Import, ast.ImportFrom)
    return [n for n in tree.body if isinstance(n, imports) or id(n) in nodes]


def chapter_module(path: Path, checks: tuple, kept: set) -> str:
    """A chapter module's public face: its helpers `kept` (with their imports) and a
    stand-in for each of its `checks`."""
    tree = ast.parse(path.read_text())
    body = _kept(tree, kept) if kept else []
    lines = [f'"""The public face of vitlib.checks.{path.stem} (see the grader)."""']
    lines += [ast.unparse(node) for node in body]
    lines.append(STAND_IN)
    lines.append(f"__all__ = {list(checks)!r}")
    lines += [f"{name} = _in_the_grader({name!r})" for name in checks]
    return "\n".join(lines) + "\n"


def write(dest: Path, source: Path = CHECKS) -> Path:
    """vitlib.checks' public face in `dest` (made afresh, readable by every user)."""
    from vitlib.checks import HOMES as homes  # each page's module and its check names

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    dest.chmod(0o755)
    shutil.copyfile(source / "__init__.py", dest / "__init__.py")
    kept = helpers(source)
    for module, checks in homes.items():
        text = chapter_module(source / f"{module}.py", checks, kept.get(module, set()))
        (dest / f"{module}.py").write_text(text)
    for path in dest.iterdir():
        path.chmod(0o644)
    return dest
