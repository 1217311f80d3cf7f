#!/usr/bin/python3
"""Tests of momentum correction's arithmetic in one process, without gateways: the velocities
(gradgate/momentum.py) move with their parameters when DDP rebuilds its buckets, and an SGD
optimizer taken over (gradgate/optimizer_momentum.py) steps exactly as momentum SGD does, weight
decay and Nesterov included, or is refused with the reason; its checkpoints hold the velocities as
momentum SGD's buffers. The end-to-end runs through gateways are in test_autohook.py and
test_hook.py.

Run: /usr/bin/python3 tests/python/test_momentum.py
"""

import gc
import io
import shutil
import subprocess
import sys
import tempfile
import types
import unittest
import warnings
import weakref
from pathlib import Path

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "client" / "python"))
from gradgate import optimizer_momentum  # noqa: E402

optimizer_momentum.wrap_torch()  # as gradgate.run does before the script's imports
from torch.nn.utils import clip_grad_norm_  # noqa: E402
from gradgate.momentum import MomentumCorrection, reconfigured  # noqa: E402


class OneWorkerHook:
    """What a HookState does with momentum correction, for one worker whose average is its own
    gradient: set_momentum_correction() and its properties as HookState's, and send() as its
    hook does to one bucket holding every parameter in `order`."""

    def __init__(self):
        self.name_prefix = "ddp"
        self.correction = None
        self.nonfinite_allreduces = 0
        self.failed_allreduces = 0
        self.sent_with = []  # the (momentum, nesterov) of each send(), None: sent as it is

    def set_momentum_correction(self, momentum, nesterov=False):
        self.correction = reconfigured(self.correction, momentum, nesterov)

    @property
    def velocities(self):
        return self.correction

    @property
    def momentum_correction(self):
        return None if self.correction is None else (self.correction.momentum,
                                                     self.correction.nesterov)

    def send(self, order):
        if self.correction is None:
            self.sent_with.append(None)
            return
        flat = torch.cat([p.grad.flatten() for p in order])
        velocity = self.correction.apply(0, flat, order)
        self.sent_with.append(None if velocity is None else self.momentum_correction)
        offset = 0
        for p in order:
            p.grad.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()


def model_pair(seed=3):
    """Two identical small models."""
    torch.manual_seed(seed)
    first = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    second = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    second.load_state_dict(first.state_dict())
    return first, second


def sgd(model, **options):
    """SGD with weight decay on the weights only, as scripts often do."""
    weights = [p for p in model.parameters() if p.dim() > 1]
    biases = [p for p in model.parameters() if p.dim() == 1]
    return torch.optim.SGD([{"params": weights, "weight_decay": 0.1}, {"params": biases}],
                           lr=0.05, **options)


def backward(model, step, zero_grad=True):
    generator = torch.Generator().manual_seed(step)
    x = torch.randn(8, 6, generator=generator)
    if zero_grad:
        model.zero_grad()
    model(x).square().mean().backward()


def run_steps(model, optimizer, hook, steps, first_step=0, clip=False):
    """Trains steps first_step.. of `model`; `hook` (None: none) sends the gradients of one bucket
    whose parameter order is reversed after its first step, as DDP's rebuild does; `clip` clips
    the gradients' norm to a bound they never reach."""
    order = list(model.parameters())
    for step in range(first_step, first_step + steps):
        backward(model, step)
        if hook is not None:
            hook.send(order if step == first_step else order[::-1])
        if clip:
            clip_grad_norm_(model.parameters(), 1e6)
        optimizer.step()


def saved_and_loaded(checkpoint):
    """`checkpoint` through torch.save and torch.load, as a file holds it."""
    file = io.BytesIO()
    torch.save(checkpoint, file)
    file.seek(0)
    return torch.load(file)


