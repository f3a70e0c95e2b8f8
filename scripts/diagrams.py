"""The book's diagrams, each drawn by a function in this file.

`make diagrams` writes book/diagrams/NAME.svg for every diagram, then puts each into the
markdown cell that shows it, as an attachment of that cell: a notebook carries its pictures,
so the site, Jupyter and Colab show the same ones. A cell shows a diagram with
`![alt text](attachment:NAME.svg)`; the intro, a markdown page, links the file itself.

One style for all: the palette below (a colour per kind of thing, the same on every page),
DejaVu Sans drawn as outlines (every reader sees the same letters), and a white card behind
each drawing, so that it reads in the site's dark theme too. The files are reproducible:
the same source gives the same bytes (tests/test_diagrams.py checks it).

    python scripts/diagrams.py            # write the files and the attachments
    python scripts/diagrams.py --out DIR  # only write the files, into DIR
"""

import argparse
import base64
import json
import re
import sys
from pathlib import Path

import matplotlib

matplotlib.use("svg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "diagrams"

# one colour per kind of thing, on every diagram
COLOURS = {
    "patch": "#4C78A8",  # pixels, patches and patch tokens
    "cls": "#F58518",  # learned tokens: class, distillation (chapter 9), mask (chapter 10)
    "pos": "#54A24B",  # positions
    "attn": "#B279A2",  # attention: queries, keys, values, weights
    "mlp": "#439894",  # the MLP and other layers
    "norm": "#8C8C8C",  # LayerNorm, dropout, plain operations
    "head": "#E45756",  # the head, the loss, the answer
    "ink": "#222222",  # text and arrows
    "card": "#FFFFFF",
}
STYLE = {
    "font.family": "DejaVu Sans",
    "font.size": 11,
    "svg.fonttype": "path",  # letters as outlines: the same on every machine
    "svg.hashsalt": "vit-book",  # the same ids, so the same bytes, on every run
    "lines.linewidth": 1.4,
}
# pt: the smallest letters of any diagram. A 9.6-in drawing shown at the narrow layout's
# 676 px (NARROW_WIDTH, below) draws a point as 0.98 px: 9.5 pt is 9.3 px there
SMALL = 9.5

DIAGRAMS = {}  # name -> Diagram


class Diagram:
    def __init__(self, name, draw, alt, where):
        self.name, self.draw, self.alt, self.where = name, draw, alt, where


def diagram(name: str, where: str, alt: str):
    """Register the function below as the drawing of `name`, shown in `where` (a notebook
    or markdown file under the book's root) with `alt` as its alternative text."""

    def register(draw):
        DIAGRAMS[name] = Diagram(name, draw, alt, where)
        return draw

    return register


# --- drawing helpers: coordinates in inches, origin at the bottom left ---


def tint(colour: str, amount: float = 0.82) -> str:
    """`colour` mixed with white: amount 0 is the colour, 1 is white."""
    rgb = [int(colour[i : i + 2], 16) for i in (1, 3, 5)]
    return "#" + "".join(f"{round(c + (255 - c) * amount):02X}" for c in rgb)


def canvas(width: float, height: float):
    """A figure of width x height inches whose axes measure inches, on a white card."""
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_axis_off()
    card = FancyBboxPatch(
        (0.04, 0.04),
        width - 0.08,
        height - 0.08,
        boxstyle="round,pad=0,rounding_size=0.12",
        facecolor=COLOURS["card"],
        edgecolor="#DDDDDD",
        linewidth=0.8,
    )
    ax.add_patch(card)
    return fig, ax


def box(ax, x, y, w, h, text="", kind="norm", size=None, bold=False, fill=None):
    """A rounded box with its bottom left at (x, y), tinted with its kind's colour."""
    colour = COLOURS[kind]
    ax.add_patch(
        FancyBboxPatch(
            (x, y),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=0.06",
            facecolor=fill or tint(colour),
            edgecolor=colour,
            linewidth=1.3,
        )
    )
    if text:
        ax.text(
            x + w / 2,
            y + h / 2,
            text,
            ha="center",
            va="center",
            color=COLOURS["ink"],
            fontsize=size or STYLE["font.size"],
            fontweight="bold" if bold else "normal",
            linespacing=1.25,
        )


def square(ax, x, y, s, kind, text="", size=SMALL, light=False):
    """A token or a patch: a small square of its kind's colour."""
    colour = COLOURS[kind]
    ax.add_patch(
        Rectangle(
            (x, y),
            s,
            s,
            facecolor=tint(colour, 0.45) if light else colour,
            edgecolor="white",
            linewidth=0.8,
        )
    )
    if text:
        ax.text(
            x + s / 2,
            y + s / 2,
            text,
            ha="center",
            va="center",
            color="white",
            fontsize=size,
        )


def picture(ax, x, y, cells: int, step: float, size: float):
    """An image as a checkerboard of patches: cells x cells squares of side `size`, `step`
    apart, from (x, y) at the bottom left."""
    for r in range(cells):
        for c in range(cells):
            light = (r + c) % 2 == 0
            square(ax, x + c * step, y + r * step, size, "patch", light=light)


def arrow(ax, start, end, kind="ink", style="-|>", width=1.4, curve=0.0):
    ax.add_patch(
        FancyArrowPatch(
            start,
            end,
            arrowstyle=style,
            mutation_scale=12,
            color=COLOURS[kind],
            linewidth=width,
            connectionstyle=f"arc3,rad={curve}",
            shrinkA=0,
            shrinkB=0,
        )
    )


def label(ax, x, y, text, size=None, colour="ink", ha="center", va="center", **kw):
    ax.text(
        x,
        y,
        text,
        ha=ha,
        va=va,
        color=COLOURS[colour],
        fontsize=size or STYLE["font.size"],
        linespacing=1.25,
        **kw,
    )


def chapter(ax, x, y, text):
    """A chapter tag, such as "ch. 3", in grey italics."""
    label(ax, x, y, text, size=SMALL, colour="norm", ha="left", style="italic")


def matrix(ax, x, y, w, h, name, shape="", kind="patch", light=True, size=10):
    """A matrix as a rectangle: `name` inside, `shape` under it."""
    colour = COLOURS[kind]
    face = tint(colour, 0.6) if light else colour
    ax.add_patch(
        Rectangle((x, y), w, h, facecolor=face, edgecolor=colour, linewidth=1.2)
    )
    label(ax, x + w / 2, y + h / 2, name, size=size)
    if shape:
        label(ax, x + w / 2, y - 0.16, shape, size=SMALL, colour="norm")


# --- the diagrams, in reading order ---


@diagram(
    "vit",
    "notebooks/05a_vit.ipynb",
    "The Vision Transformer, top to bottom: an image (b, 3, 224, 224) is cut into 196 "
    "patches and embedded as tokens (b, 196, 768); a class token is put in front and the "
    "position table added (b, 197, 768); dropout; depth encoder blocks, each LayerNorm, "
    "multi-head attention and a residual sum, then LayerNorm, MLP and a residual sum; a "
    "final LayerNorm; the class token's output is pooled (b, 768) and the head gives the "
    "logits (b, classes). Pooling by the mean of the patch tokens instead, the final "
    "LayerNorm comes after the mean. Each step carries its chapter, and its attribute and shape where "
    "it has one.",
)
def draw_vit():
    fig, ax = canvas(9.6, 8.6)
    x0, w = 0.45, 4.6  # the main column
    mid = x0 + w / 2
    steps = [  # (y, height, text, kind, attribute, shape, chapter)
        (
            6.55,
            0.55,
            "1  patch embedding",
            "patch",
            "patch_embed",
            "(b, 196, 768)",
            "ch. 1",
        ),
        (
            5.65,
            0.55,
            "2  class token in front",
            "cls",
            "cls_token",
            "(b, 197, 768)",
            "ch. 2",
        ),
        (
            4.75,
            0.55,
            "3  + position table",
            "pos",
            "pos_embed",
            "(b, 197, 768)",
            "ch. 2",
        ),
        (4.0, 0.45, "4  dropout", "norm", "pos_drop", "", "ch. 4"),
        (
            2.7,
            0.95,
            "5  encoder: depth blocks",
            "attn",
            "blocks",
            "(b, 197, 768)",
            "ch. 3, 4",
        ),
        (
            1.95,
            0.45,
            "6  LayerNorm",
            "norm",
            "norm",
            "(b, 197, 768)",
            "ch. 4",
        ),
        (
            1.2,
            0.45,
            "7  pool: class token (or mean, then 6)",
            "cls",
            "",
            "(b, 768)",
            "ch. 5a",
        ),
        (
            0.35,
            0.55,
            "8  head: Linear",
            "head",
            "head",
            "(b, classes): logits",
            "ch. 5a",
        ),
    ]
    # the image: a grid of patches
    picture(ax, mid - 0.44, 7.52, 4, 0.22, 0.21)  # square, as 224 x 224 is
    label(ax, mid - 0.8, 7.95, "image", ha="right")
    label(
        ax,
        x0 + w + 0.15,
        7.95,
        "(b, 3, 224, 224)",
        ha="left",
        size=SMALL,
        colour="norm",
    )
    arrow(ax, (mid, 7.45), (mid, 7.12))
    for i, (y, h, text, kind, attr, shape, where) in enumerate(steps):
        box(ax, x0, y, w, h, text, kind)
        chapter(ax, x0 + w - 0.62, y + h / 2, where)
        mono = dict(family="DejaVu Sans Mono")
        if attr:
            label(ax, x0 + w + 0.15, y + h / 2 + 0.1, attr, ha="left", size=10, **mono)
        if shape:
            dy = -0.13 if attr else 0
            label(
                ax,
                x0 + w + 0.15,
                y + h / 2 + dy,
                shape,
                ha="left",
                size=SMALL,
                colour="norm",
            )
        if i + 1 < len(steps):
            below = steps[i + 1]
            arrow(ax, (mid, y), (mid, below[0] + below[1] + 0.02))
    # the tokens after steps 1, 2 and 3, at the left of their boxes
    s, gap = 0.17, 0.03
    for j in range(5):
        square(ax, x0 + 0.12 + (j + 1) * (s + gap), 6.55 + 0.19, s, "patch")
        square(ax, x0 + 0.12 + (j + 1) * (s + gap), 5.65 + 0.19, s, "patch")
        square(ax, x0 + 0.12 + (j + 1) * (s + gap), 4.75 + 0.19, s, "patch")
    square(ax, x0 + 0.12, 5.65 + 0.19, s, "cls")
    square(ax, x0 + 0.12, 4.75 + 0.19, s, "cls")
    for j in range(6):  # the positions, added to every token
        edge = Rectangle(
            (x0 + 0.12 + j * (s + gap), 4.75 + 0.19),
            s,
            s,
            fill=False,
            edgecolor=COLOURS["pos"],
            linewidth=2,
        )
        ax.add_patch(edge)
    # one encoder block, in detail, on the right
    bx, by, bw, bh = 6.75, 0.35, 2.62, 6.25
    box(ax, bx, by, bw, bh, "", "attn", fill="#FBF6FA")
    label(
        ax,
        bx + bw / 2,
        by + bh - 0.25,
        "one block (× depth)",
        size=10,
        fontweight="bold",
    )
    chapter(ax, bx + 0.12, by + 0.2, "ch. 4: the pre-LN block")
    cx, pw, ph = bx + 0.35, 1.6, 0.42
    px = cx + pw / 2
    for y, text, kind in (
        (4.85, "LayerNorm", "norm"),
        (4.05, "multi-head attention", "attn"),
        (2.85, "LayerNorm", "norm"),
        (2.05, "MLP", "mlp"),
    ):
        box(ax, cx, y, pw, ph, text, kind, size=9.5)
    for y in (3.55, 1.55):  # the two sums
        circle = plt.Circle((px, y), 0.13, facecolor="white", edgecolor=COLOURS["ink"])
        ax.add_patch(circle)
        label(ax, px, y, "+", size=11)
    label(ax, px, 6.08, "tokens in", size=SMALL, colour="norm")
    path = [(5.95, 4.85 + ph), (4.85, 4.05 + ph), (4.05, 3.68), (3.42, 2.85 + ph)]
    path += [(2.85, 2.05 + ph), (2.05, 1.68), (1.42, 1.1)]
    for top, bottom in path:
        arrow(ax, (px, top), (px, bottom))
    label(ax, px, 0.98, "tokens out", size=SMALL, colour="norm")
    rx = cx + pw + 0.35  # the residual paths, around the side
    for top, bottom in ((5.7, 3.55), (3.36, 1.55)):
        ax.plot([px, rx, rx], [top, top, bottom], color=COLOURS["ink"], linewidth=1.2)
        arrow(ax, (rx, bottom), (px + 0.13, bottom))
        label(
            ax,
            rx + 0.12,
            (top + bottom) / 2,
            "residual",
            size=SMALL,
            colour="norm",
            rotation=90,
        )
    # the encoder's box points to its detail
    y = 2.7 + 0.95 / 2
    ax.plot([x0 + w + 1.0, bx], [y, y], color=COLOURS["attn"], lw=1, ls=(0, (3, 2)))
    return fig


@diagram(
    "fast-path",
    "notebooks/05b_vit_weights.ipynb",
    "The fast path for a head that reads the class token, in two panels. Left, a block "
    "before the last (blocks 1 to depth − 1): every token's row. The queries of all "
    "n + 1 tokens, the class token and patches 1 to n, meet the keys of all n + 1 "
    "tokens: an (n + 1) × (n + 1) grid of scores, every cell computed. Each row's "
    "weights average the values into that token's output, the MLP runs on every token, "
    "and all n + 1 go on to the next block. Right, the last block (block depth): only "
    "the class token's row. The head reads the class token alone, so only its query is "
    "computed, against the keys and values of all n + 1 tokens: one row of 1 × (n + 1) "
    "scores; the other n rows, their outputs and their MLPs are skipped. The class "
    "token's one output goes through the last block's MLP, the final LayerNorm and the "
    "head, which gives the logits: the same logits as when every row is computed, with "
    "less work.",
)
def draw_fast_path():
    fig, ax = canvas(9.6, 4.3)
    names = ["cls", "1", "2", "3", "…", "n"]
    kinds = ["cls"] + ["patch"] * 5
    c, k = 0.3, len(names)  # a cell's side; n + 1 tokens, as a sketch
    gy = 0.8  # the grids' bottom
    top = gy + k * c  # the grids' top
    ax.plot([4.75, 4.75], [0.25, 4.05], color="#DDDDDD", lw=1)
    titles = (
        ("a block before the last: every token's row", "blocks 1 to depth − 1"),
        (
            "the last block: only the class token's row",
            "block depth: the head reads the class token alone",
        ),
    )
    for panel, (px, (title, note)) in enumerate(zip((0.25, 4.95), titles)):
        last = panel == 1
        gx = px + 0.85  # the grid's left edge
        label(ax, px + 2.15, 3.85, title, size=10, fontweight="bold")
        label(ax, px + 2.15, 3.55, note, size=SMALL, colour="norm", style="italic")
        # the keys (and values): every token, in both blocks
        for j, kind in enumerate(kinds):
            square(ax, gx + j * c + 0.02, top + 0.12, c - 0.04, kind)
        label(ax, gx + k * c / 2, top + 0.6, "keys, values: all n + 1", size=SMALL)
        label(ax, px + 0.45, top + 0.6, "queries", size=SMALL)
        for i, (name, kind) in enumerate(zip(names, kinds)):
            y = top - (i + 1) * c  # row i, from the top
            skipped = last and i > 0
            square(ax, px + 0.47, y + 0.02, c - 0.04, kind, light=skipped)
            label(ax, px + 0.4, y + c / 2, name, size=SMALL, colour="norm", ha="right")
            for j in range(k):
                v = ((i * 7 + j * 3 + 4) % 11) / 11  # made-up weights: a picture
                face = "#F2F2F2" if skipped else tint(COLOURS["attn"], 0.15 + 0.75 * v)
                ax.add_patch(
                    Rectangle(
                        (gx + j * c, y),
                        c,
                        c,
                        facecolor=face,
                        edgecolor="white",
                        linewidth=0.8,
                    )
                )
        scores = "1 × (n + 1) scores" if last else "(n + 1) × (n + 1) scores"
        label(ax, gx + k * c / 2, gy - 0.22, scores, size=SMALL, colour="attn")
        ox = gx + k * c + 0.35  # the outputs' column
        mx, mw = ox + 0.5, 0.65  # the MLP's
        if not last:
            for i, kind in enumerate(kinds):
                y = top - (i + 1) * c
                arrow(ax, (gx + k * c + 0.05, y + c / 2), (ox - 0.04, y + c / 2))
                square(ax, ox, y + 0.02, c - 0.04, kind)
            arrow(ax, (ox + c + 0.02, gy + k * c / 2), (mx - 0.04, gy + k * c / 2))
            box(ax, mx, gy, mw, k * c, "MLP:\nevery\ntoken", "mlp", size=SMALL)
            arrow(ax, (mx + mw / 2, gy - 0.05), (mx + mw / 2, gy - 0.35))
            label(ax, mx + mw / 2, gy - 0.52, "to the next block", size=SMALL)
            continue
        # the last block: the n patch rows are not computed
        ax.add_patch(
            Rectangle(
                (gx, gy),
                k * c,
                (k - 1) * c,
                fill=False,
                hatch="///",
                edgecolor="#C8C8C8",
                linewidth=0,
            )
        )
        label(
            ax,
            gx + k * c / 2,
            gy + (k - 1) * c / 2,
            "n rows skipped",
            size=SMALL,
            colour="norm",
            bbox=dict(boxstyle="round,pad=0.25", facecolor="white", edgecolor="none"),
        )
        y = top - c  # the class token's row goes on, alone
        arrow(ax, (gx + k * c + 0.05, y + c / 2), (ox - 0.04, y + c / 2))
        square(ax, ox, y + 0.02, c - 0.04, "cls")
        arrow(ax, (ox + c + 0.02, y + c / 2), (mx - 0.04, y + c / 2))
        box(ax, mx, y, mw, c, "MLP", "mlp", size=SMALL)
        cx, bw, bh = mx + mw / 2, 1.2, c
        chain = (("final LayerNorm", "norm"), ("head", "head"))
        below = y
        for i, (text, kind) in enumerate(chain):
            by = y - (2 * i + 2) * c
            arrow(ax, (cx, below - 0.03), (cx, by + bh + 0.03))
            box(ax, cx - bw / 2, by, bw, bh, text, kind, size=SMALL)
            below = by
        arrow(ax, (cx, below - 0.03), (cx, below - 0.3))
        label(ax, cx, below - 0.47, "logits", size=SMALL, colour="head")
    return fig


@diagram(
    "one-head",
    "notebooks/03_attention.ipynb",
    "One attention head: the tokens x (n, d) go through three Linear layers W_Q, W_K and "
    "W_V to queries, keys and values, each (n, d_h); the scores Q K transposed, divided by "
    "the square root of d_h, are (n, n); a softmax along each row turns them into weights "
    "that sum to one; the weights times V give the output, (n, d_h): one weighted average "
    "of the values per token.",
)
def draw_one_head():
    fig, ax = canvas(9.6, 3.7)
    matrix(ax, 0.35, 0.9, 0.55, 2.1, "x", "(n, d)", "patch")
    rows = {"Q": 2.55, "K": 1.55, "V": 0.55}
    for name, y in rows.items():
        arrow(ax, (0.95, 1.95), (1.45, y + 0.22), curve=0.0)
        box(ax, 1.5, y, 0.75, 0.44, f"$W_{name}$", "attn", size=10)
        arrow(ax, (2.3, y + 0.22), (2.6, y + 0.22))
        matrix(ax, 2.65, y - 0.08, 0.38, 0.6, name, "", "attn")
    label(ax, 2.84, 0.3, "each (n, $d_h$), $d_h$ = head_dim", size=SMALL, colour="norm")
    # scores: Q K^T / sqrt(d_h)
    arrow(ax, (3.08, 2.77), (3.85, 2.25))
    arrow(ax, (3.08, 1.77), (3.85, 2.05))
    box(ax, 3.9, 1.85, 1.25, 0.6, "$Q K^{\\top} / \\sqrt{d_h}$", "attn", size=10)
    arrow(ax, (5.2, 2.15), (5.45, 2.15))
    matrix(ax, 5.5, 1.6, 1.1, 1.1, "scores", "(n, n)", "attn")
    arrow(ax, (6.65, 2.15), (6.95, 2.15))
    box(ax, 7.0, 1.85, 0.98, 0.6, "softmax\nalong rows", "norm", size=9.5)
    arrow(ax, (8.02, 2.15), (8.22, 2.15))
    # the weights, darker: each row sums to one
    ax.add_patch(
        Rectangle(
            (8.27, 1.6),
            1.16,
            1.1,
            facecolor=tint(COLOURS["attn"], 0.25),
            edgecolor=COLOURS["attn"],
            linewidth=1.2,
        )
    )
    label(ax, 8.85, 2.3, "weights", size=10, colour="card")
    label(ax, 8.85, 2.0, "rows sum to 1", size=SMALL, colour="card")
    label(ax, 8.85, 1.44, "(n, n)", size=SMALL, colour="norm")
    # weights @ V -> out
    box(ax, 6.7, 0.45, 1.2, 0.55, "weights @ V", "attn", size=9.5)
    arrow(ax, (3.08, 0.77), (6.65, 0.72))
    label(ax, 4.8, 0.93, "values", size=SMALL, colour="norm")
    arrow(ax, (8.6, 1.6), (7.6, 1.03))
    arrow(ax, (7.95, 0.72), (8.45, 0.72))
    matrix(ax, 8.5, 0.42, 0.38, 0.6, "out", "", "attn", size=SMALL)
    label(ax, 8.69, 0.28, "(n, $d_h$)", size=SMALL, colour="norm")
    return fig


HEAD_TINTS = (0.15, 0.4, 0.6, 0.8)  # head 1 to 4 of a drawing with four heads


@diagram(
    "fused-qkv",
    "notebooks/03_attention.ipynb",
    "The fused qkv weight, (3d, d): its rows are all of Q, then all of K, then all of V, "
    "and inside each third one block of rows per head. Its output for a token, of width "
    "3d, has the same layout, so one reshape to (b, n, 3, h, d_h) and one permute to "
    "(3, b, h, n, d_h) give the queries, keys and values of every head.",
)
def draw_fused_qkv():
    fig, ax = canvas(9.6, 4.3)
    attn = COLOURS["attn"]
    # the weight: three thirds of four heads each
    x, y0, w, third = 0.75, 0.45, 0.9, 1.05
    for t, name in enumerate("VKQ"):  # from the bottom up: Q is on top
        for hd in range(4):
            y = y0 + t * third + (3 - hd) * third / 4
            face = tint(attn, HEAD_TINTS[hd])
            ax.add_patch(
                Rectangle((x, y), w, third / 4, facecolor=face, edgecolor="white")
            )
        ax.add_patch(
            Rectangle(
                (x, y0 + t * third), w, third, fill=False, edgecolor=attn, linewidth=1.4
            )
        )
        label(
            ax, x - 0.18, y0 + t * third + third / 2, name, size=12, fontweight="bold"
        )
    for hd in range(4):
        label(
            ax,
            x + w + 0.08,
            y0 + 2 * third + (3 - hd) * third / 4 + third / 8,
            f"head {hd + 1}",
            size=SMALL,
            colour="norm",
            ha="left",
        )
    label(ax, x + w / 2, y0 + 3 * third + 0.25, "qkv.weight  (3d, d)", size=10)
    label(ax, x + w / 2, y0 - 0.2, "d columns", size=SMALL, colour="norm")
    # one token's output: the same layout, as a row
    bx, by, seg = 3.0, 3.2, 0.3
    for t, name in enumerate("QKV"):
        for hd in range(4):
            face = tint(attn, HEAD_TINTS[hd])
            ax.add_patch(
                Rectangle(
                    (bx + (4 * t + hd) * seg, by),
                    seg,
                    0.4,
                    facecolor=face,
                    edgecolor="white",
                )
            )
        ax.add_patch(
            Rectangle(
                (bx + 4 * t * seg, by),
                4 * seg,
                0.4,
                fill=False,
                edgecolor=attn,
                linewidth=1.4,
            )
        )
        label(ax, bx + (4 * t + 2) * seg, by + 0.58, name, size=11, fontweight="bold")
    arrow(ax, (2.35, 2.75), (bx - 0.1, by + 0.2))
    label(ax, 2.5, 2.52, "qkv(x)", size=9.5, family="DejaVu Sans Mono")
    label(
        ax,
        bx + 6 * seg,
        by - 0.22,
        "qkv(x) is (b, n, 3d): each token's row has width 3d",
        size=SMALL,
        colour="norm",
    )
    # reshape and permute: three stacks of heads
    arrow(ax, (bx + 6 * seg, by - 0.38), (bx + 6 * seg, 2.45))
    text = "reshape (b, n, 3, h, $d_h$), where $d_h$ = d / h"
    label(ax, bx + 6 * seg + 0.12, 2.66, text, size=SMALL, ha="left")
    label(
        ax,
        bx + 6 * seg + 0.12,
        2.42,
        "permute (3, b, h, n, $d_h$)",
        size=SMALL,
        ha="left",
    )
    for t, name in enumerate("qkv"):
        gx = bx + 0.15 + t * 1.25
        for hd in range(4):
            face = tint(attn, HEAD_TINTS[hd])
            ax.add_patch(
                Rectangle(
                    (gx + hd * 0.12, 0.55 + hd * 0.12),
                    0.45,
                    1.0,
                    facecolor=face,
                    edgecolor=attn,
                    linewidth=0.9,
                )
            )
        label(ax, gx + 0.41, 0.3, f"{name}: (b, h, n, $d_h$)", size=SMALL)
    label(
        ax,
        bx + 1.9,
        2.05,
        "every head's queries, keys and values",
        size=SMALL,
        colour="norm",
    )
    # the rule, in words
    note = "rows: all of Q, then all of K,\nthen all of V; inside each\nthird, head by head"
    box(ax, 7.27, 1.35, 2.16, 1.0, note, "norm", size=SMALL, fill="#F7F7F7")
    label(
        ax,
        8.35,
        1.05,
        "timm's layout: chapter 5's\nweights arrive this way",
        size=SMALL,
        colour="norm",
        va="top",
    )
    return fig


def plus(ax, x, y, r=0.13):
    ax.add_patch(plt.Circle((x, y), r, facecolor="white", edgecolor=COLOURS["ink"]))
    label(ax, x, y, "+", size=11)


def _block_column(ax, cx, top, prenorm: bool):
    """One block drawn down from `top` at x = cx: the residual stream straight down, each
    branch on the right. Pre-LN: LayerNorm inside the branch; post-LN: on the stream."""
    bw, bh, off = 1.45, 0.4, 0.55  # branch box size, and its gap right of the stream
    y = top
    label(ax, cx, y + 0.15, "x", size=11)
    for f, kind in (("attention", "attn"), ("MLP", "mlp")):
        start = y - 0.1
        parts = [("LayerNorm", "norm"), (f, kind)] if prenorm else [(f, kind)]
        by = start - 0.35 - bh
        bx = cx + off
        # the branch leaves the stream, runs through its boxes, and comes back at a sum
        ax.plot([cx, bx + bw / 2], [start - 0.15, start - 0.15], color=COLOURS["ink"])
        arrow(ax, (bx + bw / 2, start - 0.15), (bx + bw / 2, by + bh))
        for i, (name, k) in enumerate(parts):
            box(ax, bx, by, bw, bh, name, k, size=9.5)
            if i + 1 < len(parts):
                arrow(ax, (bx + bw / 2, by), (bx + bw / 2, by - 0.25))
                by -= 0.25 + bh
        sum_y = by - 0.35
        ax.plot([bx + bw / 2, bx + bw / 2], [by, sum_y], color=COLOURS["ink"])
        arrow(ax, (bx + bw / 2, sum_y), (cx + 0.13, sum_y))
        arrow(ax, (cx, start), (cx, sum_y + 0.13), kind="ink", width=2.6)
        plus(ax, cx, sum_y)
        y = sum_y - 0.13
        if not prenorm:  # LayerNorm on the stream itself
            arrow(ax, (cx, y), (cx, y - 0.25), kind="ink", width=2.6)
            box(ax, cx - bw / 2, y - 0.25 - bh, bw, bh, "LayerNorm", "norm", size=9.5)
            y = y - 0.25 - bh
    arrow(ax, (cx, y), (cx, y - 0.3), kind="ink", width=2.6)
    label(ax, cx, y - 0.45, "out", size=10)


@diagram(
    "pre-post-ln",
    "notebooks/04_block.ipynb",
    "Two orders of the transformer block. Pre-LN (ViT): the residual stream, drawn thick, "
    "runs straight down through two sums; each branch takes a LayerNorm, then attention or "
    "the MLP, and adds its result: x + f(LN(x)). Post-LN (the 2017 Transformer): the "
    "branch is attention or the MLP alone, and a LayerNorm sits on the stream after each "
    "sum: LN(x + f(x)), so everything on its way down passes through two LayerNorms per "
    "block.",
)
def draw_pre_post_ln():
    fig, ax = canvas(9.6, 6.0)
    label(ax, 2.35, 5.65, "pre-LN (ViT):  x + f(LN(x))", size=11, fontweight="bold")
    label(ax, 7.05, 5.65, "post-LN (2017):  LN(x + f(x))", size=11, fontweight="bold")
    _block_column(ax, 1.5, 5.15, prenorm=True)
    _block_column(ax, 6.2, 5.15, prenorm=False)
    ax.plot([4.75, 4.75], [0.2, 5.8], color="#DDDDDD", lw=1)
    label(
        ax,
        2.7,
        0.4,
        "the stream (thick) is a plain sum: the gradient\nreaches every "
        "block through an identity path",
        size=SMALL,
        colour="norm",
    )
    label(
        ax,
        7.4,
        0.4,
        "the stream passes two LayerNorms per block:\nthe gradient is "
        "rescaled at each one",
        size=SMALL,
        colour="norm",
    )
    return fig


CHANNELS = {"r": "#D62728", "g": "#2CA02C", "b": "#1F77B4"}  # the pixels' own colours


def _pixel(ax, x, y, s, name):
    colour = CHANNELS[name[0]]
    ax.add_patch(
        Rectangle(
            (x, y), s, s, facecolor=tint(colour, 0.7), edgecolor=colour, linewidth=1
        )
    )
    label(ax, x + s / 2, y + s / 2, name, size=SMALL)


@diagram(
    "flatten-order",
    "notebooks/01_patches.ipynb",
    "A 2 x 2 patch with three channels, red, green and blue, has 12 numbers, r1 to r4, g1 "
    "to g4 and b1 to b4. Flattened as (c p1 p2), the book's and timm's order, the vector "
    "is all red pixels, then all green, then all blue. Flattened as (p1 p2 c), vit-pytorch's "
    "order, it is pixel by pixel with the three colours together: r1 g1 b1 r2 g2 b2 and so "
    "on. The same numbers in another order need another Linear weight.",
)
def draw_flatten_order():
    fig, ax = canvas(9.6, 3.3)
    s = 0.34
    for k, c in enumerate("rgb"):  # the three channels of the patch, side by side
        x0, y0 = 0.4 + k * 0.8, 1.35
        for i in range(2):
            for j in range(2):
                _pixel(ax, x0 + j * s, y0 + (1 - i) * s, s, f"{c}{2 * i + j + 1}")
        label(
            ax,
            x0 + s,
            y0 - 0.18,
            ("red", "green", "blue")[k],
            size=SMALL,
            colour="norm",
        )
    label(
        ax, 1.42, 0.75, "one patch: (c, p1, p2) = (3, 2, 2)", size=SMALL, colour="norm"
    )
    order = {
        "(c p1 p2)": [f"{c}{i}" for c in "rgb" for i in range(1, 5)],
        "(p1 p2 c)": [f"{c}{i}" for i in range(1, 5) for c in "rgb"],
    }
    notes = {
        "(c p1 p2)": "the book, timm, Conv2d's weight: all red, then green, then blue",
        "(p1 p2 c)": "vit-pytorch: pixel by pixel, three colours together",
    }
    for row, (pattern, names) in enumerate(order.items()):
        y = 2.3 - row * 1.2
        label(
            ax, 3.4, y + s / 2, pattern, size=10, family="DejaVu Sans Mono", ha="left"
        )
        for k, name in enumerate(names):
            _pixel(ax, 4.75 + k * s, y, s, name)
        label(ax, 4.75, y - 0.22, notes[pattern], size=SMALL, colour="norm", ha="left")
        arrow(ax, (2.85, 1.7), (3.3, y + s / 2))
    return fig


@diagram(
    "patch-embed",
    "notebooks/01_patches.ipynb",
    "The patch embedding two ways. Left: patchify cuts the image (b, c, H, W) into n "
    "flattened patches (b, n, c p p), and one Linear maps each to a token, (b, n, d). "
    "Right: a Conv2d with kernel p and stride p gives a map (b, d, H/p, W/p), and "
    "flattening its grid gives the same tokens. The weights match: linear.weight = "
    "conv.weight.flatten(1).",
)
def draw_patch_embed():
    fig, ax = canvas(9.6, 4.2)
    # the image, shared by both paths
    picture(ax, 4.25, 2.9, 3, 0.37, 0.35)
    label(ax, 4.8, 2.7, "(b, c, H, W)", size=SMALL, colour="norm")
    # left: patchify, then Linear
    arrow(ax, (4.15, 3.3), (1.9, 3.08))
    box(ax, 0.5, 2.55, 1.9, 0.5, "patchify", "patch")
    arrow(ax, (1.45, 2.55), (1.45, 2.08))
    label(ax, 1.57, 2.3, "(b, n, c·p·p)", size=SMALL, colour="norm", ha="left")
    for k in range(9):
        square(ax, 0.55 + k * 0.2, 1.85, 0.18, "patch", light=k % 2 == 0)
    arrow(ax, (1.45, 1.8), (1.45, 1.45))
    box(ax, 0.5, 0.95, 1.9, 0.5, "Linear(c·p·p, d)", "mlp", size=10)
    # right: Conv2d, then flatten
    arrow(ax, (5.55, 3.3), (7.6, 3.08))
    box(ax, 7.1, 2.55, 2.1, 0.5, "Conv2d(c, d, p, stride p)", "mlp", size=9.5)
    arrow(ax, (8.15, 2.55), (8.15, 2.05))
    label(ax, 8.27, 2.3, "(b, d, H/p, W/p)", size=SMALL, colour="norm", ha="left")
    for r in range(3):
        for c in range(3):
            ax.add_patch(
                Rectangle(
                    (7.75 + c * 0.22, 1.45 + r * 0.22 - 0.1),
                    0.2,
                    0.2,
                    facecolor=tint(COLOURS["mlp"], 0.4),
                    edgecolor="white",
                )
            )
    arrow(ax, (8.15, 1.28), (8.15, 1.0))
    box(ax, 7.1, 0.5, 2.1, 0.45, "flatten the grid", "norm", size=9.5)
    # the same tokens
    for k in range(9):
        square(ax, 3.9 + k * 0.2, 0.75, 0.18, "patch")
    label(ax, 4.8, 0.52, "tokens (b, n, d)", size=SMALL)
    arrow(ax, (2.45, 1.2), (3.85, 0.85))
    arrow(ax, (7.05, 0.72), (5.75, 0.84))
    label(
        ax,
        4.8,
        1.65,
        "the same function:\nlinear.weight = conv.weight.flatten(1)",
        size=9.5,
        fontweight="bold",
    )
    return fig


def _tokens(ax, x, y, kinds, names, w=0.34, h=1.0, light=False, size=SMALL):
    """A row of tokens drawn as columns (each a vector of width d), named below."""
    for k, (kind, name) in enumerate(zip(kinds, names)):
        colour = COLOURS[kind]
        face = tint(colour, 0.55) if light else tint(colour, 0.2)
        ax.add_patch(
            Rectangle(
                (x + k * (w + 0.06), y),
                w,
                h,
                facecolor=face,
                edgecolor=colour,
                linewidth=1.1,
            )
        )
        label(ax, x + k * (w + 0.06) + w / 2, y - 0.16, name, size=size, colour="norm")
    return x + len(kinds) * (w + 0.06)


@diagram(
    "cls-and-positions",
    "notebooks/02_positions.ipynb",
    "The class token and the positions. The n patch tokens, each a vector of width d, get "
    "one more token in front, the learned class token: 1 + n tokens. Then the position "
    "table, 1 + n rows of width d, one per place in the sequence, is added to the tokens "
    "row by row: row 0 to the class token, row i to patch i. The shape stays (b, 1 + n, d).",
)
def draw_cls_and_positions():
    fig, ax = canvas(9.6, 3.6)
    names, kinds, w = ["1", "2", "3", "…", "n"], ["patch"] * 5, 0.24
    rows = [  # (x, title, kinds, names, light)
        (0.45, "patch tokens\n(b, n, d)", kinds, names, False),
        (
            2.65,
            "class token in front\n(b, 1 + n, d)",
            ["cls"] + kinds,
            ["cls"] + names,
            False,
        ),
        (
            4.95,
            "position table\n(1 + n, d)",
            ["pos"] * 6,
            ["0", "1", "2", "3", "…", "n"],
            True,
        ),
    ]
    for x, title, k, n, light in rows:
        end = _tokens(ax, x, 1.45, k, n, w=w, light=light)
        label(ax, (x + end) / 2, 2.95, title, size=9.5)
    arrow(ax, (1.95, 1.95), (2.5, 1.95))
    label(ax, 2.22, 2.15, "prepend", size=SMALL, colour="norm")
    label(ax, 4.72, 1.95, "+", size=16)
    label(ax, 7.02, 1.95, "=", size=16)
    # the result: each token with its position's row added (a green band)
    x = 7.3
    for k, kind in enumerate(["cls"] + kinds):
        colour = COLOURS[kind]
        ax.add_patch(
            Rectangle(
                (x + k * (w + 0.06), 1.45),
                w,
                1.0,
                facecolor=tint(colour, 0.2),
                edgecolor=colour,
                lw=1.1,
            )
        )
        ax.add_patch(
            Rectangle(
                (x + k * (w + 0.06), 1.45),
                w,
                1.0,
                fill=False,
                edgecolor=COLOURS["pos"],
                linewidth=2.4,
            )
        )
        label(
            ax,
            x + k * (w + 0.06) + w / 2,
            1.29,
            (["cls"] + names)[k],
            size=SMALL,
            colour="norm",
        )
    label(
        ax,
        x + 3 * (w + 0.06) - 0.03,
        2.95,
        "tokens that know\ntheir place (b, 1 + n, d)",
        size=9.5,
    )
    label(
        ax,
        4.8,
        0.6,
        "one table for every image of the batch, added row by row (a row "
        "is drawn as a column here):\nrow i goes to the token at place i, row 0 to the "
        "class token",
        size=SMALL,
        colour="norm",
    )
    return fig


@diagram(
    "checkpoint-life",
    "notebooks/06c_checkpoints.ipynb",
    "One save, in four moments of the run's folder out/. Before: the checkpoint of epoch 6, "
    "a folder holding model.safetensors and train_state.safetensors. Writing: epoch 7 goes "
    "into a folder epoch-0007.partial beside it; a crash now leaves epoch 6 whole, and the "
    "next save deletes the partial folder. The rename: epoch-0007.partial becomes "
    "epoch-0007 in one atomic step. Retiring: epoch 6 is renamed epoch-0006.old, then "
    "deleted. At every moment after the first save, out/ holds at least one complete "
    "checkpoint; load_checkpoint(out) reads the one of the highest epoch.",
)
def draw_checkpoint_life():
    fig, ax = canvas(9.6, 3.6)
    steps = [
        ("before", [("epoch-0006/", "patch", True)], "out/ holds epoch 6"),
        (
            "1. write",
            [("epoch-0006/", "patch", True), ("epoch-0007.partial/", "norm", True)],
            "a crash here: epoch 6 is whole;\nthe next save deletes .partial",
        ),
        (
            "2. rename (atomic)",
            [("epoch-0006/", "patch", True), ("epoch-0007/", "mlp", True)],
            "one step: epoch-0007 is there\nwhole, or not at all",
        ),
        (
            "3. retire the old one",
            [("epoch-0006.old/", "norm", False), ("epoch-0007/", "mlp", True)],
            "renamed .old, then deleted:\nno longer a checkpoint",
        ),
    ]
    width, gap, left = 2.1, 0.22, 0.3
    for i, (title, folders, note) in enumerate(steps):
        x = left + i * (width + gap)
        label(ax, x + width / 2, 3.25, title, size=10.5, fontweight="bold")
        box(ax, x, 0.95, width, 2.05, "", "norm", fill=COLOURS["card"])
        label(ax, x + 0.12, 2.82, "out/", size=10, ha="left")
        for j, (name, kind, whole) in enumerate(folders):
            y = 2.05 - j * 0.95
            box(ax, x + 0.12, y, width - 0.24, 0.62, "", kind)
            label(ax, x + 0.22, y + 0.45, name, size=9.5, ha="left")
            files = "model, train_state" if whole else "(being deleted)"
            label(ax, x + 0.22, y + 0.17, files, size=SMALL, colour="norm", ha="left")
        label(ax, x + width / 2, 0.6, note, size=SMALL, colour="norm")
        if i:
            arrow(ax, (x - gap + 0.02, 2.0), (x - 0.02, 2.0))
    label(
        ax,
        4.8,
        0.2,
        "at every moment out/ holds a complete checkpoint: load_checkpoint(out) reads the highest epoch",
        size=9.5,
    )
    return fig


@diagram(
    "train-loop",
    "notebooks/06d_training_for_real.ipynb",
    "What train does, in order. It holds the run's folder out/ (run_lock: one run at a "
    "time), then _prepare makes the run's pieces: this rank's loader, the optimizer and "
    "its schedule, the gradient scaler and the history, read back from the newest "
    "checkpoint when resuming, and _runner wraps the model for several processes (DDP) "
    "and compiles it on a GPU. Then each epoch, in six steps: 1. seeds mixed from the "
    "run's seed and the epoch (and, for dropout and augmentation, the rank); 2. train_epoch, page 6b's steps, each step's loss "
    "kept on the device; 3. a loss that is not finite stops the run (Diverged), before any "
    "checkpoint is written, so the last one on disk stays good; 4. the epoch's sums added over "
    "the ranks, and the validation and test splits measured; 5. a checkpoint saved, by rank 0 only; 6. every rank waits for the "
    "others, the after_epoch hook runs, and a time budget that is spent ends the run. "
    "Then the next epoch, from step 1.",
)
def draw_train_loop():
    fig, ax = canvas(9.6, 3.7)
    box(
        ax,
        0.25,
        2.6,
        9.1,
        0.95,
        "train holds out/ (run_lock: one run at a time), then _prepare makes this rank's "
        "loader,\nthe optimizer, its schedule, the gradient scaler and the history (on "
        "resume: read back from the newest checkpoint),\nand _runner wraps the model for "
        "several processes (DDP) and compiles it on a GPU",
        "norm",
        size=10,
    )
    steps = [
        ("1. seeds: the\nrun's seed, the\nepoch (and rank)", "pos"),
        ("2. train_epoch:\nlosses stay on\nthe device", "attn"),
        ("3. a loss not\nfinite? Diverged", "head"),
        ("4. sums over the\nranks; measure\nval and test", "mlp"),
        ("5. save a\ncheckpoint\n(rank 0 only)", "patch"),
        ("6. all ranks wait;\nafter_epoch runs;\ntime up? stop", "norm"),
    ]
    width, gap, left, y = 1.44, 0.1, 0.25, 1.15
    for i, (text, kind) in enumerate(steps):
        x = left + i * (width + gap)
        box(ax, x, y, width, 0.95, text, kind, size=SMALL)
        if i:
            arrow(ax, (x - gap + 0.01, y + 0.48), (x - 0.01, y + 0.48))
    first = left + width / 2
    arrow(ax, (first, 2.63), (first, 2.13))
    label(ax, first + 0.15, 2.38, "each epoch", size=SMALL, colour="norm", ha="left")
    label(
        ax,
        3.0,
        2.38,
        "step 3 comes before step 5: the last checkpoint on disk stays good",
        size=SMALL,
        colour="norm",
        ha="left",
    )
    last = left + 5 * (width + gap) + width / 2
    arrow(ax, (last, 1.13), (first, 1.13), kind="norm", curve=-0.12)
    label(ax, 4.8, 0.42, "the next epoch", size=SMALL, colour="norm")
    return fig


@diagram(
    "ddp-shards",
    "notebooks/06d_training_for_real.ipynb",
    "Data-parallel training on two processes. Each epoch, every rank draws the same "
    "permutation of the training images (its seed is the run's seed and the epoch); rank 0 "
    "takes positions 0, 2, 4, ... of it and rank 1 positions 1, 3, 5, ..., so each image is "
    "seen at most once (the last n % 2 are dropped) and every rank has as many. Each rank cuts its share into full batches of "
    "batch_size / 2, dropping what is left over for that epoch, and runs the forward and backward pass on its own copy of the model; "
    "DDP averages the gradients over the ranks (an all-reduce) during the backward pass, so "
    "every rank's AdamW takes the same step and the copies stay equal.",
)
def draw_ddp_shards():
    fig, ax = canvas(9.6, 4.3)
    order = [7, 2, 9, 0, 4, 11, 5, 1, 8, 3, 10, 6]
    kinds = ("patch", "cls")  # rank 0, rank 1
    s, x0, y0 = 0.5, 1.8, 3.25
    label(ax, 0.25, y0 + s / 2, "the epoch's\norder", size=10, ha="left")
    for i, image in enumerate(order):
        square(ax, x0 + i * (s + 0.06), y0, s, kinds[i % 2], str(image), size=10)
    label(
        ax,
        x0 + 6 * (s + 0.06),
        y0 + s + 0.22,
        "one permutation of the images, the same on every rank: seeded by (seed, epoch)",
        size=10,
        colour="norm",
    )
    columns = {0: 1.2, 1: 5.7}  # each rank's column: its left edge
    arrow(ax, (3.2, 3.2), (2.5, 2.9), kind="norm")  # every other place to each rank
    arrow(ax, (6.2, 3.2), (6.9, 2.9), kind="norm")
    for rank, left in columns.items():
        kind = kinds[rank]
        mine = order[rank::2]
        label(
            ax,
            left,
            2.72,
            f"rank {rank}: positions {rank}, {rank + 2}, {rank + 4}, ...",
            size=10,
            ha="left",
        )
        for i, image in enumerate(mine):
            square(ax, left + i * (s + 0.06), 2.05, s, kind, str(image), size=10)
        arrow(ax, (left + 1.65, 1.98), (left + 1.65, 1.68))
        box(
            ax,
            left,
            1.05,
            3.3,
            0.6,
            "its model copy: forward, backward\non full batches of batch_size / 2",
            "attn",
            size=10,
        )
    box(
        ax,
        1.2,
        0.28,
        7.8,
        0.5,
        "DDP averages the gradients over the ranks (all-reduce): the same AdamW step everywhere",
        "mlp",
        size=10,
    )
    for left in columns.values():
        arrow(ax, (left + 1.65, 1.02), (left + 1.65, 0.81))
    return fig


@diagram(
    "train-step",
    "notebooks/06b_fashion_mnist.ipynb",
    "One training step as a loop. A batch of images and labels; the forward pass gives the "
    "logits; the loss is the label-smoothed cross-entropy; the backward pass gives every "
    "parameter its gradient; the gradient is clipped to a length of at most clip_grad; "
    "AdamW updates the weights; the scheduler sets the learning rate for the next step; "
    "then the next batch. After the last batch of an epoch, the validation split is evaluated.",
)
def draw_train_step():
    fig, ax = canvas(9.6, 3.9)
    w, h = 2.0, 0.72
    top = [  # left to right
        (0.55, "batch\nimages, labels", "patch"),
        (3.05, "forward\nlogits = model(images)", "attn"),
        (5.55, "loss\ncross-entropy, smoothed", "head"),
    ]
    bottom = [  # right to left: (x, width, text, kind)
        (7.3, 1.75, "backward\nloss.backward()", "head"),
        (4.8, 2.25, "clip (if clip_grad)\ngradient length ≤ clip_grad", "norm"),
        (2.55, 1.95, "AdamW\nthe weights move", "mlp"),
        (0.4, 1.95, "scheduler\nthe next learning rate", "pos"),
    ]
    for x, text, kind in top:
        box(ax, x, 2.5, w, h, text, kind, size=9.5)
    for x, width, text, kind in bottom:
        box(ax, x, 0.75, width, h, text, kind, size=9.5)
    for (x, _, _), (nx, _, _) in zip(top, top[1:]):
        arrow(ax, (x + w + 0.04, 2.86), (nx - 0.04, 2.86))
    # down the right side, from the loss to the backward pass
    ax.plot([7.6, 8.18], [2.86, 2.86], color=COLOURS["ink"])
    arrow(ax, (8.18, 2.86), (8.18, 1.51))
    for (x, _, _, _), (nx, nw, _, _) in zip(bottom, bottom[1:]):
        arrow(ax, (x - 0.04, 1.11), (nx + nw + 0.04, 1.11))
    arrow(ax, (1.4, 1.51), (1.4, 2.46))  # back to the next batch
    label(ax, 1.53, 1.98, "next batch", size=SMALL, colour="norm", ha="left")
    label(
        ax,
        4.8,
        0.38,
        "train_step does forward to AdamW; the loop steps the scheduler "
        "after it; after the epoch's last batch, evaluate on the validation split",
        size=SMALL,
        colour="norm",
    )
    label(ax, 4.8, 3.55, "one step per batch", size=10, fontweight="bold")
    return fig


def _attention_square(ax, x, y, s, seed, kind="attn", identity=False):
    """A small attention matrix: cells shaded by made-up weights (a picture, not data);
    with `identity`, the diagonal darker."""
    n = 5
    colour = COLOURS[kind]
    for i in range(n):
        for j in range(n):
            v = ((i * 7 + j * 3 + seed * 5) % 11) / 11
            if identity and i == j:
                v = -0.15  # the residual path: a token keeps much of itself
            ax.add_patch(
                Rectangle(
                    (x + j * s / n, y + (n - 1 - i) * s / n),
                    s / n,
                    s / n,
                    facecolor=tint(colour, 0.15 + 0.8 * v),
                    edgecolor="white",
                    linewidth=0.5,
                )
            )


@diagram(
    "rollout",
    "notebooks/08b_attention_maps.ipynb",
    "Attention rollout. For each layer l, the heads' attention maps are averaged into one "
    "(n, n) matrix A_l; the identity is added for the residual path and each row is "
    "renormalised to sum to one. The layers' matrices are multiplied in order, the last "
    "on the left: R = Ã_L ⋯ Ã_2 Ã_1. Row 0 of R, the class token's, without its own "
    "column, is one weight per patch; reshaped to the grid it is the rollout map drawn "
    "over the image.",
)
def draw_rollout():
    fig, ax = canvas(9.6, 4.1)
    s = 0.75
    xs = [0.45, 3.05, 6.4]
    for x, name in zip(xs, ["1", "2", "L"]):
        _attention_square(ax, x, 2.55, s, int(name) if name != "L" else 3)
        label(ax, x + s / 2, 3.55, f"layer {name}: $A_{name}$", size=9.5)
        label(ax, x + s / 2, 2.37, "mean of heads", size=SMALL, colour="norm")
        arrow(ax, (x + s + 0.06, 2.92), (x + s + 0.38, 2.92))
        label(ax, x + s + 0.22, 3.12, "+ I", size=SMALL)
        _attention_square(
            ax, x + s + 0.45, 2.55, s, int(name) if name != "L" else 3, identity=True
        )
        label(ax, x + 1.5 * s + 0.45, 2.37, "rows sum to 1", size=SMALL, colour="norm")
        label(ax, x + 1.5 * s + 0.45, 3.55, f"$\\tilde A_{name}$", size=10)
    label(ax, 5.75, 2.92, "⋯", size=16)
    # the product, the class token's row, the map
    label(
        ax, 2.3, 1.35, "$R = \\tilde A_L \\cdots \\tilde A_2\\, \\tilde A_1$", size=13
    )
    label(
        ax,
        2.3,
        0.9,
        "(n, n): how much each token\ndraws on each input token",
        size=SMALL,
        colour="norm",
    )
    arrow(ax, (3.85, 1.3), (4.55, 1.3))
    # row 0 of R, highlighted
    n, c = 5, 0.16
    for j in range(n):
        kind = "cls" if j == 0 else "attn"
        ax.add_patch(
            Rectangle(
                (4.65 + j * c, 1.22),
                c,
                c,
                facecolor=tint(COLOURS[kind], 0.3),
                edgecolor="white",
            )
        )
    label(ax, 5.05, 1.6, "row 0: the class token", size=SMALL, colour="norm")
    label(ax, 5.05, 0.92, "drop column 0", size=SMALL, colour="norm")
    arrow(ax, (5.55, 1.3), (6.35, 1.3))
    label(ax, 5.97, 1.14, "to the grid", size=SMALL, colour="norm")
    for i in range(2):  # the four patches of this sketch's five tokens
        for j in range(2):
            v = ((i + 1) * (j + 2) % 7) / 7
            ax.add_patch(
                Rectangle(
                    (6.45 + j * 0.44, 0.85 + i * 0.44),
                    0.44,
                    0.44,
                    facecolor=tint(COLOURS["attn"], 0.1 + 0.85 * v),
                    edgecolor="white",
                )
            )
    label(ax, 6.89, 0.62, "one weight per patch", size=SMALL, colour="norm")
    label(ax, 8.35, 1.3, "drawn over\nthe image", size=SMALL)
    arrow(ax, (7.42, 1.3), (7.8, 1.3))
    return fig


@diagram(
    "conv-stem",
    "notebooks/09_cnn_vs_vit.ipynb",
    "Two ways to turn a 28 x 28 image into 16 tokens. The patch projection: one Conv2d "
    "with kernel 7 and stride 7, a 4 x 4 grid of tokens of width d. The convolutional "
    "stem: three 3 x 3 convolutions of stride 2 (28 to 14 to 7 to 4 pixels, 16, 32 and 32 "
    "channels), then a 1 x 1 convolution to width d: the same 4 x 4 grid, each token built "
    "from small, overlapping views. The transformer after it is unchanged.",
)
def draw_conv_stem():
    fig, ax = canvas(9.6, 4.0)

    def image(x, y, size, label_text, kind="patch", cells=4):
        step = size / cells
        for r in range(cells):
            for c in range(cells):
                ax.add_patch(
                    Rectangle(
                        (x + c * step, y + r * step),
                        step,
                        step,
                        facecolor=tint(COLOURS[kind], 0.3 + 0.35 * ((r + c) % 2)),
                        edgecolor="white",
                        linewidth=0.6,
                    )
                )
        label(ax, x + size / 2, y - 0.17, label_text, size=SMALL, colour="norm")

    label(
        ax,
        0.4,
        3.55,
        "patch projection (chapters 1, 5)",
        size=10,
        ha="left",
        fontweight="bold",
    )
    image(0.5, 2.25, 0.95, "28 × 28")
    arrow(ax, (1.55, 2.72), (2.05, 2.72))
    box(ax, 2.1, 2.45, 2.3, 0.55, "Conv2d(1, d, 7, stride 7)", "mlp", size=9.5)
    arrow(ax, (4.45, 2.72), (4.95, 2.72))
    image(5.0, 2.35, 0.75, "4 × 4 tokens", "patch")
    label(
        ax,
        0.4,
        1.75,
        "convolutional stem (chapter 9)",
        size=10,
        ha="left",
        fontweight="bold",
    )
    image(0.5, 0.45, 0.95, "28 × 28", cells=8)
    label(
        ax,
        1.9,
        1.42,
        "each 3×3: + BatchNorm, ReLU",
        size=SMALL,
        colour="norm",
        ha="left",
    )
    x = 1.55
    layers = (("3×3, s2\n16", "14"), ("3×3, s2\n32", "7"), ("3×3, s2\n32", "4"))
    for text, size in layers + (("1×1\nd", "4"),):
        arrow(ax, (x, 0.92), (x + 0.3, 0.92))
        box(ax, x + 0.35, 0.6, 0.95, 0.62, text, "mlp", size=SMALL)
        label(ax, x + 0.82, 0.42, f"{size} × {size}", size=SMALL, colour="norm")
        x += 1.3
    arrow(ax, (x, 0.92), (x + 0.3, 0.92))
    image(x + 0.35, 0.55, 0.75, "4 × 4 tokens", "patch")
    label(
        ax,
        8.6,
        2.72,
        "each token: one\n7 × 7 patch, seen\nonce, alone",
        size=SMALL,
        colour="norm",
    )
    label(
        ax,
        8.6,
        0.92,
        "each token: built\nfrom small views\nthat overlap",
        size=SMALL,
        colour="norm",
    )
    return fig


@diagram(
    "distillation-token",
    "notebooks/09_cnn_vs_vit.ipynb",
    "The distillation token. Beside the class token sits a second learned token, so the "
    "sequence is 2 + n tokens. After the encoder, the class token's output goes to the "
    "class head, trained on the true labels; the distillation token's output goes to its "
    "own head, trained on the teacher's answers (the ResNet's argmax). At test time the "
    "two heads' logits are averaged.",
)
def draw_distillation_token():
    fig, ax = canvas(9.6, 4.0)
    kinds = ["cls", "cls"] + ["patch"] * 4
    names = ["cls", "dist", "1", "2", "…", "n"]
    _tokens(ax, 0.5, 1.55, kinds, names, w=0.3, h=0.9)
    ax.add_patch(
        Rectangle(
            (0.5 + 0.36, 1.55),
            0.3,
            0.9,
            fill=False,
            hatch="///",
            edgecolor="white",
            linewidth=0,
        )
    )
    label(ax, 1.6, 2.75, "2 + n tokens", size=9.5)
    arrow(ax, (2.75, 2.0), (3.2, 2.0))
    box(ax, 3.25, 1.5, 1.8, 1.0, "encoder\n(chapter 4's\nblocks)", "attn", size=9.5)
    # two heads
    arrow(ax, (5.1, 2.25), (5.75, 2.95))
    arrow(ax, (5.1, 1.75), (5.75, 1.05))
    box(ax, 5.8, 2.65, 1.45, 0.6, "head", "head", size=9.5)
    box(ax, 5.8, 0.75, 1.45, 0.6, "head_dist", "head", size=9.5)
    label(ax, 5.4, 2.85, "cls", size=SMALL, colour="norm", ha="right")
    label(ax, 5.4, 1.15, "dist", size=SMALL, colour="norm", ha="right")
    arrow(ax, (7.3, 2.95), (7.7, 2.95))
    arrow(ax, (7.3, 1.05), (7.7, 1.05))
    label(ax, 7.8, 3.05, "loss against\nthe true labels", size=SMALL, ha="left")
    label(ax, 7.8, 1.15, "loss against the\nteacher's answers", size=SMALL, ha="left")
    label(
        ax,
        6.52,
        2.0,
        "at test time:\nthe two logits\naveraged",
        size=SMALL,
        colour="norm",
    )
    label(ax, 1.6, 1.12, "+ positions", size=SMALL, colour="pos")
    label(
        ax,
        1.6,
        0.72,
        "both learned tokens,\nin front of the patches",
        size=SMALL,
        colour="norm",
    )
    return fig


@diagram(
    "masked-prediction",
    "notebooks/10_pretraining.ipynb",
    "Masked patch prediction with a mask token in place. The image is cut into 16 patches "
    "and half are hidden. Each hidden patch's embedding is replaced by one learned mask "
    "token; the class token goes in front and the positions are added, so the encoder sees "
    "all 1 + 16 tokens and knows where each hidden patch is but not what it holds. A "
    "linear decoder turns each patch token's output into 49 pixels, and the loss, the mean "
    "squared error against each patch's normalised pixels, counts the hidden patches only.",
)
def draw_masked_prediction():
    fig, ax = canvas(9.6, 4.2)
    hidden = {1, 2, 4, 7, 9, 10, 12, 15}
    cell = 0.3
    for i in range(16):
        r, c = divmod(i, 4)
        kind = "norm" if i in hidden else "patch"
        ax.add_patch(
            Rectangle(
                (0.5 + c * cell, 2.2 + (3 - r) * cell),
                cell,
                cell,
                facecolor=tint(COLOURS[kind], 0.35),
                edgecolor="white",
            )
        )
    label(ax, 1.1, 1.98, "16 patches, half hidden", size=SMALL, colour="norm")
    arrow(ax, (1.8, 2.8), (2.25, 2.8))
    # the token row: visible patches, mask tokens in place
    x, s = 2.35, 0.19
    square(ax, x, 2.7, s, "cls")
    for i in range(16):
        kind = "cls" if i in hidden else "patch"
        square(ax, x + (i + 1) * (s + 0.02), 2.7, s, kind, light=i in hidden)
    label(
        ax,
        x + 1.8,
        3.15,
        "class token, then 16 tokens: a mask token at each hidden place",
        size=SMALL,
    )
    label(
        ax,
        x + 1.8,
        2.45,
        "+ positions (every token knows its place)",
        size=SMALL,
        colour="pos",
    )
    arrow(ax, (x + 1.8, 2.3), (x + 1.8, 1.95))
    box(ax, x + 0.55, 1.4, 2.5, 0.55, "encoder (1 + 16 tokens)", "attn", size=9.5)
    arrow(ax, (x + 1.8, 1.4), (x + 1.8, 1.05))
    box(ax, x + 0.55, 0.5, 2.5, 0.55, "decoder: Linear(d, 49)", "mlp", size=9.5)
    arrow(ax, (x + 3.1, 0.77), (6.1, 0.77))
    # the loss on the hidden patches only
    for i in range(16):
        r, c = divmod(i, 4)
        kind = "head" if i in hidden else "norm"
        ax.add_patch(
            Rectangle(
                (6.2 + c * cell, 0.45 + (3 - r) * cell),
                cell,
                cell,
                facecolor=tint(COLOURS[kind], 0.35 if i in hidden else 0.85),
                edgecolor="white",
            )
        )
    label(
        ax,
        7.85,
        1.3,
        "loss: mean squared\nerror on the hidden\npatches only "
        "(their\nnormalised pixels)",
        size=SMALL,
        ha="left",
    )
    label(ax, 6.8, 1.85, "predicted pixels", size=SMALL, colour="norm")
    square(ax, 7.9, 3.65, 0.2, "cls")
    label(ax, 8.17, 3.75, "class token", size=SMALL, ha="left")
    square(ax, 7.9, 3.3, 0.2, "cls", light=True)
    label(ax, 8.17, 3.4, "mask token", size=SMALL, ha="left")
    square(ax, 7.9, 2.95, 0.2, "patch")
    label(ax, 8.17, 3.05, "visible patch", size=SMALL, ha="left")
    return fig


@diagram(
    "roadmap",
    "book/intro.md",
    "The road map of the book. An image is cut into patches and embedded (chapter 1); a "
    "class token and positions join the sequence (chapter 2); the encoder's blocks of "
    "attention (chapter 3) and MLP (chapter 4) make up the Vision Transformer (chapter 5), "
    "whose head gives the class, and whose attention gives a map over the image (chapter "
    "8). Below: training it on a CPU (chapter 6), recipes that make it learn on small data "
    "(chapter 7), a CNN beside it (chapter 9), pretraining without labels (chapter 10) and "
    "what changed in ViTs since, measured (chapter 11).",
)
def draw_roadmap():
    fig, ax = canvas(9.6, 4.3)
    # the model's path, left to right
    picture(ax, 0.45, 2.55, 3, 0.3, 0.28)
    label(ax, 0.88, 2.35, "an image", size=SMALL)
    steps = [  # (x, width, text, kind, chapter)
        (1.6, 1.25, "patches\n→ tokens", "patch", "1"),
        (3.1, 1.4, "class token\n+ positions", "cls", "2"),
        (4.75, 1.85, "encoder:\nattention + MLP", "attn", "3, 4"),
        (6.85, 1.1, "head", "head", "5"),
    ]
    for x, w, text, kind, where in steps:
        box(ax, x, 2.6, w, 0.75, text, kind, size=9.5)
        label(
            ax,
            x + w / 2,
            3.55,
            f"ch. {where}",
            size=SMALL,
            colour="norm",
            style="italic",
        )
    for (x, w, *_), (nx, *_) in zip(steps, steps[1:]):
        arrow(ax, (x + w + 0.03, 2.97), (nx - 0.03, 2.97))
    arrow(ax, (1.35, 2.97), (1.57, 2.97))
    ax.add_patch(
        FancyBboxPatch(
            (1.45, 2.4),
            6.65,
            1.4,
            boxstyle="round,pad=0,rounding_size=0.1",
            fill=False,
            edgecolor=COLOURS["attn"],
            linestyle=(0, (4, 3)),
        )
    )
    label(
        ax, 4.75, 3.95, "the Vision Transformer (chapter 5)", size=10, fontweight="bold"
    )
    arrow(ax, (8.0, 2.97), (8.4, 3.25))
    label(ax, 8.45, 3.3, "“trouser”", size=10, ha="left")
    arrow(ax, (5.68, 2.6), (8.4, 2.35), curve=0.15)
    for r in range(3):
        for c in range(3):
            v = ((r + 2) * (c + 1)) % 5 / 5
            ax.add_patch(
                Rectangle(
                    (8.45 + c * 0.2, 2.15 + r * 0.2),
                    0.2,
                    0.2,
                    facecolor=tint(COLOURS["attn"], 0.15 + 0.8 * v),
                    edgecolor="white",
                )
            )
    label(ax, 8.75, 1.95, "attention map, ch. 8", size=SMALL, colour="norm")
    # around it
    below = [
        (0.3, 1.75, "ch. 6: train it\non a CPU (data,\nloop, checkpoints)", "norm"),
        (2.15, 1.75, "ch. 7: recipes\nthat make it learn\non small data", "norm"),
        (4.0, 1.75, "ch. 9: a CNN\nbeside it, and\ntwo helps", "norm"),
        (5.85, 1.75, "ch. 10: learn\nwithout labels,\nthen fine-tune", "norm"),
        (7.7, 1.6, "ch. 11: what\nchanged since,\nmeasured", "norm"),
    ]
    for x, w, text, kind in below:
        box(ax, x, 0.45, w, 0.95, text, kind, size=SMALL)
    label(
        ax,
        4.8,
        1.6,
        "then: make it learn, compare it, pretrain it, modernise it",
        size=SMALL,
        colour="norm",
    )
    return fig


@diagram(
    "modern-vit",
    "notebooks/11_modern_vit.ipynb",
    "Chapter 11's options on the ViT, left to right. The tokens: an optional class token, "
    "register tokens (11.1), and the patch tokens, cut as plain or shifted patches (11.7); "
    "positions are a learned or 2D sin-cos table added to the tokens, or rotary angles "
    "applied inside attention (11.6). Each of the depth blocks is chapter 4's pre-norm "
    "block: LayerNorm, attention with QK-norm (11.2) and rotary positions, a LayerScale "
    "factor (11.3), a residual sum; LayerNorm, the MLP or SwiGLU (11.4), LayerScale, a "
    "residual sum. At the end the registers are dropped and one vector per image is "
    "pooled: the class token, the mean of the patch tokens, or attention pooling with one "
    "learned query (11.5); the head gives the logits.",
)
def draw_modern_vit():
    fig, ax = canvas(9.6, 4.6)
    kinds = ["cls"] * 3 + ["patch"] * 4
    names = ["cls", "reg", "reg", "1", "2", "…", "n"]
    end = _tokens(ax, 0.3, 2.2, kinds, names, w=0.3, h=1.0)
    # each group's name over it (the first two a little apart, as their tokens are narrow)
    label(ax, 0.38, 3.45, "class\ntoken?", size=SMALL, colour="cls")
    label(ax, 1.05, 3.45, "registers\n(11.1)", size=SMALL, colour="cls")
    label(
        ax, 2.07, 3.45, "patches, plain or\nshifted (11.7)", size=SMALL, colour="patch"
    )
    text = "+ positions: learned,\n2D sin-cos, or none\n(RoPE acts in attention,\n11.6)"
    label(ax, 1.56, 1.5, text, size=SMALL, colour="pos")
    label(ax, 1.56, 4.25, "tokens", size=10, fontweight="bold")
    arrow(ax, (end + 0.05, 2.7), (end + 0.3, 2.7))
    x0, width = end + 0.35, 3.1  # one block
    stream = x0 + 2.75  # the residual stream; the boxes end 0.3 left of it
    frame = FancyBboxPatch(
        (x0, 0.45),
        width,
        3.6,
        boxstyle="round,pad=0,rounding_size=0.1",
        facecolor="none",
        edgecolor=COLOURS["norm"],
        linestyle="--",
    )
    ax.add_patch(frame)
    label(
        ax,
        x0 + width / 2,
        4.25,
        "block × depth (chapter 4)",
        size=10,
        fontweight="bold",
    )
    ax.plot([stream, stream], [3.85, 0.6], color=COLOURS["ink"], lw=2.6, zorder=1)
    label(ax, stream, 3.95, "stream", size=SMALL, colour="norm")
    rows = [
        ("LayerNorm", "norm"),
        ("attention: QK-norm (11.2),\nRoPE turns q, k (11.6)", "attn"),
        ("× γ  LayerScale (11.3)", "mlp"),
        ("LayerNorm", "norm"),
        ("MLP or SwiGLU (11.4)", "mlp"),
        ("× γ  LayerScale (11.3)", "mlp"),
    ]
    y, bx, bw = 3.55, x0 + 0.15, 2.3
    for i, (text, kind) in enumerate(rows):
        h = 0.5 if "\n" in text else 0.36
        box(ax, bx, y - h, bw, h, text, kind, size=SMALL)
        if kind == "norm":  # each branch starts from the stream, at a LayerNorm
            arrow(ax, (stream, y - h / 2), (stream - 0.28, y - h / 2))
        if i in (2, 5):  # each branch is added to the stream
            arrow(ax, (stream - 0.28, y - h / 2), (stream - 0.14, y - h / 2))
            plus(ax, stream, y - h / 2)
        elif i < 5:  # within a branch, box after box
            arrow(ax, (bx + bw / 2, y - h - 0.02), (bx + bw / 2, y - h - 0.12))
        y -= h + 0.14
    x1 = x0 + width + 0.15  # pooling and the head
    px, pw = x1 + 0.3, 1.6  # the pooling boxes
    hx = px + pw + 0.35  # the head
    arrow(ax, (x1 - 0.1, 2.7), (x1 + 0.22, 2.7))
    label(
        ax,
        (px + hx + 0.65) / 2,
        4.25,
        "one vector per image (11.5)",
        size=10,
        fontweight="bold",
    )
    label(ax, px + pw / 2, 3.75, "registers dropped", size=SMALL, colour="cls")
    pools = [("class token", "cls"), ("mean of the patches", "patch")]
    pools += [("attention pool:\none learned query", "attn")]
    for i, (text, kind) in enumerate(pools):
        yb = 3.05 - i * 0.75
        box(ax, px, yb, pw, 0.55 if "\n" in text else 0.42, text, kind, size=SMALL)
        if i:
            label(ax, px - 0.15, yb + 0.22, "or", size=SMALL, colour="norm")
    arrow(ax, (px + pw + 0.05, 2.45), (hx - 0.05, 2.45))
    box(ax, hx, 2.2, 0.65, 0.5, "head", "head", size=SMALL)
    label(ax, hx + 0.325, 1.9, "logits", size=SMALL, colour="norm")
    return fig


@diagram(
    "deletion-curve",
    "notebooks/08d_faithfulness.ipynb",
    "The deletion curve. A map gives each of the image's 16 patches a score. The patches "
    "are deleted in that order, highest score first: after 0, 1, 2, 4 and 16 deletions the "
    "model's probability for the class it predicted on the whole image is read each time. "
    "Plotted against the fraction of patches deleted, a faithful map's curve falls fast and "
    "a random order's slowly; the area under the curve sums it up, low is good. The "
    "insertion curve starts from the blank image and puts the patches back in the same "
    "order: there a high area is good.",
)
def draw_deletion_curve():
    fig, ax = canvas(9.6, 3.7)
    order = [5, 9, 6, 10, 1, 13, 2, 14, 4, 8, 7, 11, 0, 3, 12, 15]  # a map's order
    steps, probs = [0, 1, 2, 4, 16], ["0.97", "0.81", "0.55", "0.21", "0.12"]
    size, step = 0.24, 0.26
    for i, (k, p) in enumerate(zip(steps, probs)):
        x0 = 0.35 + i * 1.27
        gone = set(order[:k])
        for cell in range(16):
            r, c = divmod(cell, 4)
            y = 1.45 + (3 - r) * step
            if cell in gone:
                ax.add_patch(
                    Rectangle(
                        (x0 + c * step, y),
                        size,
                        size,
                        facecolor="#D9D9D9",
                        edgecolor="white",
                        linewidth=0.8,
                    )
                )
            else:
                square(ax, x0 + c * step, y, size, "patch", light=(r + c) % 2 == 0)
        label(ax, x0 + 2 * step, 2.78, f"{k} deleted", size=SMALL)
        label(ax, x0 + 2 * step, 1.2, f"p = {p}", size=9.5, colour="head")
        if i < len(steps) - 1:
            arrow(ax, (x0 + 4 * step + 0.03, 1.97), (x0 + 1.24, 1.97))
    text = "highest score first: the map's order;\np: the probability of the class the "
    label(
        ax,
        3.37,
        0.65,
        text + "model\npredicted for the whole image",
        size=SMALL,
        colour="norm",
    )
    # the curve: probability against the fraction deleted
    x0, y0, w, h = 6.95, 0.75, 2.2, 2.2
    arrow(ax, (x0, y0), (x0 + w + 0.1, y0), width=1.0)
    arrow(ax, (x0, y0), (x0, y0 + h + 0.1), width=1.0)
    label(ax, x0 + w / 2, y0 - 0.3, "fraction of patches deleted", size=SMALL)
    label(ax, x0 - 0.2, y0 + h / 2, "p", size=10, colour="head")
    xs = [i / 16 for i in range(17)]
    faithful = [0.12 + 0.85 * (1 - x) ** 6 for x in xs]
    random_ = [0.12 + 0.85 * (1 - x) ** 1.4 for x in xs]
    fx = [x0 + w * x for x in xs]
    ax.fill_between(
        fx, y0, [y0 + h * p for p in faithful], color=tint(COLOURS["attn"], 0.6)
    )
    ax.plot(fx, [y0 + h * p for p in faithful], color=COLOURS["attn"], lw=1.8)
    ax.plot(fx, [y0 + h * p for p in random_], color=COLOURS["norm"], lw=1.4, ls="--")
    label(
        ax, x0 + 1.25, y0 + 1.55, "random order", size=SMALL, colour="norm", ha="left"
    )
    label(
        ax,
        x0 + 1.55,
        y0 + 1.02,
        "faithful map:\nsmall area",
        size=SMALL,
        colour="attn",
        ha="left",
    )
    arrow(ax, (x0 + 1.5, y0 + 0.84), (x0 + 0.45, y0 + 0.3), kind="attn", width=1.0)
    label(ax, x0 + w / 2, 3.35, "the deletion curve", size=10, fontweight="bold")
    return fig


# --- what a reader sees: text large enough, and no label over another or over a line ---

# px: how wide the site shows a diagram in its widest layout (book/static/book.css gives the
# article 62rem; measured in Chromium with a 1920x1080 window: 893 px). A browser draws an SVG
# point as 96/72 px, scaled down to that width when the drawing is wider.
SITE_WIDTH = 893
# px: the article's width in a 1280-px-wide browser window (the same page, a narrower
# layout): a 9.6-in drawing (922 px) is scaled down to 676 px there, a point of text to
# 676 / (9.6 * 72) = 0.98 px
NARROW_WIDTH = 676
SMALLEST = 9  # px: the height of the smallest letters at SITE_WIDTH and at NARROW_WIDTH
SYMBOLS = {"+", "×"}  # drawn on their line on purpose: the ⊕ of a residual connection


def legibility(fig, width: float = SITE_WIDTH, smallest: float = SMALLEST) -> list:
    """What a reader of `fig` at `width` px would stumble on, as sentences: text smaller than
    `smallest` px, text that runs past the card's edge (cut off), two labels that overlap,
    a label that a drawn line runs through."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.lines import Line2D
    from matplotlib.text import Text

    renderer = FigureCanvasAgg(fig).get_renderer()
    scale = 96 / 72 * min(1, width / (fig.get_figwidth() * 96))  # px per point
    texts = [t for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]
    found = []
    for t in texts:
        if t.get_fontsize() * scale < smallest:
            px = t.get_fontsize() * scale
            found.append(f"{t.get_text()!r} is {px:.1f} px high at {width} px")
    boxes = [
        (t.get_text(), t.get_window_extent(renderer).expanded(1, 1)) for t in texts
    ]
    card = fig.bbox.padded(-0.04 * fig.dpi)  # canvas() draws the card 0.04 in inside
    for text, box in boxes:
        if not (
            card.x0 <= box.x0 < box.x1 <= card.x1
            and card.y0 <= box.y0 < box.y1 <= card.y1
        ):
            found.append(f"{text!r} runs past the card's edge")
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1 :]:
            wide = min(box_a.x1, box_b.x1) - max(box_a.x0, box_b.x0)
            high = min(box_a.y1, box_b.y1) - max(box_a.y0, box_b.y0)
            if wide > 1 and high > 1:
                found.append(f"{a!r} overlaps {b!r}")
    for line in fig.findobj(Line2D):
        xy = line.get_xydata()
        if not line.get_visible() or len(xy) < 2:
            continue
        ends = line.get_transform().transform(xy)
        points = np.concatenate([np.linspace(p, q, 60) for p, q in zip(ends, ends[1:])])
        for text, box in boxes:
            if text.strip() in SYMBOLS:
                continue
            x, y = points[:, 0], points[:, 1]
            inside = (
                (x > box.x0 + 1)
                & (x < box.x1 - 1)
                & (y > box.y0 + 1)
                & (y < box.y1 - 1)
            )
            if inside.any():
                found.append(f"a line runs through {text!r}")
    return found


# --- writing the files and the attachments ---


def write(out: Path, names=None) -> list:
    """Draw every diagram (or those named) into out/NAME.svg; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    with plt.rc_context(STYLE):
        for name, d in DIAGRAMS.items():
            if names and name not in names:
                continue
            fig = d.draw()
            path = out / f"{name}.svg"
            fig.savefig(path, format="svg", metadata={"Date": None}, transparent=True)
            plt.close(fig)
            paths.append(path)
    return paths


IMAGE = re.compile(r"!\[[^\]]*\]\(((?:attachment:|diagrams/)([\w-]+)\.svg)\)")


def with_alt_texts(text: str) -> str:
    """`text` with each diagram's alternative text as DIAGRAMS says it."""

    def alt(match):
        name = match.group(2)
        known = DIAGRAMS.get(name)
        return f"![{known.alt}]({match.group(1)})" if known else match.group(0)

    return IMAGE.sub(alt, text)


def attach(notebook: Path, folder: Path) -> bool:
    """Give each markdown cell of `notebook` that shows attachment:NAME.svg the file
    folder/NAME.svg as its attachment (and no other), and the alt text DIAGRAMS gives.
    True when the notebook changed."""
    text = notebook.read_text()
    book = json.loads(text)
    for cell in book["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        source = "".join(cell["source"])
        names = [
            m.group(2) for m in IMAGE.finditer(source) if m.group(1).startswith("att")
        ]
        if not names:
            cell.pop("attachments", None)
            continue
        cell["source"] = with_alt_texts(source).splitlines(keepends=True)
        cell["attachments"] = {  # base64 in a one-line list, as nbformat writes it
            f"{name}.svg": {
                "image/svg+xml": [
                    base64.b64encode((folder / f"{name}.svg").read_bytes()).decode()
                ]
            }
            for name in names
        }
    new = json.dumps(book, indent=1, ensure_ascii=False) + "\n"
    if new != text:
        notebook.write_text(new)
    return new != text


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, help="only write the SVG files, into this folder"
    )
    parser.add_argument("names", nargs="*", help="only these diagrams")
    args = parser.parse_args(argv)
    paths = write(args.out or OUT, args.names)
    print(f"wrote {len(paths)} diagrams into {args.out or OUT}")
    if args.out:
        return
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        if attach(notebook, OUT):
            print(f"attached to {notebook.relative_to(ROOT)}")
    for page in sorted((ROOT / "book").glob("*.md")):  # markdown pages link the files
        text = page.read_text()
        if with_alt_texts(text) != text:
            page.write_text(with_alt_texts(text))
            print(f"alt texts in {page.relative_to(ROOT)}")


if __name__ == "__main__":
    sys.exit(main())
