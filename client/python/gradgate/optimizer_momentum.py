"""Momentum correction with the momentum of the script's own SGD optimizer, so that the script
need not change: gradgate.torch.take_momentum(optimizer, model, state), or `python -m gradgate.run
--momentum-correction`, which takes over the optimizer of each DDP model at its first step.

The hook states read the optimizer's momentum and nesterov (its first group's) at each bucket, so
a scheduler that changes them between steps (OneCycleLR's cycle_momentum) is followed at once. At
each step of an optimizer taken over (torch.optim.SGD, whose step() is wrapped once):
- the weight decay of each parameter gets a velocity of its own, w = m * w + wd * p, added to the
  parameter's gradient (Nesterov: wd * p + m * w). It is kept here rather than sent: the
  parameters are the same on every rank, so is w, whatever the codec or the loss scale;
- the step runs with momentum, weight decay and nesterov at 0, and the groups get their values
  back after it, so that schedulers, state_dict() and the script see their own.
With a dense codec the update is then momentum SGD's, weight decay included, up to rounding.

An optimizer is taken over only where that is exactly momentum SGD: a torch.optim.SGD that
updates the models' parameters and nothing else, all with one momentum above 0 and one nesterov,
no dampening, not maximize. refusal() says why another cannot be. Nor where the script clips the
gradients (torch.nn.utils.clip_grad_norm_ or clip_grad_value_, watched from wrap_torch() on):
after the hook they hold the averaged velocities, up to 1 / (1 - m) times the gradient's norm, so
the clipping would no longer mean what the script says (an optimizer taken by take() warns).
Momentum correction ends, with a warning, where a bucket is sent twice without a step of the
optimizer in between (unless that step was skipped by the gateways or failed, and the script did
not apply it): gradients accumulated over backward passes outside DDP's no_sync(), where the
second pass's bucket holds the first one's average, which the velocities would count again, or
another optimizer that steps the model now; and where the momentum leaves [0, 1). Wherever it
ends, that step is still momentum SGD's, but under Nesterov: the optimizer, whose buffers then
hold the weight decay's velocities (_Taken.end()), adds the averaged velocity to them.

Checkpoints: the state_dict() of an optimizer taken over holds each parameter's velocity as
momentum SGD's `momentum_buffer` (the hook's, this rank's, plus its weight decay's), and its
load_state_dict() hands a checkpoint's buffers to the hook states, which apply the momentum to them
from the next backward pass on. A job resumed from per-rank checkpoints goes on exactly where it
stopped (with a dense codec), and checkpoints move both ways between runs with and without
gradgate. gradgate.run decides on an optimizer that loads a checkpoint's state as soon as the
optimizer and the hook state both exist (to take it over only; a clipping seen before the first
step still turns it off then), so that the first backward pass applies the momentum.
"""

import functools
import os
import sys
import warnings
import weakref

import torch

_taken = weakref.WeakKeyDictionary()  # optimizer -> _Taken, or None: decided, left as it is
_waiting = weakref.WeakKeyDictionary()  # HookState -> its model's parameters, until an optimizer
_clipped = weakref.WeakKeyDictionary()  # waiting HookState -> how the script clipped its gradients
_loaded = weakref.WeakSet()  # SGD optimizers not decided on that hold a checkpoint's state
_wrapped = False  # SGD.step and the clipping functions
_gradgate_step = None  # what wrap_torch() made SGD.step
_LIBRARY_DIRECTORIES = tuple(os.path.dirname(module.__file__) + os.sep
                             for module in (sys.modules[__name__], torch))


def refusal(optimizer, parameters):
    """Why momentum correction cannot take `optimizer`'s momentum for the model parameters
    `parameters` (whose gradients the hook states send), said of the optimizer ("has
    dampening"); None when it can."""
    if type(optimizer) is not torch.optim.SGD:
        return f"is {type(optimizer).__name__}, not torch.optim.SGD"
    groups = optimizer.param_groups
    held = {id(p) for group in groups for p in group["params"]}
    trained = {id(p) for p in parameters if p.requires_grad}  # frozen ones may be held or not
    if trained - held:
        return f"does not update {len(trained - held)} of the model's parameters"
    others = held - {id(p) for p in parameters}
    if others:
        return f"also updates {len(others)} parameters that are not the model's"
    if any(group["dampening"] for group in groups):
        return "has dampening"
    if any(group.get("maximize", False) for group in groups):
        return "maximizes"
    if len({group["momentum"] for group in groups}) > 1:
        return "has parameter groups with different momenta"
    if len({group["nesterov"] for group in groups}) > 1:
        return "has parameter groups that differ in nesterov"
    if groups[0]["momentum"] == 0:
        return "has no momentum"
    if groups[0]["momentum"] >= 1:
        return f"has momentum {groups[0]['momentum']}, not below 1"
    return None


