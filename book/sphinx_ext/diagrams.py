"""The book's diagrams on the site.

A notebook carries each of its diagrams as an attachment of the markdown cell that shows it
(`![...](attachment:NAME.svg)`), so that Jupyter and Colab show them. MyST-NB does not read
attachments, so for the site the link is pointed at the same drawing's file,
book/diagrams/NAME.svg (tests/test_diagrams.py checks that the two are equal byte for byte).
"""

import re

ATTACHED = re.compile(r"\(attachment:([\w-]+\.svg)\)")


def _link_files(app, docname, source):
    if docname.startswith("notebooks/"):
        source[0] = ATTACHED.sub(r"(../book/diagrams/\1)", source[0])


def setup(app):
    app.connect("source-read", _link_files)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