class TakenOptimizerTest(unittest.TestCase):
    def train_both(self, steps=12, momenta=None, closure=False, **options):
        """Trains a model with plain momentum SGD and its copy with the momentum taken over
        (the bucket's parameter order reversed after the first step, as DDP's rebuild does; the
        backward pass in a closure given to step() if `closure`); returns both models, the hook
        and the optimizer taken over."""
        reference, corrected = model_pair()
        plain, taken = sgd(reference, **options), sgd(corrected, **options)
        hook = OneWorkerHook()
        optimizer_momentum.take(taken, hook, list(corrected.parameters()))
        for step in range(steps):
            if momenta:
                for optimizer in (plain, taken):
                    for group in optimizer.param_groups:
                        group["momentum"] = momenta[step]
            backward(reference, step)
            plain.step()
            order = list(corrected.parameters())

            def backward_and_send(step=step, order=order if step == 0 else order[::-1]):
                backward(corrected, step)
                hook.send(order)

            if closure:
                taken.step(backward_and_send)
            else:
                backward_and_send()
                taken.step()
        return reference, corrected, hook, taken

    def assert_same_parameters(self, first, second):
        for a, b in zip(first.parameters(), second.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)

    def plain_and_taken(self):
        """A model and its plain momentum SGD, and its copy with the SGD taken over by a hook."""
        reference, model = model_pair()
        plain, optimizer = sgd(reference, momentum=0.9), sgd(model, momentum=0.9)
        hook = OneWorkerHook()
        optimizer_momentum.take(optimizer, hook, model.parameters())
        return reference, plain, model, optimizer, hook

    def test_steps_as_momentum_sgd_with_weight_decay(self):
        reference, corrected, hook, _ = self.train_both(momentum=0.9)
        self.assert_same_parameters(reference, corrected)
        self.assertEqual(hook.sent_with, [(0.9, False)] * 12)

    def test_steps_as_nesterov_momentum_sgd_from_the_first_step(self):
        reference, corrected, _, _ = self.train_both(momentum=0.9, nesterov=True)
        self.assert_same_parameters(reference, corrected)

    def test_a_step_with_a_closure_is_momentum_sgd_too(self):
        reference, corrected, _, _ = self.train_both(momentum=0.9, nesterov=True, closure=True)
        self.assert_same_parameters(reference, corrected)

    def test_a_momentum_the_script_changes_between_steps_is_the_next_steps(self):
        # As OneCycleLR's cycle_momentum does after each step.
        momenta = [0.5 + 0.04 * step for step in range(12)]
        reference, corrected, hook, taken = self.train_both(momentum=0.5, momenta=momenta)
        self.assert_same_parameters(reference, corrected)
        self.assertEqual([m for m, _ in hook.sent_with], momenta)
        self.assertEqual([g["momentum"] for g in taken.param_groups], [momenta[-1]] * 2)

    def test_another_optimizer_that_steps_the_model_ends_the_take_over(self):
        _, model = model_pair()
        optimizer, hook = sgd(model, momentum=0.9), OneWorkerHook()
        optimizer_momentum.take(optimizer, hook, model.parameters())
        run_steps(model, optimizer, hook, 2)
        adam = torch.optim.Adam(model.parameters())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run_steps(model, adam, hook, 3, first_step=2)
        self.assertEqual(hook.sent_with, [(0.9, False)] * 3 + [None] * 2)
        self.assertEqual([str(w.message) for w in caught],
                         ["gradgate: momentum correction ends for ddp: a bucket was sent twice "
                          "without a step of its optimizer (the script accumulates gradients over "
                          "backward passes outside DDP's no_sync(), or another optimizer steps the "
                          "model now); the optimizer applies its momentum from its next step on"])

    def test_a_step_of_two_all_reduced_backward_passes_ends_it_as_momentum_sgd(self):
        # As DDP does outside no_sync(), the second pass adds its gradient to the first one's
        # average, which the velocities would count again: momentum correction ends there, and
        # the optimizer goes on with its own momentum from the weight decay's velocities; also
        # where both passes run in a closure given to step().
        for in_closure in (False, True):
            reference, plain, model, optimizer, hook = self.plain_and_taken()
            run_steps(reference, plain, None, 3)
            run_steps(model, optimizer, hook, 3)
            backward(reference, 3)
            backward(reference, 4, zero_grad=False)
            plain.step()

            def two_passes(model=model, hook=hook):
                for step, zero_grad in ((3, True), (4, False)):
                    backward(model, step, zero_grad)
                    hook.send(list(model.parameters()))

            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                if in_closure:
                    optimizer.step(two_passes)
                else:
                    two_passes()
                    optimizer.step()
            self.assertEqual(len(caught), 1)
            self.assertIn("momentum correction ends for ddp: a bucket was sent twice",
                          str(caught[0].message))
            self.assertEqual(caught[0].filename, __file__)  # the script's line
            run_steps(reference, plain, None, 2, first_step=5)
            run_steps(model, optimizer, hook, 2, first_step=5)
            self.assertEqual(hook.sent_with[3:], [(0.9, False), None, None, None])
            self.assert_same_parameters(reference, model)

    def test_taking_an_optimizer_again_for_its_hook_state_keeps_the_velocities(self):
        reference, plain, model, optimizer, hook = self.plain_and_taken()
        run_steps(reference, plain, None, 6)
        run_steps(model, optimizer, hook, 3)
        optimizer_momentum.take(optimizer, hook, model.parameters())
        run_steps(model, optimizer, hook, 3, first_step=3)
        self.assert_same_parameters(reference, model)
        with self.assertRaisesRegex(ValueError, "it was taken for another hook state"):
            optimizer_momentum.take(optimizer, OneWorkerHook(), model.parameters())

    def test_a_momentum_set_out_of_range_ends_it(self):
        _, model = model_pair()
        optimizer, hook = sgd(model, momentum=0.9), OneWorkerHook()
        optimizer_momentum.take(optimizer, hook, model.parameters())
        run_steps(model, optimizer, hook, 2)
        for group in optimizer.param_groups:
            group["momentum"] = 1.0
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run_steps(model, optimizer, hook, 1, first_step=2)
        self.assertEqual([str(w.message) for w in caught],
                         ["gradgate: momentum correction ends for ddp: its optimizer's momentum is "
                          "now 1.0, not in [0, 1); the optimizer applies its momentum from its "
                          "next step on"])
        self.assertEqual(hook.sent_with, [(0.9, False)] * 2 + [None])

    def test_the_hook_state_goes_with_its_optimizer_without_the_cycle_collector(self):
        _, model = model_pair()
        optimizer, hook = sgd(model, momentum=0.9), OneWorkerHook()
        optimizer_momentum.take(optimizer, hook, model.parameters())
        run_steps(model, optimizer, hook, 2)
        hook_alive = weakref.ref(hook)
        gc.disable()
        try:
            del optimizer, hook
            self.assertIsNone(hook_alive())
        finally:
            gc.enable()

    def test_a_step_skipped_or_failed_is_no_step_sent_twice(self):
        for counter in ("nonfinite_allreduces", "failed_allreduces"):
            _, model = model_pair()
            optimizer, hook = sgd(model, momentum=0.9), OneWorkerHook()
            optimizer_momentum.take(optimizer, hook, model.parameters())
            run_steps(model, optimizer, hook, 2)
            backward(model, 2)
            hook.send(list(model.parameters()))
            # The gateways skipped it, or it failed; the script does not step the optimizer.
            setattr(hook, counter, 1)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                run_steps(model, optimizer, hook, 2, first_step=3)
            self.assertEqual(caught, [])
            self.assertEqual(hook.sent_with, [(0.9, False)] * 5)

    def test_the_step_runs_without_momentum_and_the_groups_get_theirs_back(self):
        _, model = model_pair()
        optimizer = sgd(model, momentum=0.8, nesterov=True)
        optimizer_momentum.take(optimizer, OneWorkerHook(), list(model.parameters()))
        inside = []

        def closure():
            inside.extend((g["momentum"], g["weight_decay"], g["nesterov"])
                          for g in optimizer.param_groups)
            backward(model, 0)

        optimizer.step(closure)
        self.assertEqual(inside, [(0, 0, False)] * 2)
        self.assertEqual([(g["momentum"], g["weight_decay"], g["nesterov"])
                          for g in optimizer.param_groups], [(0.8, 0.1, True), (0.8, 0.0, True)])
        self.assertEqual(sum(s.get("momentum_buffer") is not None
                             for s in optimizer.state.values()), 0)

    def test_groups_that_come_to_differ_in_momentum_are_told_once(self):
        _, model = model_pair()
        optimizer = sgd(model, momentum=0.9)
        hook = OneWorkerHook()
        optimizer_momentum.take(optimizer, hook, list(model.parameters()))
        optimizer.param_groups[1]["momentum"] = 0.5
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run_steps(model, optimizer, hook, 3)
        told = [str(w.message) for w in caught if "different momenta" in str(w.message)]
        self.assertEqual(len(told), 1, told)
        self.assertIn("uses the first group's, 0.9", told[0])
        self.assertEqual(hook.sent_with, [(0.9, False)] * 3)

    def test_a_parameter_group_added_later_keeps_or_ends_the_take_over(self):
        _, model = model_pair()
        parameters = list(model.parameters())
        parameters[0].requires_grad_(False)  # unfrozen later
        optimizer = torch.optim.SGD(parameters[1:], lr=0.05, momentum=0.9)
        hook = OneWorkerHook()
        optimizer_momentum.take(optimizer, hook, parameters)
        backward(model, 0)
        hook.send(parameters[1:])
        optimizer.step()
        # The model's own parameter, unfrozen: still momentum SGD over the model.
        parameters[0].requires_grad_(True)
        optimizer.add_param_group({"params": [parameters[0]]})
        backward(model, 1)
        hook.send(parameters)
        optimizer.step()
        self.assertEqual(hook.sent_with, [(0.9, False)] * 2)
        # A parameter that is not the model's: the optimizer takes its momentum back.
        extra = torch.nn.Parameter(torch.ones(2))
        optimizer.add_param_group({"params": [extra]})
        extra.grad = torch.ones(2)
        self.assertEqual(len(optimizer.state_dict()["state"]), 4)  # the model's velocities
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            backward(model, 2)
            optimizer.step()
        self.assertIsNone(hook.momentum_correction)
        self.assertEqual([str(w.message) for w in caught],
                         ["gradgate: momentum correction ends for ddp: its optimizer now also "
                          "updates 1 parameters that are not the model's; the optimizer applies "
                          "its momentum from this step on"])
        self.assertIsNotNone(optimizer.state[extra].get("momentum_buffer"))

    def test_clipping_the_gradients_of_a_taken_optimizer_is_told_once(self):
        _, model = model_pair()
        optimizer = sgd(model, momentum=0.9)
        optimizer_momentum.take(optimizer, OneWorkerHook(), list(model.parameters()))
        other = torch.nn.Linear(2, 2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for step in range(2):
                backward(model, step)
                for p in model.parameters():
                    p.grad.fill_(3.0)
                norm = clip_grad_norm_((p for p in model.parameters()), 1.0)  # an iterator
                torch.nn.utils.clip_grad_value_(other.parameters(), 1.0)
        told = [str(w.message) for w in caught if "clips the averaged velocities" in str(w.message)]
        self.assertEqual(told, ["gradgate: clip_grad_norm_ now clips the averaged velocities of "
                                "momentum correction, up to 1 / (1 - momentum) times the "
                                "gradient's norm: scale its threshold by that factor"])
        count = sum(p.numel() for p in model.parameters())
        self.assertAlmostEqual(norm.item(), 3.0 * count ** 0.5, places=3)  # still clipped
        clipped = torch.cat([p.grad.flatten() for p in model.parameters()])
        self.assertAlmostEqual(clipped.norm().item(), 1.0, places=4)


class CheckpointTest(unittest.TestCase):
    """An optimizer taken over keeps the velocities in its state_dict() as momentum SGD's
    buffers and takes them back from a checkpoint's."""

    def assert_same_parameters(self, first, second):
        for a, b in zip(first.parameters(), second.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)

    def plain_steps(self, steps, **options):
        """A model after `steps` steps of plain momentum SGD, and its optimizer."""
        model, _ = model_pair()
        optimizer = sgd(model, **options)
        run_steps(model, optimizer, None, steps)
        return model, optimizer

    def checkpoint(self, taken, **options):
        """The checkpoint of 4 steps, with momentum correction if `taken`, else plain."""
        if not taken:
            model, optimizer = self.plain_steps(4, **options)
        else:
            _, model = model_pair()
            optimizer, hook = sgd(model, **options), OneWorkerHook()
            optimizer_momentum.take(optimizer, hook, model.parameters())
            run_steps(model, optimizer, hook, 4)
        return saved_and_loaded({"model": model.state_dict(), "optimizer": optimizer.state_dict()})

    def resumed(self, checkpoint, how, steps=4, clip=False, **options):
        """A fresh model and optimizer from `checkpoint`, after `steps` more steps: "plain", or
        with momentum correction, the optimizer taken over by take() after ("load, take") or
        before ("take, load") it loads its state, or as gradgate.run does, by a hook that waits
        for its optimizer from before ("await, load") or after ("load, await") the load."""
        _, model = model_pair(seed=8)
        model.load_state_dict(checkpoint["model"])
        optimizer = sgd(model, **options)
        hook = None if how == "plain" else OneWorkerHook()
        if how == "take, load":
            optimizer_momentum.take(optimizer, hook, model.parameters())
        elif how == "await, load":
            optimizer_momentum.await_optimizer(hook, model.parameters())
        optimizer.load_state_dict(checkpoint["optimizer"])
        if how == "load, take":
            optimizer_momentum.take(optimizer, hook, model.parameters())
        elif how == "load, await":
            optimizer_momentum.await_optimizer(hook, model.parameters())
        run_steps(model, optimizer, hook, steps, first_step=4, clip=clip)
        return model, optimizer

    def test_the_state_dict_holds_momentum_sgds_buffers(self):
        for nesterov in (False, True):
            _, plain = self.plain_steps(4, momentum=0.9, nesterov=nesterov)
            saved = self.checkpoint(True, momentum=0.9, nesterov=nesterov)["optimizer"]
            expected = plain.state_dict()
            self.assertEqual(saved["param_groups"], expected["param_groups"])
            self.assertEqual(sorted(saved["state"]), [0, 1, 2, 3])
            for index, state in expected["state"].items():
                torch.testing.assert_close(saved["state"][index]["momentum_buffer"],
                                           state["momentum_buffer"], rtol=1e-5, atol=1e-6)

    def test_a_resumed_run_goes_on_as_momentum_sgd_from_either_kind_of_checkpoint(self):
        for nesterov in (False, True):
            reference, _ = self.plain_steps(8, momentum=0.9, nesterov=nesterov)
            for taken in (False, True):
                checkpoint = self.checkpoint(taken, momentum=0.9, nesterov=nesterov)
                for how in ("plain", "load, take", "take, load", "await, load", "load, await"):
                    with self.subTest(nesterov=nesterov, checkpoint_taken=taken, how=how):
                        model, optimizer = self.resumed(checkpoint, how, momentum=0.9,
                                                        nesterov=nesterov)
                        self.assert_same_parameters(reference, model)
                        buffers = [s.get("momentum_buffer") for s in optimizer.state.values()]
                        self.assertEqual(sum(b is not None for b in buffers),
                                         4 if how == "plain" else 0)

    def test_a_clipping_after_the_load_leaves_the_optimizer_its_momentum_from_the_first_step(self):
        # With a bound the gradients do not reach, so that the first step, whose averaged
        # velocities the script clips, is momentum SGD's.
        reference, plain = self.plain_steps(4, momentum=0.9)
        run_steps(reference, plain, None, 4, first_step=4, clip=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model, optimizer = self.resumed(self.checkpoint(True, momentum=0.9), "load, await",
                                            clip=True, momentum=0.9)
        self.assertEqual([str(w.message) for w in caught],
                         ["gradgate: momentum correction stays off for ddp: the script clips its "
                          "gradients (clip_grad_norm_), which would then clip the averaged "
                          "velocities"])
        self.assert_same_parameters(reference, model)
        self.assertEqual(sum(s["momentum_buffer"] is not None for s in optimizer.state.values()), 4)


def one_worker_comm_hook(hook, bucket):
    """A DDP comm hook that does what HookState does with momentum correction, for one worker."""
    if hook.correction is not None:
        hook.correction.apply(bucket.index(), bucket.buffer(), bucket.parameters())
    future = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


class DdpBucketTest(unittest.TestCase):
    """With DDP's own buckets, which hold a channels_last weight's gradient in memory order."""

    @classmethod
    def setUpClass(cls):
        directory = tempfile.mkdtemp()
        cls.addClassCleanup(shutil.rmtree, directory, True)
        dist.init_process_group("gloo", init_method=f"file://{directory}/rendezvous", rank=0,
                                world_size=1)
        cls.addClassCleanup(dist.destroy_process_group)

    def conv_model(self):
        torch.manual_seed(4)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.Flatten(),
                                    torch.nn.Linear(16, 2))
        return model.to(memory_format=torch.channels_last)

    def train(self, model, optimizer, steps, first_step=0):
        for step in range(first_step, first_step + steps):
            x = torch.randn(5, 3, 4, 4, generator=torch.Generator().manual_seed(step))
            optimizer.zero_grad()
            model(x.to(memory_format=torch.channels_last)).square().mean().backward()
            optimizer.step()

    def taken(self, checkpoint=None):
        """A DDP model whose SGD is taken over, from `checkpoint` if given."""
        model, hook = DistributedDataParallel(self.conv_model()), OneWorkerHook()
        model.register_comm_hook(hook, one_worker_comm_hook)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
        if checkpoint is not None:
            model.module.load_state_dict(checkpoint["model"])
            optimizer.load_state_dict(checkpoint["optimizer"])
        optimizer_momentum.take(optimizer, hook, model.parameters())
        return model, optimizer

    def test_checkpoints_hold_the_buffers_of_channels_last_weights_as_momentum_sgds(self):
        self.assertFalse(self.conv_model()[0].weight.is_contiguous())
        reference = self.conv_model()
        plain = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01)
        self.train(reference, plain, 4)
        model, optimizer = self.taken()
        self.train(model, optimizer, 4)
        saved = saved_and_loaded({"model": model.module.state_dict(),
                                  "optimizer": optimizer.state_dict()})
        for index, state in plain.state_dict()["state"].items():
            torch.testing.assert_close(saved["optimizer"]["state"][index]["momentum_buffer"],
                                       state["momentum_buffer"], rtol=1e-5, atol=1e-6)
        self.train(reference, plain, 4, first_step=4)
        model, optimizer = self.taken(saved)
        self.train(model, optimizer, 4, first_step=4)
        for a, b in zip(reference.parameters(), model.module.parameters()):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


