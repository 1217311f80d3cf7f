"""Momentum correction (Lin et al., Deep Gradient Compression, ICLR 2018): SGD's momentum applied
on each worker before its gradient is compressed, instead of by the optimizer after.

With error feedback alone, a gradient that top-k holds back for some steps reaches the optimizer
late and then gets the momentum of the step it arrives in, not of the steps it missed; at 1 %
density that costs accuracy. Here each worker keeps a velocity per bucket, u = m * u + g, and
sends u (Nesterov: g + m * u); the gateways' error feedback then holds back velocities, and the
optimizer, run without momentum, applies their average. With a dense codec this is momentum SGD
exactly (the average of the velocities is the velocity of the average). With a sparse one (top-k,
random-k: the all-reduce names its codec) the velocity is also cleared wherever the result is not
zero, where some gateway sent it (DGC's momentum factor masking): what was sent does not come
again with the momentum of the steps that follow, on top of the residual the gateways hold back
elsewhere, which would push the weights on in a direction that is stale by then.

The velocity belongs to the parameters, not to the bucket: when DDP rebuilds its buckets (after
the first step, in the order the gradients came) each parameter's velocity moves with it into its
new bucket. It starts afresh after a step that the gateways skipped (a gradient that was not
finite) or that failed, as the gateways' error feedback does. A checkpoint can hold it
(velocity(), load_velocity(): gradgate/optimizer_momentum.py puts it in the optimizer's state).
"""

import weakref

import torch

_SIXTEEN_BIT = (torch.float16, torch.bfloat16)
# Codecs whose result is zero wherever no gateway sent the element (AllreduceInfo.codec).
SPARSE_CODECS = frozenset(("topk", "randomk"))


def checked_momentum(momentum, allow_zero=False):
    """`momentum` as a float; ValueError unless it is above 0 (or 0 with allow_zero) and below 1."""
    momentum = float(momentum)
    above_lowest = momentum >= 0.0 if allow_zero else momentum > 0.0
    if not (above_lowest and momentum < 1.0):
        raise ValueError(f"momentum {momentum!r}: use a value above 0 and below 1 (0: off)")
    return momentum


