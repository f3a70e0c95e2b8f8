"""vitlib.checks: right answers pass, wrong ones get a verdict (and raise in strict mode)."""

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from vitlib import checks

ROOT = Path(__file__).resolve().parents[1]


def patchify(images, p):
    """Exercise 1.1's answer, written without the library (the check forbids vitlib's)."""
    b, c, height, width = images.shape
    x = images.reshape(b, c, height // p, p, width // p, p).permute(0, 2, 4, 1, 3, 5)
    return x.reshape(b, -1, c * p * p)


@pytest.fixture
def lenient(monkeypatch):
    monkeypatch.setenv("VITLIB_STRICT_CHECKS", "0")


def test_strict_mode_raises_with_the_verdict(monkeypatch, capsys):
    monkeypatch.setenv("VITLIB_STRICT_CHECKS", "1")
    with pytest.raises(checks.CheckFailed) as error:
        checks.check_token_count(lambda h, w, p: (h // p) * (w // p) + 1)
    assert "expected: 576" in str(error.value) and "got:      577" in str(error.value)


def test_wrong_shape_is_described(lenient, capsys):
    assert (
        checks.check_patchify_by_hand(lambda x, p: patchify(x, p).transpose(1, 2))
        is False
    )
    out = capsys.readouterr().out
    assert (
        "not yet" in out
        and "expected: a tensor of shape (2, 4, 48)" in out
        and "got:      a tensor of shape (2, 48, 4)" in out
    )


def test_unfinished_and_crashing_answers_get_a_sentence(lenient, capsys):
    def todo(images, patch_size):
        raise NotImplementedError

    assert checks.check_patchify_by_hand(todo) is False
    assert "nothing yet" in capsys.readouterr().out
    assert checks.check_pad_to_multiple(lambda x, p: x[0, 0, 99]) is False
    assert "IndexError" in capsys.readouterr().out
    assert (
        checks.check_token_count(
            lambda height, width, patch_size: todo(None, patch_size)
        )
        is False
    )
    assert "got:      nothing yet" in capsys.readouterr().out


def test_right_answers_pass(capsys):
    assert checks.check_patchify_by_hand(patchify)
    assert checks.check_token_count(lambda h, w, p: (h // p) * (w // p))
    assert checks.check_flatten_pattern(
        lambda: "b c (h p1) (w p2) -> b (h w) (p1 p2 c)",
        lambda w: w.permute(0, 2, 3, 1).flatten(1),
    )
    assert checks.check_pad_to_multiple(
        lambda x, p: F.pad(x, (0, -x.shape[-1] % p, 0, -x.shape[-2] % p))
    )
    assert capsys.readouterr().out.count("correct.") == 4


def test_flatten_pattern_catches_the_unpermuted_weight(lenient):
    assert not checks.check_flatten_pattern(
        "b c (h p1) (w p2) -> b (h w) (p1 p2 c)", lambda w: w.flatten(1)
    )
    assert not checks.check_flatten_pattern(
        "b c (h p1) (w p2) -> b (h w) (c p1 p2)", lambda w: w.flatten(1)
    )
    assert not checks.check_flatten_pattern("not a pattern", lambda w: w)

    def unfinished():
        raise NotImplementedError()

    assert not checks.check_flatten_pattern(unfinished, lambda w: w)


def test_compare_tolerance_and_types():
    a = torch.zeros(3)
    assert checks.compare(a + 1e-6, a)[0]
    assert not checks.compare(a + 1e-3, a)[0]
    assert not checks.compare(a.numpy(), a)[0]
    assert not checks.compare(torch.full((3,), float("nan")), a)[0]
    assert checks.compare(3, 3)[0] and not checks.compare(3, 4)[0]


def test_a_long_error_is_shown_in_full(lenient, capsys):
    message = "this error message is long on purpose, " * 4 + "and its end must be seen"

    def broken(images, patch_size):
        raise ValueError(message)

    checks.check_patchify_by_hand(broken)
    assert message in capsys.readouterr().out


def test_checks_leave_the_students_random_state_alone():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    checks.check_flatten_pattern(
        "b c (h p1) (w p2) -> b (h w) (p1 p2 c)",
        lambda w: w.permute(0, 2, 3, 1).flatten(1),
    )
    assert torch.equal(torch.random.get_rng_state(), before)


def test_compare_takes_tuples_part_by_part():
    a, b = torch.ones(2), torch.zeros(3)
    assert checks.compare((a, b), (a, b))[0]
    assert checks.compare([a, b], (a, b))[0]
    ok, expected, got = checks.compare((a, b + 1), (a, b))
    assert not ok and expected.startswith("part 1:")
    assert not checks.compare((a,), (a, b))[0]
    assert not checks.compare(a, (a, b))[0]


def test_each_check_lives_where_homes_says():
    import importlib

    for module, names in checks.HOMES.items():
        found = importlib.import_module(f"vitlib.checks.{module}")
        made = [n for n in found.__all__ if n.startswith("check_")]
        assert made == list(names), module
        # and the package finds each one there, for `checks.check_...`
        assert all(getattr(checks, n) is getattr(found, n) for n in names)
    assert set(dir(checks)) >= {n for names in checks.HOMES.values() for n in names}
    with pytest.raises(AttributeError):
        _ = checks.check_nothing_of_the_kind


def test_a_chapter_s_checks_load_without_the_training_code():
    code = (
        "import sys; from vitlib import checks; checks.check_masked_attention; "
        "loaded = sorted(m for m in sys.modules if m.startswith('vitlib.checks.')); "
        "assert loaded == ['vitlib.checks.attention'], loaded; "
        "assert 'vitlib.train' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_checks_are_named_by_exercise_in_exercise_order():
    import inspect
    import re

    import vitlib

    names = [n for names in checks.HOMES.values() for n in names]
    # every check says its exercise first in its docstring
    numbers = [
        re.match(r"Exercise (\d+)([a-z]?)\.(\d+)", inspect.getdoc(getattr(checks, n)))
        for n in names
    ]
    assert all(numbers), [n for n, m in zip(names, numbers) if not m]
    keys = [(int(m[1]), m[2], int(m[3])) for m in numbers]  # 6a.1 < 6b.1
    assert keys == sorted(keys), "the checks are not in exercise order"
    # no check shares a name with a function of the library
    library = {
        name
        for module in vars(vitlib).values()
        if inspect.ismodule(module) and module is not checks
        for name in getattr(module, "__all__", [])
    }
    assert not library & set(names), sorted(library & set(names))


def _unpatchify_bug(patches, patch_size, grid):
    return checks.helper("patches._unpatchify_grid_swapped")(patches, patch_size, grid)


def _as_student(mistake: str, dtype: str):
    """A mistake that the check compares as a tensor, returned as a student would: a
    NumPy array of `dtype`."""
    return lambda *case: checks.helper(mistake)(*case).numpy().astype(dtype)


_one_alpha, _canvas_without_alpha = "viz._blend_one_alpha", "live._canvas_without_alpha"

MISCONCEPTIONS = [  # (check, an answer that commits the mistake, words of its name)
    (checks.check_fixed_unpatchify, _unpatchify_bug, "grid order"),
    (
        checks.check_fixed_crop,
        checks.helper("positions._crop_first_rows"),
        "first rows of the sequence",
    ),
    (
        checks.check_masked_attention,
        checks.helper("attention._masked_softmax_over_queries"),
        "wrong axis",
    ),
    (
        checks.check_fixed_padded_attention,
        checks.helper("attention._padding_on_queries"),
        "along the queries",
    ),
    (
        checks.check_fixed_padded_attention,
        checks.helper("attention._padding_always_right"),
        "left=True ignored",
    ),
    (checks.check_share_kv, checks.helper("attention._kv_tiled"), "tiled"),
    (
        checks.check_fixed_layer_norm,
        checks.helper("block._layer_norm_over_batch"),
        "batch axis",
    ),
    (
        checks.check_fixed_normalise_hwc,
        checks.helper("data._normalise_channels_first"),
        "channels are last",
    ),
    (
        checks.check_fixed_confusion,
        checks.helper("loop._confusion_transposed"),
        "swapped",
    ),
    (
        checks.check_fixed_mixup,
        checks.helper("ablations._mixup_class_numbers"),
        "class numbers",
    ),
    (
        checks.check_smoothed_cross_entropy,
        checks.helper("ablations._smoothing_the_larger_class"),
        "larger class",
    ),
    (
        checks.check_smoothed_cross_entropy,
        checks.helper("ablations._smoothing_added"),
        "1 + eps",
    ),
    (
        checks.check_vitlib_key_to_hub,
        checks.helper("pretrained._hub_without_vit"),
        "prefix left out",
    ),
    (
        checks.check_fixed_detail_map,
        checks.helper("viz._detail_map_transposed"),
        "rows and columns swapped",
    ),
    (checks.check_blend_by_heat, _as_student(_one_alpha, "uint8"), "one alpha"),
    (
        checks.check_fixed_patch_centres,
        checks.helper("rollout._centres_by_height"),
        "grid's height",
    ),
    (
        checks.check_canvas_to_input,
        _as_student(_canvas_without_alpha, "float32"),
        "alpha ignored",
    ),
    (
        checks.check_fixed_occlude_block,
        checks.helper("live._block_from_negative_starts"),
        "negative start",
    ),
    (checks.check_shift_edge, checks.helper("cnn._shift_zeros"), "zeros"),
    (
        checks.check_fixed_rebuilt_filters,
        checks.helper("cnn._rebuilt_without_mean"),
        "mean filter",
    ),
    (
        checks.check_soft_distillation_loss,
        checks.helper("cnn._kl_mean_over_classes"),
        "over the classes",
    ),
    (
        checks.check_fixed_uneven_mse,
        checks.helper("pretrain.masked_mse"),
        "pooled over the batch",
    ),
    (
        checks.check_rope_3d,
        checks.helper("modern._rope_3d_frames_last"),
        "another order",
    ),
]


@pytest.mark.parametrize(
    "check, answer, words", MISCONCEPTIONS, ids=[m[0].__name__ for m in MISCONCEPTIONS]
)
def test_a_known_mistake_is_named_with_its_section(
    lenient, capsys, check, answer, words
):
    """Each mistake the book teaches, committed by an answer, is named in the verdict."""
    assert not check(answer)
    out = capsys.readouterr().out
    mistake = [line for line in out.splitlines() if "mistake:" in line]
    assert mistake and words in mistake[0] and "(see chapter" in mistake[0], out


def test_a_wrong_answer_that_is_no_known_mistake_names_none(lenient, capsys):
    assert not checks.check_fixed_padded_attention(
        lambda q, k, v, lengths, left=False: v * 2
    )
    assert "mistake:" not in capsys.readouterr().out


def test_an_answer_that_calls_the_library_function_it_replaces_fails(lenient, capsys):
    # the declared checks whose reference is the very library function the student rewrites
    import importlib

    checked = 0
    for names in checks.HOMES.values():
        for name in names:
            check = getattr(checks, name)
            reference = getattr(check, "reference", None)
            dotted = f"{getattr(reference, '__module__', '')}.{getattr(reference, '__name__', '')}"
            if dotted not in getattr(check, "forbid", ()):
                continue
            module, _, attr = dotted.rpartition(".")

            def answer(*case, module=module, attr=attr):
                return getattr(importlib.import_module(module), attr)(*case)

            assert not check(answer), name
            assert "write this one yourself" in capsys.readouterr().out, name
            checked += 1
    assert checked >= 3, checked  # the rest ask for variations the library lacks


# --- hints point to the section that teaches the idea, never to code

HINT = re.compile(r"hint\s*=\s*((?:\"(?:[^\"\\]|\\.)*\"\s*)+)")
POINTER = re.compile(r"^see (?:the start of )?chapter (\w+)(?:, ([^:]+?))?:")


def _hints() -> list:
    """(module, hint) of every hint a check gives, read from vitlib/checks' source."""
    found = []
    for path in sorted((ROOT / "vitlib" / "checks").glob("*.py")):
        for m in HINT.finditer(path.read_text()):
            found.append((path.stem, ast.literal_eval("(" + m.group(1) + ")")))
    return found


def _headings(chapter: str) -> list:
    """The section titles of a chapter's page ("3", "8d"), without their numbers (8d.2)."""
    number, letter = re.fullmatch(r"(\d+)([a-z]?)", chapter).groups()
    [path] = (ROOT / "notebooks").glob(f"{int(number):02d}{letter}_*.ipynb")
    cells = json.loads(path.read_text())["cells"]
    text = "\n".join(
        "".join(c["source"]) for c in cells if c["cell_type"] == "markdown"
    )
    return [
        re.sub(r"^#+ (\d+[a-z]?\.\d+ )?", "", line)
        for line in text.split("\n")
        if line.startswith("#")
    ]


def test_every_hint_names_a_section_that_exists():
    hints = _hints()
    assert len(hints) >= 40
    for module, hint in hints:
        pointer = POINTER.match(hint)
        assert pointer, (
            f"vitlib.checks.{module}: a hint names its section first: {hint!r}"
        )
        chapter, section = pointer.groups()
        if section:
            section = re.sub(r" \(.*\)$", "", section)  # "Many heads (version 2)"
            assert any(h.startswith(section) for h in _headings(chapter)), (
                module,
                hint,
            )


def _prediction_hints() -> list:
    """(page, hint) of every predict-then-run grade cell (compare_prediction) of the pages."""
    found = []
    for path in sorted((ROOT / "notebooks").glob("[0-9]*.ipynb")):
        for cell in json.loads(path.read_text())["cells"]:
            source = "".join(cell["source"])
            if cell["cell_type"] == "code" and "compare_prediction(" in source:
                for m in HINT.finditer(source):
                    found.append((path.stem, ast.literal_eval("(" + m.group(1) + ")")))
    return found


def test_every_prediction_hint_names_a_section_that_exists():
    hints = _prediction_hints()
    assert len(hints) >= 15
    for page, hint in hints:
        pointer = POINTER.match(hint)
        assert pointer, f"{page}: a hint names its section first: {hint!r}"
        chapter, section = pointer.groups()
        assert section and any(h.startswith(section) for h in _headings(chapter)), (
            page,
            hint,
        )


def test_a_hint_with_code_or_a_missing_section_is_found():
    assert not POINTER.match(
        "reshape to (b, n, h, d), then swap the token and head axes"
    )
    assert not any(h.startswith("Many hats") for h in _headings("3"))
    assert any(h.startswith("The deletion curve") for h in _headings("8d"))