class RefusalTest(unittest.TestCase):
    def setUp(self):
        _, self.model = model_pair()
        self.parameters = list(self.model.parameters())

    def reason(self, optimizer, parameters=None):
        return optimizer_momentum.refusal(optimizer, self.parameters if parameters is None
                                          else parameters)

    def test_plain_momentum_sgd_over_the_model_is_taken(self):
        self.assertIsNone(self.reason(sgd(self.model, momentum=0.9, nesterov=True)))

    def test_what_is_not_exactly_momentum_sgd_over_the_model_is_refused_with_the_reason(self):
        extra = torch.nn.Parameter(torch.zeros(3))
        cases = [
            (torch.optim.Adam(self.parameters), "is Adam, not torch.optim.SGD"),
            (torch.optim.SGD(self.parameters[:2], lr=0.1, momentum=0.9),
             "does not update 2 of the model's parameters"),
            (torch.optim.SGD(self.parameters + [extra], lr=0.1, momentum=0.9),
             "also updates 1 parameters that are not the model's"),
            (sgd(self.model, momentum=0.9, dampening=0.1), "has dampening"),
            (sgd(self.model, momentum=0.9, maximize=True), "maximizes"),
            (torch.optim.SGD([{"params": self.parameters[:2], "momentum": 0.5},
                              {"params": self.parameters[2:]}], lr=0.1, momentum=0.9),
             "has parameter groups with different momenta"),
            (torch.optim.SGD([{"params": self.parameters[:2], "nesterov": True},
                              {"params": self.parameters[2:]}], lr=0.1, momentum=0.9),
             "has parameter groups that differ in nesterov"),
            (sgd(self.model), "has no momentum"),
            (sgd(self.model, momentum=1.0), "has momentum 1.0, not below 1"),
        ]
        for optimizer, reason in cases:
            self.assertEqual(self.reason(optimizer), reason)
            with self.assertRaisesRegex(ValueError, "cannot take this optimizer's momentum: "
                                        "the optimizer " + reason):
                optimizer_momentum.take(optimizer, OneWorkerHook(), self.parameters)

    def test_an_optimizer_whose_scheduler_came_before_gradgate_is_refused(self):
        # A scheduler binds the optimizer's step() as SGD.step was then; in a fresh interpreter,
        # before anything of gradgate wrapped it, that is torch's own, which take() cannot reach.
        package = str(Path(optimizer_momentum.__file__).parents[1])
        script = (
            f"import sys; sys.path.insert(0, {package!r})\n"
            "import torch\n"
            "from gradgate import optimizer_momentum\n"
            "model = torch.nn.Linear(2, 2)\n"
            "optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)\n"
            "scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 10)\n"
            "optimizer_momentum.take(optimizer, None, model.parameters())\n"
        )
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              timeout=120)
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("ValueError: gradgate: momentum correction cannot take this optimizer's "
                      "momentum: a learning-rate scheduler made before it bound the optimizer's "
                      "step(); call take_momentum() before making the scheduler", done.stderr)

    def test_an_optimizer_with_a_step_of_the_scripts_own_is_taken(self):
        optimizer = sgd(self.model, momentum=0.9)
        optimizer.step = types.MethodType(lambda self, *a, **k: type(self).step(self, *a, **k),
                                          optimizer)
        optimizer_momentum.take(optimizer, OneWorkerHook(), self.parameters)

    def test_frozen_parameters_may_be_the_optimizers_or_not(self):
        self.parameters[0].requires_grad_(False)
        for held in (self.parameters[1:], self.parameters):
            optimizer = torch.optim.SGD(held, lr=0.1, momentum=0.9)
            self.assertIsNone(self.reason(optimizer))


