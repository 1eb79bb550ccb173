"""Makes Triton 3.6's interpreter run under NumPy >= 2.4 (import before launching a kernel).

The interpreter holds every scalar (a program id, an integer argument) as a one-element 1-D
array and converts it with int(array) when it bounds a loop; NumPy 2.4 turned that deprecated
conversion into a TypeError, so any `for i in range(0, n)` with a runtime n fails. This replaces
the one conversion (the tensor's __index__) with one that reads the single element. Only the
interpreter is touched: compiled kernels never run this path.
"""

import triton.runtime.interpreter as _interpreter

_patch_lang_tensor = _interpreter._patch_lang_tensor


def _patch_lang_tensor_numpy24(tensor, scope):
    _patch_lang_tensor(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))


_interpreter._patch_lang_tensor = _patch_lang_tensor_numpy24