def take(optimizer, state, parameters):
    """Moves `optimizer`'s momentum into `state` (a HookState) from now on, with the velocities
    of the momentum buffers it holds (a checkpoint's); ValueError with refusal()'s reason when it
    cannot. `parameters`: those of the state's model."""
    parameters = list(parameters)
    reason = refusal(optimizer, parameters)
    if reason is not None:
        raise ValueError(f"gradgate: momentum correction cannot take this optimizer's momentum: "
                         f"the optimizer {reason}")
    wrap_torch()
    taken = _taken.get(optimizer)
    if taken is not None and taken.states == [state]:
        return
    if taken is not None:
        raise ValueError("gradgate: momentum correction cannot take this optimizer's momentum: "
                         "it was taken for another hook state")
    if not _steps_through_gradgate(optimizer):
        raise ValueError("gradgate: momentum correction cannot take this optimizer's momentum: a "
                         "learning-rate scheduler made before it bound the optimizer's step(); "
                         "call take_momentum() before making the scheduler")
    state.set_momentum_correction(0.0)
    taken = _taken[optimizer] = _Taken(optimizer, [(state, parameters)], before_backward=True)
    taken.adopt_velocities(optimizer)


def _steps_through_gradgate(optimizer):
    """Whether optimizer.step() reaches gradgate's SGD.step: not where a learning-rate scheduler
    bound torch's own to the optimizer before wrap_torch() (its step counter, with_counter in
    torch 1.x, marked so); a step of the script's own is trusted."""
    step = optimizer.__dict__.get("step")
    if not any(getattr(step, mark, False) for mark in ("_with_counter", "_wrapped_by_lr_sched")):
        return True
    while step is not None and step is not _gradgate_step:
        step = getattr(step, "__wrapped__", None)
    return step is not None


def await_optimizer(state, parameters):
    """The first SGD step over `parameters` (a model's, whose gradients `state` sends) takes that
    optimizer's momentum, or warns why it cannot and turns momentum correction off for `state`.
    Until then `state` keeps its buckets' velocities at momentum 0 (it sends what it did), unless
    an optimizer that loaded a checkpoint's state takes it now."""
    wrap_torch()
    state.set_momentum_correction(0.0)
    _waiting[state] = list(parameters)
    for optimizer in list(_loaded):
        _decided_early(optimizer)


def _taken_for(optimizer):
    """The _Taken of `optimizer` at its step; decided at its first step for the states still
    waiting (confirmed there when decided before it: _decided_early())."""
    if optimizer not in _taken:
        return _decided(optimizer)
    taken = _taken[optimizer]
    if taken is not None and taken.unconfirmed:
        taken = _confirmed(optimizer, taken)
    if taken is not None and len(optimizer.param_groups) != taken.group_count:
        taken = _retaken(optimizer, taken)
    return taken


def _decided_early(optimizer):
    """`optimizer`, which holds a checkpoint's state, taken over before its first step where it
    can be, with the checkpoint's velocities."""
    taken = _decided(optimizer, early=True)
    if taken is not None:
        taken.adopt_velocities(optimizer)


def _decided(optimizer, early=False):
    """Takes `optimizer` over for the waiting states whose parameters it holds, or turns their
    momentum correction off with a warning that says why (None). `early` (before its first step):
    takes it over, to be confirmed at the first step, where it can be, and otherwise leaves the
    decision to the first step."""
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    states = [s for s, ps in list(_waiting.items()) if any(id(p) in held for p in ps)]
    if not states:
        if not early:
            _taken[optimizer] = None
            _loaded.discard(optimizer)
        return None
    parameters = [p for state in states for p in _waiting[state]]
    clipped = next((_clipped[state] for state in states if state in _clipped), None)
    reason = refusal(optimizer, parameters)
    if reason is not None:
        reason = f"its optimizer {reason}"
    elif clipped is not None:
        reason = _clipping_reason(clipped)
    if reason is not None and early:
        return None
    owners = [(state, _waiting.pop(state)) for state in states]
    taken = None
    if reason is None:
        taken = _Taken(optimizer, owners, before_backward=early, unconfirmed=early)
    else:
        _turn_off(states, "stays off", reason)
    _taken[optimizer] = taken
    _loaded.discard(optimizer)
    return taken


