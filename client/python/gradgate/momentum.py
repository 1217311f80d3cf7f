"""Momentum correction (Lin et al., Deep Gradient Compression, ICLR 2018): SGD's momentum applied
on each worker before its gradient is compressed, instead of by the optimizer after.

With error feedback alone, a gradient that top-k holds back for some steps reaches the optimizer
late and then gets the momentum of the step it arrives in, not of the steps it missed; at 1 %
density that costs accuracy. Here each worker keeps a velocity per bucket, u = m * u + g, and
sends u; the gateways' error feedback then holds back velocities, and the optimizer, run without
momentum, applies their average. With a dense codec this is momentum SGD exactly (the average of
the velocities is the velocity of the average); with a sparse one every gradient still counts
1 / (1 - m) times in all, as with momentum SGD, only later where it was held back.

The velocity of a bucket starts afresh when DDP rebuilds its buckets (after the first step), and
after a step that the gateways skipped (a gradient that was not finite) or that failed, as the
gateways' error feedback does.
"""

import torch

_SIXTEEN_BIT = (torch.float16, torch.bfloat16)


class MomentumCorrection:
    """The velocities of one HookState's buckets."""

    def __init__(self, momentum):
        momentum = float(momentum)
        if not 0.0 < momentum < 1.0:
            raise ValueError(f"momentum {momentum!r}: use a value above 0 and below 1 (0: off)")
        self.momentum = momentum
        self._velocities = {}  # bucket index -> velocity (float32 for 16-bit buckets)

    def apply(self, index, grads):
        """Makes `grads` (bucket `index`) its velocity, m * velocity + grads, in two passes over
        memory; returns the velocity, for settle_velocity()."""
        velocity = self._velocities.get(index)
        dtype = torch.float32 if grads.dtype in _SIXTEEN_BIT else grads.dtype
        if (velocity is None or velocity.shape != grads.shape or velocity.dtype != dtype
                or velocity.device != grads.device):
            velocity = torch.zeros(grads.shape, dtype=dtype, device=grads.device)
            self._velocities[index] = velocity
        torch.add(grads, velocity, alpha=self.momentum, out=velocity)
        grads.copy_(velocity)
        return velocity

    def forget(self, index):
        """Clears bucket `index`'s velocity: its step could not start."""
        velocity = self._velocities.get(index)
        if velocity is not None:
            velocity.zero_()


def settle_velocity(velocity, skipped, future):
    """The step's result (Future.then); the velocity cleared when the step failed or skipped()
    says the gateways skipped it (a gradient that was not finite)."""
    try:
        result = future.value()
    except BaseException:
        velocity.zero_()
        raise
    if skipped():
        velocity.zero_()
    return result
