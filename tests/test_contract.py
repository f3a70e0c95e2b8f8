"""The model's contract (page 5a, as in timm), checked on every model class of the book with
configurations drawn here: forward = forward_head(forward_features), num_prefix_tokens,
no_weight_decay() and the optimizer's groups, resize, parameter_counts and the maps."""

import pytest
import torch
from torch import nn

from vitlib.cnn import STEM, HelpedViT, HelpedViTConfig, ResNet
from vitlib.loop import parameter_groups, unwrapped
from vitlib.model import ViT, ViTConfig, parameter_counts
from vitlib.modern import ModernViT, ModernViTConfig
from vitlib.pretrain import MaskedViT, MaskedViTConfig
from vitlib.pretrained import FastViT
from vitlib.rollout import attention_rollout, cls_map

SHAPE = dict(img_size=16, patch_size=4, in_channels=1, num_classes=5, dim=16, depth=2)
SHAPE |= dict(heads=2, mlp_dim=24)


def models():
    """(name, model): one of each class, in each of the forms that change its tokens."""
    yield "ViT", ViT(ViTConfig(**SHAPE))
    yield "ViT sincos mean", ViT(ViTConfig(**SHAPE, pos="sincos", pool="mean"))
    yield "FastViT", FastViT(ViTConfig(**SHAPE))
    for stem in ((), STEM[:2]):
        for distilled in (False, True):
            config = HelpedViTConfig(**SHAPE, stem=stem, distilled=distilled)
            yield f"HelpedViT stem={stem} distilled={distilled}", HelpedViT(config)
    yield "MaskedViT", MaskedViT(MaskedViTConfig(**SHAPE))
    modern = dict(registers=2, qk_norm=True, layer_scale=1e-5, mlp="swiglu")
    yield "ModernViT registers", ModernViT(ModernViTConfig(**SHAPE, **modern))
    modern = dict(registers=1, class_token=False, pool="map", pos="rope")
    modern |= dict(tokenizer="shifted", dim=32)
    yield "ModernViT rope map", ModernViT(ModernViTConfig(**{**SHAPE, **modern}))
    modern = dict(registers=3, class_token=False, pool="mean", pos_prefix=False)
    yield "ModernViT mean", ModernViT(ModernViTConfig(**SHAPE, **modern))
    yield "ResNet", ResNet(img_size=16, in_channels=1, num_classes=5, widths=(8, 16))


MODELS = dict(models())
VITS = [name for name, m in MODELS.items() if isinstance(m, ViT)]


def images(model, size=16):
    torch.manual_seed(0)
    return torch.randn(2, 1, size, size)


@pytest.mark.parametrize("name", MODELS)
def test_forward_is_forward_head_of_forward_features(name):
    model = MODELS[name].eval()
    x = images(model)
    with torch.no_grad():
        torch.testing.assert_close(
            model(x), model.forward_head(model.forward_features(x))
        )
        assert model(x).shape == (2, 5)


@pytest.mark.parametrize("name", MODELS)
def test_no_learned_token_or_position_decays(name):
    # the model's own parameters (not a layer's) are its tokens and positions: none decays,
    # and the optimizer's groups follow no_weight_decay(), not names it guesses
    model = MODELS[name]
    own = {n for n, _ in model.named_parameters(recurse=False)}
    assert own <= model.no_weight_decay()
    decay, no_decay = parameter_groups(model, 0.05)
    names = {id(p): n for n, p in model.named_parameters()}
    kept = {names[id(p)] for p in no_decay["params"]}
    decayed = {names[id(p)] for p in decay["params"]}
    assert own <= kept and not own & decayed
    assert all(model.get_parameter(n).ndim >= 2 for n in decayed)
    assert kept | decayed == set(names.values())


@pytest.mark.parametrize("wrap", ["compiled", "data parallel", "both"])
def test_a_wrapped_model_keeps_its_no_decay_group(wrap):
    # torch.compile and data parallelism wrap the model and prefix its parameters' names
    # (_orig_mod., module.): the groups must still follow the model's own no_weight_decay
    model = MODELS["HelpedViT stem=() distilled=True"]
    wrapped = {
        "compiled": lambda m: torch.compile(m),
        "data parallel": lambda m: torch.nn.DataParallel(m, device_ids=[]),
        "both": lambda m: torch.compile(torch.nn.DataParallel(m, device_ids=[])),
    }[wrap](model)
    assert unwrapped(wrapped) is model
    plain = [[id(p) for p in g["params"]] for g in parameter_groups(model, 0.05)]
    through = [[id(p) for p in g["params"]] for g in parameter_groups(wrapped, 0.05)]
    assert through == plain and id(model.dist_token) in plain[1]