def _confirmed(optimizer, taken):
    """`taken`, taken over before the first step (_decided_early()), at that step: kept,
    or turned off where the script has clipped the gradients since (a warning says so)."""
    taken.unconfirmed = False
    if taken.clipped is None:
        return taken
    # The first step's velocities went out with the checkpoint's momentum, and the script clipped
    # their average; the optimizer, whose buffers are empty now, makes that its buffers: momentum
    # SGD's step where the clipping bound was not reached (Nesterov aside).
    _taken[optimizer] = None
    _turn_off(taken.states, "stays off", _clipping_reason(taken.clipped))
    return None


def _clipping_reason(name):
    return f"the script clips its gradients ({name}), which would then clip the averaged velocities"


def _retaken(optimizer, taken):
    """`optimizer` got a parameter group (add_param_group): taken over still, or, where refusal()
    now has a reason, left its momentum from this step on (a warning says why)."""
    reason = refusal(optimizer, taken.parameters)
    if reason is None:
        taken.group_count = len(optimizer.param_groups)
        return taken
    taken.end(optimizer, f"its optimizer now {reason}; the optimizer applies its momentum from "
              "this step on")
    return None


def _turn_off(states, verb, why):
    """Turns momentum correction off for `states` and warns "gradgate: momentum correction
    <verb> for <their models>: <why>"."""
    for state in states:
        state.set_momentum_correction(None)
    names = ", ".join(state.name_prefix for state in states)
    _warn(f"gradgate: momentum correction {verb} for {names}: {why}")


def _warn(message):
    """Warns `message` (a RuntimeWarning) at the script's line: the first caller outside gradgate
    and torch."""
    frame, level = sys._getframe(1), 2  # the caller's frame, and the stacklevel that names it
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_LIBRARY_DIRECTORIES):
        frame, level = frame.f_back, level + 1
    # Without a frame of the script (the hook on autograd's thread), the outermost one.
    warnings.warn(message, RuntimeWarning, stacklevel=level)


def wrap_torch():
    """Wraps torch.optim.SGD.step and the clipping functions of torch.nn.utils, once: before the
    script imports them (gradgate.run), for `from torch.nn.utils import clip_grad_norm_`."""
    global _wrapped
    if _wrapped:
        return
    _wrap_sgd_step()
    _wrap_sgd_state()
    for name in ("clip_grad_norm_", "clip_grad_value_"):
        clip = _noting_clipping(getattr(torch.nn.utils, name), name)
        setattr(torch.nn.utils, name, clip)
        setattr(torch.nn.utils.clip_grad, name, clip)
    _wrapped = True


def _noting_clipping(original, name):
    """`original` (torch.nn.utils.`name`), noting which hook states' parameters it clips."""

    @functools.wraps(original)
    def clip(parameters, *args, **kwargs):
        if isinstance(parameters, torch.Tensor):
            parameters = [parameters]
        parameters = list(parameters)  # an iterator is read once
        ids = {id(p) for p in parameters}
        for state, theirs in list(_waiting.items()):
            if any(id(p) in ids for p in theirs):
                _clipped[state] = name
        for taken in list(_taken.values()):
            if taken is not None and not taken.ids.isdisjoint(ids):
                taken.tell_clipping(name)
        return original(parameters, *args, **kwargs)

    return clip


def _wrap_sgd_step():
    original = torch.optim.SGD.step

    @functools.wraps(original)
    def step(self, closure=None):
        taken = _taken_for(self)
        if taken is None:
            return original(self, closure)
        taken.before_step(self)
        try:
            if closure is None:
                taken.add_to_gradients(self)
                return original(self)

            def closure_then_add():  # the closure's backward pass makes the gradients
                taken.hook_knows_momentum = True  # the hook states read the held momentum
                loss = closure()
                if _taken.get(self) is taken:
                    taken.add_to_gradients(self)
                else:  # it ended there: the optimizer steps with its own momentum
                    taken.after_step(self)
                return loss

            return original(self, closure_then_add)
        finally:
            taken.after_step(self)

    global _gradgate_step
    torch.optim.SGD.step = _gradgate_step = step


def _wrap_sgd_state():
    """SGD.state_dict() and load_state_dict(): the velocities of an optimizer taken over as its
    momentum buffers."""
    original_state_dict, original_load = torch.optim.SGD.state_dict, torch.optim.SGD.load_state_dict

    @functools.wraps(original_state_dict)
    def state_dict(self):
        packed = original_state_dict(self)
        taken = _taken.get(self)
        if taken is not None:
            taken.velocities_into(self, packed)
        return packed

    @functools.wraps(original_load)
    def load_state_dict(self, state_dict):
        original_load(self, state_dict)
        if self not in _taken:
            _loaded.add(self)
            _decided_early(self)
        elif _taken[self] is not None:
            _taken[self].adopt_velocities(self)

    torch.optim.SGD.state_dict = state_dict
    torch.optim.SGD.load_state_dict = load_state_dict


