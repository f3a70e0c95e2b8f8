"""`make retarget` points the book at another repository and branch (a course's fork): no
address of the old one is left, every notebook installs vitlib from the new one at its branch,
other packages on the install line stay, and the site's Colab links follow _config.yml."""

import json
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml
from repo_files import load_module

from conftest import need_module

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "retarget.py"
OLD = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]
NEW_URL = "https://github.com/course-org/vit-course-2026"
NEW_BRANCH = "spring/2026"  # a course's branch, with a slash in its name
NEW_SPEC = f'"vitlib @ git+{NEW_URL}@{NEW_BRANCH}"'
EXTRA = ' "timm>=1.0.9"'  # a package a page may add to its install line
FOLDERS = ("notebooks", "student")

clean_cells = load_module("book/sphinx_ext/clean_cells.py")


def tree_files() -> list:
    """The book's files as a clone has them (untracked ones too, not the ignored ones)."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout.decode()
        names = [name for name in listed.split("\0") if name]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout
        names = ["_config.yml", "_toc.yml", "README.md", "Makefile"]
        names += [str(p.relative_to(ROOT)) for p in (ROOT / "book").glob("*.md")]
        names += [
            str(p.relative_to(ROOT))
            for f in FOLDERS
            for p in (ROOT / f).glob("*.ipynb")
        ]
    return [name for name in names if (ROOT / name).is_file()]


def copy_tree(dest: Path, names) -> Path:
    for name in names:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / name, dest / name)
    return dest


def notebooks(root: Path) -> list:
    return [p for f in FOLDERS for p in sorted((root / f).glob("*.ipynb"))]


def first_code_cell(path: Path) -> str:
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if cell["cell_type"] == "code" and "".join(cell["source"]).strip():
            return "".join(cell["source"])
    raise AssertionError(f"{path.name} has no code cell")


def install_line(path: Path) -> str:
    lines = [
        line for line in first_code_cell(path).splitlines() if "%pip install" in line
    ]
    assert len(lines) == 1, f"{path.name}: no single %pip line in the first code cell"
    return lines[0]


def run(root: Path, repository: str, branch: str):
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--root", str(root)]
        + [f"--repository={repository}", f"--branch={branch}"],
        capture_output=True,
        text=True,
    )


def add_package(path: Path) -> None:
    """Appends EXTRA to the notebook's install line, in the notebook's own JSON layout."""
    book = json.loads(path.read_text(encoding="utf-8"))
    cell = next(c for c in book["cells"] if c["cell_type"] == "code")
    at = next(i for i, line in enumerate(cell["source"]) if "%pip install" in line)
    end = "\n" if cell["source"][at].endswith("\n") else ""
    cell["source"][at] = cell["source"][at].rstrip("\n") + EXTRA + end
    path.write_text(
        json.dumps(book, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
    )


@pytest.fixture(scope="module")
def retargeted(tmp_path_factory):
    """A copy of the book, retargeted to NEW_URL at NEW_BRANCH: (root, files before, result)."""
    root = copy_tree(tmp_path_factory.mktemp("book"), tree_files())
    add_package(root / "student" / "01_patches.ipynb")
    with (root / "README.md").open("a") as readme:  # addresses a page may add later
        readme.write(
            f"\n[patches.py]({OLD['url']}/blob/{OLD['branch']}/vitlib/patches.py), {OLD['url']}.\n"
        )
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    result = run(root, NEW_URL, NEW_BRANCH)
    assert result.returncode == 0, result.stderr
    return root, before, result


def test_no_address_of_the_old_repository_is_left(retargeted):
    root, _, _ = retargeted
    old = urlparse(OLD["url"]).path.strip("/")  # OWNER/NAME
    assert old != urlparse(NEW_URL).path.strip("/")
    left = [
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and old.encode() in p.read_bytes()
    ]
    assert not left, f"{old} is still named in {left}"
    for path in notebooks(root):
        for line in first_code_cell(path).splitlines():
            if "vitlib @ git+" in line:
                assert f'@{OLD["branch"]}"' not in line or OLD["branch"] == NEW_BRANCH
                assert NEW_SPEC in line, f"{path.name}: {line.strip()}"


def test_every_first_cell_installs_from_the_new_repository_at_its_branch(retargeted):
    root, _, _ = retargeted
    found = notebooks(root)
    assert {p.parent.name for p in found} == set(FOLDERS)
    for path in found:
        first = first_code_cell(path)
        assert 'if "google.colab" in sys.modules:' in first, path.name
        assert f"%pip install -q {NEW_SPEC}" in first, f"{path.name}: {first}"


def test_only_the_install_lines_change(retargeted):
    root, before, _ = retargeted
    for path in notebooks(root):
        old = before[path].decode("utf-8").split("\n")
        new = path.read_text(encoding="utf-8").split("\n")
        assert len(old) == len(new), f"{path.name}: lines added or removed"
        changed = [(a, b) for a, b in zip(old, new) if a != b]
        assert changed, f"{path.name} was not rewritten"
        assert all("vitlib @ git+" in b for _, b in changed), (
            f"{path.name}: a line other than the install line changed: {changed[:2]}"
        )


def test_other_packages_on_the_install_line_stay(retargeted):
    root, before, _ = retargeted
    extra = install_line(root / "student" / "01_patches.ipynb")
    assert extra.endswith(NEW_SPEC + EXTRA), extra
    for path in notebooks(root):
        old_book = json.loads(before[path])
        old_first = next(
            "".join(c["source"]) for c in old_book["cells"] if c["cell_type"] == "code"
        )
        old_line = next(x for x in old_first.splitlines() if "%pip install" in x)
        old_rest = old_line.split("vitlib @ git+")[1].split('"', 1)[1]
        assert install_line(path).split(NEW_SPEC)[1] == old_rest, path.name


def test_the_config_and_the_pages_name_the_new_repository(retargeted):
    root, before, _ = retargeted
    config = yaml.safe_load((root / "_config.yml").read_text())
    assert config["repository"] == {"url": NEW_URL, "branch": NEW_BRANCH}
    old_config = yaml.safe_load(before[root / "_config.yml"])
    assert {k: v for k, v in config.items() if k != "repository"} == {
        k: v for k, v in old_config.items() if k != "repository"
    }
    setup = (root / "book" / "setup.md").read_text()
    assert f"git clone --branch {NEW_BRANCH} {NEW_URL}\ncd vit-course-2026\n" in setup
    colab = "https://colab.research.google.com/github/course-org/vit-course-2026"
    readme = (root / "README.md").read_text()
    assert f"{colab}/blob/{NEW_BRANCH}/student/01_patches.ipynb" in readme
    assert (
        f"[patches.py]({NEW_URL}/blob/{NEW_BRANCH}/vitlib/patches.py), {NEW_URL}."
        in readme
    )


def test_the_sites_colab_links_follow_the_config(retargeted):
    """The theme options Jupyter Book makes of _config.yml, given to clean_cells' link builder."""
    config = need_module("jupyter_book.config")
    root, _, _ = retargeted
    sphinx = config.yaml_to_sphinx(yaml.safe_load((root / "_config.yml").read_text()))[
        0
    ]

    class App:
        srcdir = str(root)

        class config:  # noqa: N801 (Sphinx's attribute name)
            html_theme_options = sphinx["html_theme_options"]

    assert clean_cells.colab_link(App(), "notebooks/01_patches") == (
        "https://colab.research.google.com/github/course-org/vit-course-2026"
        f"/blob/{NEW_BRANCH}/student/01_patches.ipynb"
    )