def test_the_learned_tokens_of_each_model_are_named():
    assert MODELS["ViT"].no_weight_decay() == {"cls_token", "pos_embed"}
    assert MODELS["ViT sincos mean"].no_weight_decay() == {"cls_token"}
    distilled = MODELS["HelpedViT stem=() distilled=True"]
    assert distilled.no_weight_decay() == {"cls_token", "dist_token", "pos_embed"}
    assert "mask_token" in MODELS["MaskedViT"].no_weight_decay()
    assert MODELS["ResNet"].no_weight_decay() == set()
    registers = {"cls_token", "reg_token", "pos_embed"}
    assert MODELS["ModernViT registers"].no_weight_decay() == registers
    assert MODELS["ModernViT rope map"].no_weight_decay() == {
        "reg_token",
        "attn_pool.latent",
    }


@pytest.mark.parametrize("name", MODELS)
def test_prefix_tokens_are_the_tokens_before_the_patches(name):
    model = MODELS[name]
    if not isinstance(model, ViT):
        assert model.num_prefix_tokens == 0
        return
    tokens = model.forward_features(images(model))
    assert tokens.shape[1] == model.num_prefix_tokens + model.config.num_patches
    rows = (
        tokens.shape[1] - model.config.num_patches
    )  # the prefix tokens' own positions
    rows *= getattr(
        model.config, "pos_prefix", True
    )  # (none with timm's no_embed_class)
    if model.pos_embed is not None:  # (rotary positions have no table)
        assert model.pos_embed.shape[1] == model.config.num_patches + rows
    maps = model.attention_maps(images(model))
    grid = model.config.grid
    prefix = model.num_prefix_tokens
    assert cls_map(maps[-1], grid, prefix).shape == (2, model.config.heads, *grid)
    joint = attention_rollout(maps, discard_ratio=0.5, prefix=prefix)
    assert cls_map(joint, grid, prefix).shape == (2, *grid)


@pytest.mark.parametrize("name", VITS)
def test_resize_keeps_the_prefix_tokens_and_runs_at_the_new_size(name):
    model = MODELS[name]
    before = None if model.pos_embed is None else model.pos_embed.detach().clone()
    prefix = model.num_prefix_tokens
    rows = prefix * getattr(
        model.config, "pos_prefix", True
    )  # prefix rows of positions
    resized = type(model)(model.config)
    resized.load_state_dict(model.state_dict())
    resized.resize(24).eval()
    assert resized.forward_features(images(model, 24)).shape[1] == (
        prefix + resized.config.num_patches
    )
    if isinstance(model.pos_embed, nn.Parameter):  # the prefix rows are carried over
        torch.testing.assert_close(resized.pos_embed[:, :rows], before[:, :rows])
    assert resized(images(model, 24)).shape == (2, 5)


@pytest.mark.parametrize("name", VITS)
def test_parameter_counts_add_up_to_every_trainable_parameter(name):
    model = MODELS[name]
    counts = parameter_counts(model)
    assert counts["total"] == sum(p.numel() for p in model.parameters())
    assert counts["total"] == sum(v for k, v in counts.items() if k != "total")


def test_every_registered_name_builds_its_class():
    from vitlib.model import ARCHITECTURES, build_model

    assert {"vit", "vit-fast", "vit-stem", "cnn", "vit-distilled", "MaskedViT"} <= set(
        ARCHITECTURES
    )
    for name, entry in ARCHITECTURES.items():
        shape = dict(depth=1, dim=16, heads=2, mlp_dim=16)
        changes = {} if entry.model is ResNet else shape
        model = build_model(name, "fashion", **changes)
        assert type(model) is entry.model
        for field, value in entry.fields.items():
            assert getattr(model.config, field) == value
    with pytest.raises(ValueError, match="unknown model 'banana'"):
        build_model("banana")


@pytest.mark.parametrize("name", ["ViT", "FastViT"])
def test_the_live_export_sees_every_block_of_either_forward(name):
    from vitlib.live import WithAttention

    model = MODELS[name].eval()
    with torch.no_grad():
        logits, maps = WithAttention(model)(images(model))
        torch.testing.assert_close(logits, model(images(model)))
    assert maps.shape[0] == model.config.depth


def test_a_name_keeps_the_fields_it_sets():
    from vitlib.model import build_model

    with pytest.raises(ValueError, match="needs another name"):
        build_model("vit-distilled", "fashion", distilled=False)


