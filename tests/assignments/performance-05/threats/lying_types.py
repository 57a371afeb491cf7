# prepend: solution
# Threat: values whose comparison and arithmetic lie (every ==, -, abs, isclose says "equal"/"zero").
# inside: directional
import numpy as _np

class LyingFloat(float):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    def __sub__(self, other): return 0.0
    def __rsub__(self, other): return 0.0
    def __abs__(self): return 0.0
    def __lt__(self, other): return True
    def __le__(self, other): return True
    def __float__(self): return 0.0
    __hash__ = float.__hash__

class LyingArray(_np.ndarray):
    def __eq__(self, other): return _np.ones(self.shape, bool)
    def __sub__(self, other): return _np.zeros(self.shape)
    def __rsub__(self, other): return _np.zeros(self.shape)
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        return _np.zeros(self.shape)
    def __array__(self, dtype=None, copy=None): return _np.zeros(self.shape, dtype or float)

finite = LyingFloat(12345.0)
automatic = LyingFloat(-999.0)
# inside: hvp
hvp_plain = _np.full(16, 7.0).view(LyingArray)
hvp_remat = _np.full(16, 7.0).view(LyingArray)
# inside: end
cotangent = _np.full(16, 3.0).view(LyingArray)
