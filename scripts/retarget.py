"""Point the book at a repository and branch, such as a course's fork (`make retarget`).

    python scripts/retarget.py --repository https://github.com/OWNER/NAME --branch BRANCH

Rewrites every place that names the book's repository or branch:

- `_config.yml`'s `repository.url` and `repository.branch`, which the site's Colab buttons and
  its "Exercises in Colab" links read (book/sphinx_ext/clean_cells.py);
- the install line of each notebook in notebooks/ and student/, in its first code cell:
  `%pip install -q "vitlib @ git+https://github.com/OWNER/NAME@BRANCH"`, the branch pinned,
  other packages on the line kept; a notebook is rewritten in its own JSON layout, so that a
  diff shows only the lines that changed;
- book/setup.md's `git clone` and `cd` lines, and the Colab link in README.md;
- any other address of the old repository in those files (the old one is `_config.yml`'s).

Standard library only, so that it runs before `make install`. Running it again with the same
arguments changes nothing; running it with the current values pins the branch (`@main`).
"""

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

REPOSITORY = re.compile(
    r"https://github\.com/(?P<owner>[A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))"
    r"/(?P<name>[A-Za-z0-9._-]+?)(?:\.git)?/?"
)
# "vitlib @ git+https://github.com/OWNER/NAME" with or without "@ref", in either quote
INSTALL = re.compile(r"""(?P<q>["'])vitlib @ git\+https://github\.com/[^"'\s]*(?P=q)""")


class Usage(Exception):
    """A wrong argument: the message is the one line the user sees."""


def check_repository(url: str) -> tuple:
    """(url, owner, name) of a GitHub address, without a trailing slash or `.git`."""
    match = REPOSITORY.fullmatch(url.strip())
    if not match or match["name"] in {".", ".."}:
        raise Usage(
            "REPOSITORY must look like https://github.com/OWNER/NAME, because Colab opens "
            f"notebooks only from GitHub addresses of that form (got {url!r})"
        )
    owner, name = match["owner"], match["name"]
    return f"https://github.com/{owner}/{name}", owner, name


def check_branch(branch: str) -> str:
    """A branch name that git, pip's `@BRANCH` and a Colab address all accept."""
    bad = (
        not branch
        or re.search(r"[\s~^:?*\[\\#\"'\x00-\x1f\x7f]", branch)
        or branch.startswith(("-", "/"))
        or branch.endswith(("/", ".", ".lock"))
        or any(part in branch for part in ("..", "//", "@{"))
        or branch == "@"
    )
    if bad:
        raise Usage(
            f"BRANCH must be a git branch name without spaces, such as main (got {branch!r})"
        )
    return branch


def read_config(text: str) -> tuple:
    """(url, branch) of `_config.yml`'s repository block, as written there."""
    block = re.search(r"^repository:[ \t]*\n((?:[ \t]+.*\n?|[ \t]*\n)*)", text, re.M)
    if not block:
        raise SystemExit("retarget: _config.yml has no repository block")
    values = dict(
        re.findall(r"^[ \t]+(url|branch):[ \t]*[\"']?([^\"'\s#]*)", block[1], re.M)
    )
    return values.get("url", ""), values.get("branch", "")


def retarget_config(text: str, url: str, branch: str) -> str:
    block = re.search(r"^repository:[ \t]*\n((?:[ \t]+.*\n?|[ \t]*\n)*)", text, re.M)
    body = block[1]

    def value(key, new):
        nonlocal body
        line = re.compile(rf"^([ \t]+{key}:[ \t]*)([\"']?)[^\"'\s#]*\2", re.M)
        if line.search(body):
            body = line.sub(lambda m: f"{m[1]}{m[2]}{new}{m[2]}", body, count=1)
        else:  # a block without the key: add it with the block's indentation
            indent = re.match(r"[ \t]*", body)[0] or "  "
            content = body.rstrip("\n")
            body = f"{content}\n{indent}{key}: {new}\n" + body[len(content) + 1 :]

    value("url", url)
    value("branch", branch)
    return text[: block.start(1)] + body + text[block.end(1) :]


