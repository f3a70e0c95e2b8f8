"""Hide the notebooks' machinery on the site: directive lines in code cells.

A code cell may start with lines for tools, not for readers: nbdev's `#| export` and
`#| default_exp`, and nbval's `# NBVAL_CHECK_OUTPUT`. They stay in the notebooks (Colab, nbdev
and nbval read them) and are dropped from the page. A cell left with no code and no output,
such as `#| default_exp patches`, is dropped whole.
"""

import re

from docutils import nodes

DIRECTIVE = re.compile(r"^\s*(#\|.*|# NBVAL_\w+.*)$")


def strip_directives(code: str) -> str:
    """The code without its directive lines, and without the blank lines they leave on top."""
    kept = [line for line in code.splitlines() if not DIRECTIVE.match(line)]
    return "\n".join(kept).strip("\n")


def _is_code_source(node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == (
        "cell_code_source"
    )


def _clean(app, doctree):
    for source in list(doctree.findall(_is_code_source)):
        for block in list(source.findall(nodes.literal_block)):
            code = strip_directives(block.astext())
            if code == block.astext():
                continue
            # rawsource and text must agree, or Sphinx does not highlight the block
            block.rawsource = code
            block.children = [nodes.Text(code)]
            if not code:
                block.parent.remove(block)
        if not list(source.findall(nodes.literal_block)):
            cell = source.parent
            cell.remove(source)
            if not cell.children:
                cell.parent.remove(cell)


def setup(app):
    app.connect("doctree-read", _clean)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