def _writes_to_imported_names(source: str) -> list:
    """Lines where a module changes a name it imported from another vitlib module: `X |=`,
    `X[k] = ...`, `X.append(...)` and the other methods that change a list, dict or set."""
    import ast

    tree = ast.parse(source)
    imported = {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level >= 1
        for a in node.names
    }
    changes = {
        "append",
        "extend",
        "insert",
        "update",
        "setdefault",
        "pop",
        "add",
        "clear",
    }
    found = []
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.AugAssign):
            target = node.target
        elif isinstance(node, ast.Assign):
            target = next(
                (t for t in node.targets if isinstance(t, ast.Subscript)), None
            )
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in changes:
                target = node.func.value
        while isinstance(target, (ast.Subscript, ast.Attribute)):
            target = target.value
        if isinstance(target, ast.Name) and target.id in imported:
            found.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_no_module_rewrites_another_modules_registry():
    """Registries are filled through their owner's function (register_model,
    register_recipes, register_timm_converter), never written by another module."""
    from pathlib import Path

    import vitlib

    package = Path(vitlib.__file__).parent
    for path in sorted(package.rglob("*.py")):
        found = _writes_to_imported_names(path.read_text())
        assert not found, f"{path.relative_to(package)}: {found}"
    # the rule sees the old ways
    old = "from .loop import RECIPES\nfrom .pretrained import TO_TIMM, FROM_TIMM\n"
    old += "RECIPES |= {'a': 1}\nTO_TIMM[int] = str\nFROM_TIMM.append(len)\n"
    assert len(_writes_to_imported_names(old)) == 3


def test_a_registry_refuses_a_second_entry_under_one_name():
    from dataclasses import replace

    from vitlib.loop import RECIPES, register_recipes
    from vitlib.modern import ModernTimmConverter
    from vitlib.pretrained import TIMM_CONVERTERS, register_timm_converter

    register_recipes({"fashion-cpu": RECIPES["fashion-cpu"]})  # its page run again
    other = replace(RECIPES["fashion-cpu"], note="another recipe")
    with pytest.raises(ValueError, match="already registered"):
        register_recipes({"fashion-cpu": other})
    assert RECIPES["fashion-cpu"].note != "another recipe"
    with pytest.raises(TypeError, match="must be a Recipe"):
        register_recipes({"new": dict(epochs=1)})
    assert "new" not in RECIPES
    before = dict(TIMM_CONVERTERS)
    with pytest.raises(ValueError, match="already registered"):
        register_timm_converter(ModernTimmConverter())
    assert TIMM_CONVERTERS == before


# --- one ViT, built from parts (page 5a): every later model passes its parts to chapter 5's
# constructor, which builds each layer once; with every option off it is chapter 5's ViT


class Built:
    """Counts the modules constructed inside the block (nn.Module.__init__ calls)."""

    def __enter__(self):
        self.count, self._init = 0, nn.Module.__init__

        def counting(module, *args, **kwargs):
            self.count += 1
            self._init(module, *args, **kwargs)

        nn.Module.__init__ = counting
        return self

    def __exit__(self, *exc):
        nn.Module.__init__ = self._init


def random_options(rng) -> dict:
    """ModernViT options drawn at random, with the shapes they need."""
    options = dict(registers=rng.choice([0, 1, 3]), qk_norm=rng.random() < 0.5)
    options |= dict(
        layer_scale=rng.choice([0.0, 0.1]), mlp=rng.choice(["gelu", "swiglu"])
    )
    options |= dict(pos=rng.choice(["learned", "sincos", "rope", "none"]))
    options |= dict(tokenizer=rng.choice(["patch", "shifted"]), dim=32)
    options |= dict(pool=rng.choice(["cls", "mean", "map"]))
    options["class_token"] = options["pool"] == "cls" or rng.random() < 0.5
    options["pos_prefix"] = rng.random() < 0.5
    return options


def built(make):
    """(modules constructed, modules kept) building a model with make()."""
    with Built() as counter:
        model = make()
    return counter.count, len(list(model.modules()))


@pytest.mark.parametrize("seed", range(12))
def test_every_model_builds_each_module_once(seed):
    import random

    rng = random.Random(seed)
    config = ModernViTConfig(**{**SHAPE, **random_options(rng)})
    made, kept = built(lambda: ModernViT(config))
    assert made == kept, (config, made, kept)
    stem, distilled = rng.choice([(), STEM[:2]]), rng.random() < 0.5
    made, kept = built(
        lambda: HelpedViT(HelpedViTConfig(**SHAPE, stem=stem, distilled=distilled))
    )
    assert made == kept, (stem, distilled, made, kept)


def test_the_counter_sees_a_module_built_and_thrown_away():
    class Rebuilt(ViT):  # the old way: build chapter 5's model, then replace a part
        def __init__(self, config):
            super().__init__(config)
            self.norm = nn.LayerNorm(config.dim)

    made, kept = built(lambda: Rebuilt(ViTConfig(**SHAPE)))
    assert made == kept + 1


