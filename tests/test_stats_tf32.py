"""The float32-compute Gram of ClassStats runs with TF32 off on CUDA, whatever way the user turned TF32 on.

torch has three ways to set TF32 for cuBLAS (the legacy ``allow_tf32`` flag, the global
``set_float32_matmul_precision`` and the per-backend ``fp32_precision``), and once two of them are mixed it raises
on reads through the other (torch 2.11 on an H200 failed four CUDA tests that way). The flags can be set on a
CPU build too, so this runs everywhere: each case in a fresh interpreter (the mix is sticky process state).
"""

import subprocess
import sys
import textwrap

import pytest

SCRIPT = """
import torch
from nclab.stats._kernels import exact_float32_matmul
mm = torch.backends.cuda.matmul
{set_}

def effective():
    p = getattr(mm, "fp32_precision", "none")
    if p != "none":
        return p
    try:
        return "ieee" if torch.get_float32_matmul_precision() == "highest" else "tf32"
    except RuntimeError:
        return "tf32" if mm.allow_tf32 else "ieee"

before = effective()
with exact_float32_matmul():
    inside = effective()
print(before, inside, effective(), {read})
"""

CASES = {
    "legacy on": ("mm.allow_tf32 = True", "mm.allow_tf32", "tf32 ieee tf32 True"),
    "legacy off": ("mm.allow_tf32 = False", "mm.allow_tf32", "ieee ieee ieee False"),
    "global high": (
        'torch.set_float32_matmul_precision("high")',
        "torch.get_float32_matmul_precision()",
        "tf32 ieee tf32 high",
    ),
    "per-backend tf32": ('mm.fp32_precision = "tf32"', "mm.fp32_precision", "tf32 ieee tf32 tf32"),
    "untouched": ("pass", "torch.get_float32_matmul_precision()", "ieee ieee ieee highest"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_tf32_is_off_inside_and_the_users_own_api_still_reads_after(case):
    set_, read, expected = CASES[case]
    if "fp32_precision" in set_ and not hasattr(__import__("torch").backends.cuda.matmul, "fp32_precision"):
        pytest.skip("this torch has no per-backend fp32_precision (torch < 2.9)")
    code = textwrap.dedent(SCRIPT.format(set_=set_, read=read))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == expected.split()
