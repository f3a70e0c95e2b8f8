"""The wire between the grader and a submission's worker.

Frames are a 4-byte length and a body. The grader sends pickles: the worker trusts the grader.
The worker answers in JSON only, decoded here into a few plain types: the grader never
unpickles, imports or calls anything a submission sent. Tensors and arrays travel as bytes of a
known dtype; anything else comes back as an `Opaque` that equals nothing.
"""

import base64
import json
import math
import struct
import sys

LIMIT = (
    16 * 2**20
)  # the largest answer a worker may send: 16 MB (JSON grows ~20x in memory)
DEPTH = 16


class WireError(RuntimeError):
    """A frame the grader cannot read: cut short, too large or malformed."""


def write_frame(fd: int, body: bytes):
    import os

    data = struct.pack(">I", len(body)) + body
    while data:
        data = data[os.write(fd, data) :]


def read_frame(fd: int, limit: int = LIMIT) -> bytes:
    import os

    def exactly(n):
        parts, left = [], n
        while left:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                raise EOFError("the worker closed the wire")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    (size,) = struct.unpack(">I", exactly(4))
    if size > limit:
        raise WireError(f"an answer of {size} bytes, over the limit of {limit}")
    return exactly(size)


# --- worker side: any value -> JSON ---

TENSOR_DTYPES = {
    "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8",
    "uint8", "bool", "complex64", "complex128",
}  # fmt: skip


_SUBCLASS = "a {0.__qualname__}, a subclass: return a plain tensor or array"


def _subclass(value) -> bool:
    """A subclass of torch.Tensor or numpy.ndarray (whatever its module claims), or of a
    number or a string (an int whose __eq__ lies): its methods are the submission's code."""
    torch, np = sys.modules.get("torch"), sys.modules.get("numpy")
    if torch is not None and isinstance(value, torch.Tensor):
        return type(value) not in (torch.Tensor, torch.nn.Parameter)
    if np is not None and isinstance(value, np.ndarray):
        return type(value) is not np.ndarray
    if np is not None and isinstance(value, np.generic):
        return False  # numpy.float64 is a float: read as its .item()
    plain = (bool, int, float, str)  # containers are read item by item, while forbidden
    return isinstance(value, plain) and type(value) not in plain