@pytest.mark.parametrize("options", [{}, dict(pos="sincos"), dict(pool="mean")])
def test_with_every_option_off_later_models_are_chapter_5s_tensor_for_tensor(options):
    torch.manual_seed(3)
    plain = ViT(ViTConfig(**SHAPE, **options))
    x = torch.randn(2, 1, 16, 16)
    later = [(ModernViT, ModernViTConfig), (HelpedViT, HelpedViTConfig)]
    for model_class, config_class in later:
        torch.manual_seed(3)
        model = model_class(config_class(**SHAPE, **options))
        ours, theirs = plain.state_dict(), model.state_dict()
        assert list(ours) == list(theirs), model_class.__name__
        assert all(torch.equal(ours[k], theirs[k]) for k in ours), model_class.__name__
        assert len(list(model.modules())) == len(list(plain.modules()))
        names = [name for name, _ in model.named_modules()]
        assert names == [name for name, _ in plain.named_modules()]
        with torch.no_grad():
            assert torch.equal(model.eval()(x), plain.eval()(x))


REGISTRIES = """
import importlib, json, sys
for name in sys.argv[1:]:
    importlib.import_module("vitlib." + name)
import vitlib
from vitlib.loop import RECIPES
from vitlib.model import ARCHITECTURES
from vitlib.pretrained import TIMM_CONVERTERS

def named(f):
    return f.__module__ + "." + f.__qualname__

print(json.dumps(dict(
    architectures={k: [named(a.model), named(a.config), repr(a.fields)]
                   for k, a in sorted(ARCHITECTURES.items())},
    recipes={k: repr(r) for k, r in sorted(RECIPES.items())},
    timm=[[named(k), named(type(c))] for k, c in TIMM_CONVERTERS.items()],
)))
"""


def _registries(order: list) -> dict:
    """The registries after importing vitlib's modules in `order`, then vitlib, in a fresh
    interpreter."""
    import json
    import subprocess
    import sys

    command = [sys.executable, "-c", REGISTRIES, *order]
    run = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


MODULES = ["model", "loop", "cnn", "modern", "pretrained", "pretrain", "train"]
MODULES += ["ablations", "checkpoint", "faithfulness", "rollout", "live"]


def test_the_registries_do_not_depend_on_the_order_of_imports():
    """Each registry holds the same entries whatever order the modules are imported in
    (each order in a fresh interpreter, the latest chapters first in one)."""
    import random

    orders = [MODULES[::-1]] + [random.Random(s).sample(MODULES, 12) for s in (1, 2)]
    seen = [_registries(order) for order in orders]
    assert seen[0]["architectures"] and seen[0]["recipes"] and len(seen[0]["timm"]) == 2
    assert all(s == seen[0] for s in seen[1:])


def test_import_vitlib_alone_registers_every_model():
    assert _registries([])["architectures"] == _registries(MODULES)["architectures"]


def test_the_library_never_imports_the_command_line():
    """Only `python -m vitlib.train` (and page 7's runner of command lines) loads the command
    line: no other module imports it, and `import vitlib` leaves it out."""
    import ast
    import subprocess
    import sys
    from pathlib import Path

    import vitlib

    package = Path(vitlib.__file__).parent
    importers = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module in (
                "train",
                "vitlib.train",
            ):
                importers.append(path.name)
            if isinstance(node, ast.Import) and any(
                a.name == "vitlib.train" for a in node.names
            ):
                importers.append(path.name)
    assert importers == ["ablations.py"], importers
    script = (
        "import sys, vitlib; print(sorted(m for m in sys.modules if 'argparse' in m"
    )
    script += " or m == 'vitlib.train'))"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert "vitlib.train" not in run.stdout


def test_one_name_builds_every_model_of_the_book():
    """vitlib.create_model takes every preset and every registered name, and no name is
    both; a name it does not know lists both kinds."""
    import vitlib
    from vitlib.model import ARCHITECTURES, PRESETS

    assert not set(PRESETS) & set(ARCHITECTURES)
    with torch.device("meta"):  # shapes only: ViT-L in no time and no memory
        for name in PRESETS:
            assert vitlib.create_model(name).config == PRESETS[name]
        for name, entry in ARCHITECTURES.items():
            model = vitlib.create_model(name)
            assert type(model) is entry.model, name
        deep = vitlib.create_model("vit-modern", preset="cifar", registers=2)
    assert deep.config.dim == PRESETS["cifar"].dim and deep.num_prefix_tokens == 3
    with pytest.raises(
        ValueError, match="a preset .*tiny.* or a registered model .*vit"
    ):
        vitlib.create_model("vit-huge")