class MomentumCorrection:
    """The velocities of one HookState's buckets. `momentum` and `nesterov` may change between
    steps (reconfigured(), or at each bucket from an optimizer: follow()); momentum 0 keeps the
    velocities (each the last gradient) without changing what is sent."""

    def __init__(self, momentum, nesterov=False, allow_zero=False):
        self.momentum = checked_momentum(momentum, allow_zero)
        self.nesterov = bool(nesterov)
        self._velocities = {}  # bucket index -> velocity (float32 for 16-bit buckets)
        self._layouts = {}  # bucket index -> ids of its parameters, in bucket order
        # id(parameter) -> (weak reference to it, its part of the velocity of the bucket that
        # held it last); not a WeakKeyDictionary, which compares tensors with ==
        self._parts = {}
        self._source = None

    def follow(self, source):
        """Takes the momentum and nesterov from source(bucket index) at each bucket from now on:
        an optimizer's, which a scheduler may change between steps. source() returns None where
        momentum correction has ended there and then: the bucket goes as it is."""
        self._source = source

    def apply(self, index, grads, parameters=None):
        """Makes `grads` (bucket `index`, the flat gradients of `parameters` in bucket order, if
        known) what the bucket sends: the velocity m * velocity + grads (Nesterov: grads +
        m * that), in two passes over memory (three). Returns the velocity, for settle_velocity();
        None where follow()'s source ended momentum correction (`grads` untouched).
        """
        if self._source is not None:
            now = self._source(index)
            if now is None:
                return None
            self.momentum, self.nesterov = checked_momentum(now[0], allow_zero=True), bool(now[1])
        velocity = self._velocities.get(index)
        dtype = torch.float32 if grads.dtype in _SIXTEEN_BIT else grads.dtype
        layout = None if parameters is None else tuple(id(p) for p in parameters)
        if (velocity is None or velocity.shape != grads.shape or velocity.dtype != dtype
                or velocity.device != grads.device or layout != self._layouts.get(index)):
            velocity = self._carried_over(grads, dtype, parameters)
            self._velocities[index] = velocity
            self._layouts[index] = layout
        torch.add(grads, velocity, alpha=self.momentum, out=velocity)
        if self.nesterov:
            grads.add_(velocity, alpha=self.momentum)
        else:
            grads.copy_(velocity)
        return velocity

    def _carried_over(self, grads, dtype, parameters):
        """A new velocity for a bucket of this shape, holding its parameters' velocities from the
        buckets they were in before (zero for those that had none)."""
        velocity = torch.zeros(grads.shape, dtype=dtype, device=grads.device)
        if parameters is None:
            return velocity
        offset = 0
        for parameter in parameters:
            part = velocity[offset:offset + parameter.numel()]
            reference, earlier = self._parts.get(id(parameter), (None, None))
            if reference is not None and reference() is parameter:
                part.copy_(earlier)
            self._parts[id(parameter)] = (weakref.ref(parameter), part)
            offset += parameter.numel()
        return velocity

    def velocity(self, parameter):
        """`parameter`'s velocity, indexed as `parameter` (a view into its bucket's); None before
        its first bucket (unless loaded) or where its bucket's parameters were not given."""
        reference, part = self._parts.get(id(parameter), (None, None))
        if reference is None or reference() is not parameter:
            return None
        return as_parameter(part, parameter)

    @torch.no_grad()
    def load_velocity(self, parameter, velocity):
        """Makes `velocity` (shaped as `parameter`; None: zero) `parameter`'s velocity from its
        next bucket on, as a checkpoint's is."""
        current = self.velocity(parameter)
        if current is not None and velocity is not None:
            current.copy_(velocity)
        elif current is not None:
            current.zero_()
        elif velocity is not None:
            part = torch.empty(parameter.numel(), dtype=velocity.dtype, device=velocity.device)
            as_parameter(part, parameter).copy_(velocity)
            self._parts[id(parameter)] = (weakref.ref(parameter), part)

    def forget(self, index):
        """Clears bucket `index`'s velocity: its step could not start."""
        velocity = self._velocities.get(index)
        if velocity is not None:
            velocity.zero_()


def as_parameter(part, parameter):
    """`part`, `parameter`'s flat part of a bucket, indexed as `parameter`. DDP lays a gradient out
    in the bucket in the parameter's memory order where its elements fill their memory without
    gaps or overlap (channels_last too), else in index order."""
    dense = 1
    for size, stride in sorted(zip(parameter.shape, parameter.stride()), key=lambda d: d[1]):
        if size != 1 and stride != dense:
            return part.view(parameter.shape)
        dense *= size
    return part.as_strided(parameter.shape, parameter.stride())


def reconfigured(correction, momentum, nesterov=False):
    """What `correction` (a MomentumCorrection or None) becomes with `momentum` in [0, 1) and
    `nesterov`, its velocities kept; None for momentum None (off)."""
    if momentum is None:
        return None
    if correction is None:
        return MomentumCorrection(momentum, nesterov, allow_zero=True)
    correction.momentum = checked_momentum(momentum, allow_zero=True)
    correction.nesterov = bool(nesterov)
    return correction


def settle_velocity(velocity, step_codec, future):
    """The step's result (Future.then), with its velocity settled: cleared when the step failed or
    step_codec() is None (the gateways skipped it: a gradient that was not finite), and where the
    result is not zero when step_codec() names a sparse codec (momentum factor masking)."""
    try:
        result = future.value()
    except BaseException:
        velocity.zero_()
        raise
    used = step_codec()
    if used is None:
        velocity.zero_()
    elif used in SPARSE_CODECS:
        _clear_where_sent(velocity, result)
    return result


def _clear_where_sent(velocity, result):
    """Zeroes `velocity` where `result` is not zero: velocity - velocity * |sign(result)|, in float
    arithmetic (a bool mask and masked_fill_() take three times as long on the CPU)."""
    velocity.addcmul_(velocity, torch.sign(result).abs_(), value=-1.0)