def _source(taken, state):
    """What the velocities of `state` follow: `taken`'s momentum for its buckets. It holds both
    weakly (`taken` holds `state`); once the optimizer and so `taken` are gone, momentum correction
    ends for `state`."""
    momentum_for, state = weakref.WeakMethod(taken.momentum_for), weakref.ref(state)

    def source(index):
        bound, hook_state = momentum_for(), state()
        if bound is not None and hook_state is not None:
            return bound(hook_state, index)
        if hook_state is not None:
            _turn_off([hook_state], "ends", "its optimizer is gone")
        return None

    return source


class _Taken:
    """An optimizer taken over: its hook states, which read its momentum at each bucket, and its
    weight decay's velocities."""

    def __init__(self, optimizer, owners, before_backward, unconfirmed=False):
        """owners: (hook state, the parameters of its model) pairs. `before_backward`: taken
        before the first backward pass (else at the first step, after it)."""
        self._optimizer = weakref.ref(optimizer)
        self.states = [state for state, _ in owners]
        self.parameters = [p for _, parameters in owners for p in parameters]
        self.ids = {id(p) for p in self.parameters}
        self._owners = {id(p): state for state, parameters in owners for p in parameters}
        self.group_count = len(optimizer.param_groups)  # to see add_param_group()
        self.unconfirmed = unconfirmed  # taken before the first step, confirmed there
        self.clipped = None  # how the script clipped the gradients before it was confirmed
        self._clipping_told = False
        self._decay_velocities = {}  # parameter -> velocity of its weight decay
        # Whether the hook states had the momentum when they sent the gradients now in the
        # parameters: not at a first step that takes the optimizer over (unless in a closure).
        self.hook_knows_momentum = before_backward
        self._uneven_told = False
        self._held = None  # during a step: the groups' momentum, weight decay and nesterov
        self._sent = set()  # (state, bucket index) sent since the last step
        self._not_applied_at_step = self._not_applied()
        for state in self.states:
            state.velocities.follow(_source(self, state))

    def _not_applied(self):
        """All-reduces so far that the gateways skipped (a gradient that was not finite) or that
        failed: no optimizer step follows them."""
        return sum(state.nonfinite_allreduces + state.failed_allreduces for state in self.states)

    def momentum_for(self, state, index):
        """The momentum and nesterov for bucket `index` of `state` now: the first group's
        (during the step: its held values). None where momentum correction ends: this bucket was
        sent before since the last step and no skipped or failed step explains it (the
        velocities would count the gradients accumulated so far again), or the momentum is out of
        [0, 1)."""
        optimizer = self._optimizer()
        key = (id(state), index)
        if key in self._sent and self._not_applied() != self._not_applied_at_step:
            self._sent.clear()  # a skipped or failed step, which the script did not apply
            self._not_applied_at_step = self._not_applied()
        if optimizer is None:
            _turn_off(self.states, "ends", "its optimizer is gone")
            return None
        values = self._held[0] if self._held is not None else optimizer.param_groups[0]
        if key in self._sent:
            reason = ("a bucket was sent twice without a step of its optimizer (the script "
                      "accumulates gradients over backward passes outside DDP's no_sync(), or "
                      "another optimizer steps the model now)")
        elif not 0 <= values["momentum"] < 1:
            reason = f"its optimizer's momentum is now {values['momentum']}, not in [0, 1)"
        else:
            self._sent.add(key)
            return values["momentum"], values["nesterov"]
        self.end(optimizer, f"{reason}; the optimizer applies its momentum from its next step on")
        return None

    def tell_clipping(self, name):
        """The script clips these gradients: once, what that now means (noted for the first step
        before it)."""
        if self.unconfirmed:
            self.clipped = name
        elif not self._clipping_told:
            self._clipping_told = True
            _warn(f"gradgate: {name} now clips the averaged velocities of momentum correction, "
                  "up to 1 / (1 - momentum) times the gradient's norm: scale its threshold by "
                  "that factor")

    def end(self, optimizer, why):
        """Ends the take-over, warning `why`: `optimizer` applies its own momentum again, its
        buffers the weight decay's velocities (the hook's went out in this step's gradients)."""
        _taken[optimizer] = None
        for parameter, velocity in self._decay_velocities.items():
            optimizer.state[parameter]["momentum_buffer"] = velocity
        _turn_off(self.states, "ends", why)

    def before_step(self, optimizer):
        """Zeroes the groups' momentum, weight decay and nesterov for the step, holding their
        values for add_to_gradients() and after_step()."""
        groups = optimizer.param_groups
        if len({group["momentum"] for group in groups}) > 1 and not self._uneven_told:
            self._uneven_told = True
            _warn("gradgate: the optimizer's parameter groups now have different momenta; "
                  f"momentum correction uses the first group's, {groups[0]['momentum']}")
        self._held = []
        for group in groups:
            self._held.append({key: group[key] for key in ("momentum", "weight_decay", "nesterov")})
            group.update(momentum=0, weight_decay=0, nesterov=False)
        self._sent.clear()
        self._not_applied_at_step = self._not_applied()

    def after_step(self, optimizer):
        """Gives the groups their values back (once)."""
        for group, values in zip(optimizer.param_groups, self._held or ()):
            group.update(values)
        self._held = None

    @torch.no_grad()
    def velocities_into(self, optimizer, packed):
        """Puts each parameter's velocity into `packed` (`optimizer`'s state_dict()) as momentum
        SGD's `momentum_buffer`: the hook's (this rank's) plus its weight decay's."""
        parameters = [p for group in optimizer.param_groups for p in group["params"]]
        for index, parameter in enumerate(parameters):
            owner = self._owners.get(id(parameter))  # none: added since, not the model's
            velocities = owner.velocities if owner is not None else None
            sent = velocities.velocity(parameter) if velocities is not None else None
            decay = self._decay_velocities.get(parameter)
            if sent is None and decay is None:
                continue
            buffer = (torch.zeros_like(parameter) if sent is None
                      else sent.to(parameter.dtype, copy=True))
            if decay is not None:
                buffer += decay
            packed["state"][index] = {**packed["state"].get(index, {}), "momentum_buffer": buffer}

    @torch.no_grad()
    def adopt_velocities(self, optimizer):
        """Moves the momentum buffers in `optimizer`'s state (a checkpoint's) into the hook
        states' velocities, the weight decay's included; the hook applies the momentum to them
        from the next backward pass on. Without buffers, every velocity starts afresh."""
        buffers = {}
        for group in optimizer.param_groups:
            for parameter in group["params"]:
                state = optimizer.state.get(parameter)
                if state and state.get("momentum_buffer") is not None:
                    buffers[id(parameter)] = state["momentum_buffer"]
                    state["momentum_buffer"] = None  # as the step leaves it, at momentum 0
        for parameter in self.parameters:
            velocities = self._owners[id(parameter)].velocities
            if velocities is not None:
                velocities.load_velocity(parameter, buffers.get(id(parameter)))
        self._decay_velocities.clear()

    @torch.no_grad()
    def add_to_gradients(self, optimizer):
        """Adds to the averaged gradients what the hook could not: the weight decay's velocities
        and, at a first step that took the optimizer over under Nesterov, the momentum the hook
        did not know yet."""
        groups, held = optimizer.param_groups, self._held
        momentum, nesterov = held[0]["momentum"], held[0]["nesterov"]
        if not self.hook_knows_momentum and nesterov:
            # The hook sent u = g, at momentum 0; Nesterov's first step is g + m * u.
            for group in groups:
                for parameter in group["params"]:
                    if parameter.grad is not None:
                        parameter.grad.mul_(1.0 + momentum)
        self.hook_knows_momentum = True
        for group, values in zip(groups, held):
            if values["weight_decay"]:
                parameters = [p for p in group["params"] if p.grad is not None]
                if parameters:
                    self._add_decay_velocities(parameters, values["weight_decay"], momentum,
                                               nesterov)

    def _add_decay_velocities(self, parameters, decay, momentum, nesterov):
        velocities = []
        for parameter in parameters:
            if parameter not in self._decay_velocities:
                self._decay_velocities[parameter] = torch.zeros_like(parameter)
            velocities.append(self._decay_velocities[parameter])
        torch._foreach_mul_(velocities, momentum)
        torch._foreach_add_(velocities, parameters, alpha=decay)
        grads = [p.grad for p in parameters]
        if nesterov:
            torch._foreach_add_(grads, parameters, alpha=decay)
            torch._foreach_add_(grads, velocities, alpha=momentum)
        else:
            torch._foreach_add_(grads, velocities)

