"""Drop repeated <script> entries from every page.

Under Jupyter Book 1, sphinx-thebe and sphinx-togglebutton each add their inline script twice,
and the second `const THEBE_JS_URL` throws "already declared" in every reader's console.
"""


def _key(script):
    # An inline script's file name is None from one extension and "" from another: the same.
    name = getattr(script, "filename", script) or ""
    return str(name), tuple(
        sorted((k, str(v)) for k, v in getattr(script, "attributes", {}).items())
    )


def _dedupe(app, pagename, templatename, context, doctree):
    seen, kept = set(), []
    for script in context.get("script_files", []):
        if _key(script) not in seen:
            seen.add(_key(script))
            kept.append(script)
    context["script_files"] = kept


def setup(app):
    app.connect("html-page-context", _dedupe, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