class CarriedVelocityTest(unittest.TestCase):
    def test_each_parameters_velocity_moves_with_it_into_its_new_bucket(self):
        a, b, c = (torch.nn.Parameter(torch.zeros(n)) for n in (3, 2, 4))
        correction = MomentumCorrection(0.5)
        first = torch.tensor([1.0, 2, 3, 4, 5])  # a, then b
        correction.apply(0, first.clone(), [a, b])
        # Rebuilt: bucket 0 holds b and c, the same size as before; bucket 1 holds a.
        sent = torch.ones(6)
        velocity = correction.apply(0, sent, [b, c])
        self.assertEqual(velocity.tolist(), [0.5 * 4 + 1, 0.5 * 5 + 1, 1, 1, 1, 1])
        self.assertTrue(torch.equal(sent, velocity))
        velocity = correction.apply(1, torch.ones(3), [a])
        self.assertEqual(velocity.tolist(), [1.5, 2.0, 2.5])

    def test_nesterov_sends_the_gradient_plus_the_momentum_of_the_velocity(self):
        correction = MomentumCorrection(0.5, nesterov=True)
        correction.apply(0, torch.tensor([2.0]))
        sent = torch.tensor([1.0])
        velocity = correction.apply(0, sent)
        self.assertEqual((velocity.item(), sent.item()), (2.0, 2.0))  # u = 0.5*2+1, g + 0.5*u


if __name__ == "__main__":
    unittest.main()