def rewriter(old: tuple, url: str, branch: str):
    """A function that rewrites every address of the book's repository in a page or a cell's
    line. `old` is _config.yml's (url, branch) before the change; only addresses of that
    repository or of the new one are touched (Colab links and clone lines of other projects
    stay), except vitlib's install line, which always names the new one."""
    old_url, old_branch = old
    names = {u.removeprefix("https://github.com/") for u in (old_url, url) if u}
    known = "|".join(re.escape(n) for n in sorted(names))
    owner_name = url.removeprefix("https://github.com/")
    name = owner_name.split("/")[1]
    # a Colab address of one of the book's notebooks; a branch may hold slashes, so it runs
    # up to the notebooks' folder
    colab = re.compile(
        rf"https://colab\.research\.google\.com/github/(?:{known})/blob/\S+?/"
        r"(?=(?:student|notebooks)/)"
    )
    clone = re.compile(
        rf"git clone(?: (?:--branch|-b) \S+)? https://github\.com/(?:{known})(?:\.git)?"
        r"(?![\w.-])(?P<cd>\n(?P<indent>[ \t]*)cd [\w.-]+)?"
    )
    # links into the old repository's files keep their path and take the new branch; the
    # old address alone (not the start of a longer one, such as OWNER/NAME.more) is the new
    files = re.compile(rf"{re.escape(old_url)}/(blob|tree)/{re.escape(old_branch)}/")
    alone = re.compile(rf"{re.escape(old_url)}(?P<git>\.git)?(?![\w-]|\.\w)")
    moved = bool(old_url) and (old_url, old_branch) != (url, branch)

    def cloned(match):
        cd = f"\n{match['indent']}cd {name}" if match["cd"] else ""
        return f"git clone --branch {branch} {url}{cd}"

    pinned = f"vitlib @ git+{url}@{branch}"
    colab_at = f"https://colab.research.google.com/github/{owner_name}/blob/{branch}/"

    def rewrite(text: str) -> str:
        text = INSTALL.sub(lambda m: m["q"] + pinned + m["q"], text)
        text = colab.sub(lambda m: colab_at, text)
        text = clone.sub(cloned, text)
        if moved:
            text = files.sub(lambda m: f"{url}/{m[1]}/{branch}/", text)
            text = alone.sub(lambda m: url + (m["git"] or ""), text)
        return text

    return rewrite


def first_code_cell(notebook: dict):
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "code" and "".join(cell.get("source", "")).strip():
            return cell
    return None


def retarget_notebook(path: Path, rewrite) -> bool:
    """Rewrites the notebook's cell sources line by line; True when the file changed."""
    original = path.read_text(encoding="utf-8")
    notebook = json.loads(original)
    end = "\n" if original.endswith("\n") else ""
    if json.dumps(notebook, indent=1, ensure_ascii=False) + end != original:
        print(
            f"retarget: {path} is not in nbformat's layout; it is rewritten in it",
            file=sys.stderr,
        )
    first = first_code_cell(notebook)
    if first is None or not INSTALL.search("".join(first["source"])):
        print(
            f"retarget: {path}: the first code cell does not install vitlib",
            file=sys.stderr,
        )
    for cell in notebook.get("cells", []):
        source = cell.get("source")
        if isinstance(source, list):
            cell["source"] = [rewrite(line) for line in source]
        elif isinstance(source, str):
            cell["source"] = rewrite(source)
    text = json.dumps(notebook, indent=1, ensure_ascii=False) + end
    if text == original:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def retarget(root: Path, repository: str, branch: str) -> list:
    """Rewrites the tree under `root`; the paths that changed, relative to it."""
    url, _, _ = check_repository(repository)
    branch = check_branch(branch)
    config = root / "_config.yml"
    config_text = config.read_text(encoding="utf-8")
    old_url, old_branch = read_config(config_text)
    rewrite = rewriter(
        (old_url.rstrip("/").removesuffix(".git"), old_branch), url, branch
    )

    changed = []
    new_config = retarget_config(config_text, url, branch)
    if new_config != config_text:
        config.write_text(new_config, encoding="utf-8")
        changed.append(config)
    pages = [root / "README.md", *sorted((root / "book").glob("*.md"))]
    for page in pages:
        if page.exists():
            text = page.read_text(encoding="utf-8")
            new = rewrite(text)
            if new != text:
                page.write_text(new, encoding="utf-8")
                changed.append(page)
    for folder in ("notebooks", "student"):
        for notebook in sorted((root / folder).glob("*.ipynb")):
            if retarget_notebook(notebook, rewrite):
                changed.append(notebook)
    return [p.relative_to(root) for p in changed]


class Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f"retarget: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(argv=None) -> int:
    parser = Parser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--repository", required=True, help="https://github.com/OWNER/NAME"
    )
    parser.add_argument("--branch", required=True, help="the branch Colab and pip read")
    parser.add_argument("--root", type=Path, default=ROOT, help="the book's folder")
    args = parser.parse_args(argv)
    try:
        changed = retarget(args.root, args.repository, args.branch)
    except Usage as error:
        print(f"retarget: {error}", file=sys.stderr)
        return 2
    url, _, _ = check_repository(args.repository)
    for path in changed:
        print(f"rewrote {path}")
    print(
        f"retarget: {len(changed)} files changed; the book now names {url} at branch "
        f"{args.branch}: commit and push them there"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