def test_running_again_changes_nothing(retargeted):
    root, _, _ = retargeted
    now = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    again = run(root, NEW_URL, NEW_BRANCH)
    assert again.returncode == 0, again.stderr
    assert "0 files changed" in again.stdout
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == now


TOUCHED = ["_config.yml", "README.md", "Makefile", "scripts/retarget.py"]


@pytest.fixture
def small(tmp_path):
    """The files retarget reads and writes, as in the book today."""
    names = TOUCHED + [
        str(p.relative_to(ROOT))
        for p in [*(ROOT / "book").glob("*.md"), *notebooks(ROOT)]
    ]
    return copy_tree(tmp_path, names)


def test_the_current_values_pin_the_branch(small):
    config = (small / "_config.yml").read_bytes()
    result = run(small, OLD["url"], OLD["branch"])
    assert result.returncode == 0, result.stderr
    assert (small / "_config.yml").read_bytes() == config
    pinned = f'"vitlib @ git+{OLD["url"]}@{OLD["branch"]}"'
    for path in notebooks(small):
        assert pinned in install_line(path), path.name


@pytest.mark.parametrize(
    "repository, branch, named",
    [
        ("https://gitlab.com/owner/name", "main", "REPOSITORY"),
        ("github.com/owner/name", "main", "REPOSITORY"),
        ("https://github.com/owner", "main", "REPOSITORY"),
        ("https://github.com/owner/name/tree/main", "main", "REPOSITORY"),
        ("", "main", "REPOSITORY"),
        (NEW_URL, "", "BRANCH"),
        (NEW_URL, "two words", "BRANCH"),
        (NEW_URL, "-rf", "BRANCH"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(small, repository, branch, named):
    before = {p: p.read_bytes() for p in small.rglob("*") if p.is_file()}
    result = run(small, repository, branch)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stderr.startswith(f"retarget: {named} must")
    if named == "REPOSITORY":
        assert "https://github.com/OWNER/NAME" in result.stderr
    assert {p: p.read_bytes() for p in small.rglob("*") if p.is_file()} == before


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_the_make_target(small):
    make = [
        "make",
        "--no-print-directory",
        "-C",
        str(small),
        f"PYTHON={sys.executable}",
    ]
    missing = subprocess.run(make + ["retarget"], capture_output=True, text=True)
    assert missing.returncode != 0
    assert "retarget: REPOSITORY must" in missing.stderr
    done = subprocess.run(
        make + ["retarget", f"REPOSITORY={NEW_URL}", f"BRANCH={NEW_BRANCH}"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    for path in notebooks(small):
        assert NEW_SPEC in install_line(path), path.name