def encode(value, depth: int = 0):
    """A JSON-able tree for `value` (run in the worker)."""
    import dataclasses

    if depth > DEPTH:
        return {"opaque": "nesting too deep", "repr": "..."}
    if _subclass(
        value
    ):  # it could run code when read: only plain tensors, arrays cross
        return {"opaque": "subclass", "repr": _SUBCLASS.format(type(value))}
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return {"int": str(int(value))}
    if isinstance(value, float):
        return {"float": repr(float(value))}
    kind = type(value).__module__.split(".")[0]
    if kind == "torch":
        import torch

        if isinstance(value, torch.Tensor):
            t = value.detach().cpu().contiguous()
            if t.is_sparse or t.layout != torch.strided:
                t = t.to_dense()
            dtype = str(t.dtype).removeprefix("torch.")
            raw = t.view(torch.int16) if dtype == "bfloat16" else t
            return {
                "tensor": dtype,
                "shape": list(t.shape),
                "data": base64.b64encode(raw.numpy().tobytes()).decode(),
            }
        if isinstance(value, torch.Size):
            return {"tuple": [encode(int(x)) for x in value]}
        if isinstance(value, torch.dtype):
            return {"opaque": "dtype", "repr": str(value)}
    if kind == "numpy":
        import numpy as np

        if isinstance(value, np.ndarray) and value.dtype.name in TENSOR_DTYPES:
            a = np.ascontiguousarray(value)
            return {
                "ndarray": a.dtype.name,
                "shape": list(a.shape),
                "data": base64.b64encode(a.tobytes()).decode(),
            }
        if isinstance(value, np.generic):
            return encode(value.item(), depth + 1)
    if isinstance(value, (list, tuple)):
        key = "list" if isinstance(value, list) else "tuple"
        return {key: [encode(v, depth + 1) for v in value]}
    if isinstance(value, dict):
        return {
            "dict": [
                [encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()
            ]
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {
            f.name: encode(getattr(value, f.name), depth + 1)
            for f in dataclasses.fields(value)
        }
        return {
            "dataclass": f"{type(value).__module__}.{type(value).__qualname__}",
            "fields": fields,
        }
    text = repr(value)
    return {"opaque": type(value).__name__, "repr": text[:200]}


def encode_error(error: BaseException) -> dict:
    return {
        "raised": type(error).__name__,
        "message": str(error)[:4000],
        "bases": [c.__name__ for c in type(error).__mro__[1:4]],
    }


# --- grader side: JSON -> plain values ---


class Opaque:
    """A value of a type the wire does not carry; it equals nothing."""

    def __init__(self, kind: str, text: str):
        self.kind, self.text = str(kind)[:80], str(text)[:200]

    def __repr__(self):
        return self.text

    def __eq__(self, other):
        return False

    __hash__ = None


DATACLASSES = {
    "ViTConfig"
}  # rebuilt as vitlib's, from plain fields; others come back opaque


def decode(tree, depth: int = 0):
    """The value a JSON tree from `encode` stands for (run in the grader)."""
    if depth > DEPTH + 2:
        raise WireError("nesting too deep")
    if tree is None or isinstance(tree, (bool, str)):
        return tree
    if not isinstance(tree, dict) or len(tree) > 3:
        raise WireError(f"not a value: {str(tree)[:80]}")
    if "int" in tree:
        text = tree["int"]
        if not isinstance(text, str) or len(text) > 4000:
            raise WireError("a whole number too long")
        return int(text)
    if "float" in tree:
        return float(tree["float"])  # 'nan' and 'inf' included
    if "list" in tree:
        return [decode(v, depth + 1) for v in tree["list"]]
    if "tuple" in tree:
        return tuple(decode(v, depth + 1) for v in tree["tuple"])
    if "dict" in tree:
        out = {}
        for k, v in tree["dict"]:
            key = decode(k, depth + 1)
            if not isinstance(key, (str, int, float, bool, tuple, type(None))):
                key = repr(key)
            out[key] = decode(v, depth + 1)
        return out
    if "tensor" in tree or "ndarray" in tree:
        return _array(tree)
    if "dataclass" in tree:
        fields = {str(k): decode(v, depth + 1) for k, v in dict(tree["fields"]).items()}
        # the notebook's own class (__main__.ViTConfig) or the library's: rebuilt from plain fields
        if str(tree["dataclass"]).rsplit(".", 1)[-1] in DATACLASSES:
            from vitlib.model import ViTConfig

            try:
                return ViTConfig(**fields)
            except (TypeError, ValueError) as error:
                return Opaque("ViTConfig", f"a ViTConfig that does not build: {error}")
        return Opaque(tree["dataclass"], f"a {tree['dataclass']} {fields}")
    if "opaque" in tree:
        return Opaque(tree["opaque"], tree.get("repr", ""))
    raise WireError(f"not a value: {str(tree)[:80]}")


def _array(tree):
    import numpy as np
    import torch

    dtype = tree.get("tensor") or tree.get("ndarray")
    if dtype not in TENSOR_DTYPES:
        raise WireError(f"an array of dtype {dtype!r}")
    shape = [int(s) for s in tree["shape"]]
    raw = base64.b64decode(tree["data"])
    np_dtype = np.int16 if dtype == "bfloat16" else np.dtype(dtype)
    count = math.prod(shape)
    if count * np.dtype(np_dtype).itemsize != len(raw):
        raise WireError("an array whose bytes do not match its shape")
    array = np.frombuffer(raw, dtype=np_dtype).reshape(shape).copy()
    if "ndarray" in tree:
        return array
    t = torch.from_numpy(array)
    return t.view(torch.bfloat16) if dtype == "bfloat16" else t


def dumps(tree) -> bytes:
    return json.dumps(tree).encode()


def loads(body: bytes):
    return json.loads(body)
