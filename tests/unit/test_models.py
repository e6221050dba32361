"""The reference model definitions: parameter counts and the v1.5 stride."""
import pytest
import torch

from frameworks.pytorch import models
from frameworks.pytorch.models import bert_base, resnet50
from tests.frameworks_env import model_cfg


def test_resnet50_v15_parameters():
    # torchvision's resnet50 (v1.5) has 25,557,032 parameters.
    assert models.parameter_count(model_cfg("resnet50", "full")) == 25_557_032


def test_bert_base_pretraining_parameters():
    # Hugging Face's BertForPreTraining(bert-base-uncased config): 110,106,428, decoder tied.
    assert models.parameter_count(model_cfg("bert_base", "full")) == 110_106_428


def test_tiny_sizes_are_small_and_pinned():
    assert models.parameter_count(model_cfg("resnet50", "tiny")) == 511_514
    assert models.parameter_count(model_cfg("bert_base", "tiny")) == 625_130


def test_v15_stride_sits_on_the_3x3_convolution():
    net = resnet50.ResNet()
    first_of_stage2 = net.blocks[3]
    assert first_of_stage2.conv1.stride == (1, 1) and first_of_stage2.conv2.stride == (2, 2)
    assert first_of_stage2.down[0].stride == (2, 2)


def test_tiny_models_train_one_step():
    for name in ("resnet50", "bert_base"):
        cfg = model_cfg(name, "tiny")
        model, loss_fn = models.build_model(cfg)
        opt = models.build_optimizer(cfg, model.parameters())
        x, y = models.synthetic_batch(cfg, 2, "cpu", 0)
        before = [p.detach().clone() for p in model.parameters()]
        loss = loss_fn(model(*x), *y)
        loss.backward()
        opt.step()
        assert torch.isfinite(loss)
        assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_decoder_is_tied_to_word_embeddings():
    m = bert_base.BertForPretraining(**model_cfg("bert_base", "tiny"))
    names = [n for n, _ in m.named_parameters()]
    assert not any("decoder" in n for n in names) and "word.weight" in names


def test_every_framework_gets_the_same_batch():
    """The adapters share frameworks/common/synthetic.py: NHWC is a transpose of NCHW."""
    from frameworks.common import synthetic
    cfg = model_cfg("resnet50", "tiny")
    (nchw,), (y1,) = synthetic.arrays(cfg, 2, 5)
    (nhwc,), (y2,) = synthetic.arrays(cfg, 2, 5, channels_last=True, int_dtype="int32")
    assert (nhwc == nchw.transpose(0, 2, 3, 1)).all() and (y1 == y2).all()
    (tokens, types, mask, positions), (mlm, nsp) = synthetic.arrays(model_cfg("bert_base", "tiny"), 3, 1)
    assert tokens.shape == (3, 128) and types[:, 64:].all() and not types[:, :64].any()
    assert ((mlm == -100) | ((mlm >= 0) & (mlm < 1000))).all() and (mlm[:, 1] != -100).all()
    assert positions.shape == mlm.shape == (3, 20)
    again = synthetic.arrays(model_cfg("bert_base", "tiny"), 3, 1, int_dtype="int32")
    assert all((a == b).all()
               for a, b in zip(again[0] + again[1], (tokens, types, mask, positions, mlm, nsp)))


@pytest.mark.parametrize("seq_len,mask_prob,p,count", [
    (128, 0.15, 20, 19),   # the smoke preset's and BERT-base's: round(0.15 * 128) = 19 of 20
    (64, 0.15, 20, 10),    # a shorter sequence: fewer masked, more padding
    (128, 0.5, 20, 20),    # never more than max_predictions_per_seq
    (8, 0.01, 3, 1),       # at least one
    (4, 1.0, 20, 3),       # at most the non-special positions 1..s-1
])
def test_masked_positions_are_distinct_sorted_and_padded(seq_len, mask_prob, p, count):
    """BERT's masked positions (synthetic.arrays): per row `count` distinct, sorted
    positions of 1..seq_len-1 with a label each, then padding to P: position 0, label -100."""
    from frameworks.common import synthetic
    cfg = dict(model_cfg("bert_base", "tiny"), seq_len=seq_len, mask_prob=mask_prob,
               max_predictions_per_seq=p)
    assert synthetic.mlm_count(cfg) == count
    (tokens, _, _, positions), (ids, nsp) = synthetic.arrays(cfg, 16, 3)
    assert positions.shape == ids.shape == (16, p) and positions.dtype == ids.dtype
    real, pad = positions[:, :count], positions[:, count:]
    assert ((real >= 1) & (real < seq_len)).all() and (pad == 0).all()
    assert (real[:, 1:] > real[:, :-1]).all()  # sorted, hence distinct
    assert ((ids[:, :count] >= 0) & (ids[:, :count] < cfg["vocab_size"])).all()
    assert (ids[:, count:] == -100).all()
    assert count == seq_len - 1 or len({tuple(r) for r in real}) > 1  # rows differ


def test_bert_mlm_head_runs_on_the_gathered_positions():
    """The MLM logits are (B, P, vocab): the head applied at the masked positions only,
    equal to the whole sequence's logits picked at those positions."""
    cfg = model_cfg("bert_base", "tiny")
    model, loss_fn = models.build_model(cfg)
    model.eval()  # no dropout: the two passes compare
    (tokens, types, mask, positions), labels = models.synthetic_batch(cfg, 3, "cpu", 0)
    with torch.no_grad():
        mlm, nsp = model(tokens, types, mask, positions)
        every = torch.arange(tokens.shape[1]).expand(3, -1)
        full, _ = model(tokens, types, mask, every)
    assert mlm.shape == (3, cfg["max_predictions_per_seq"], cfg["vocab_size"]) and nsp.shape == (3, 2)
    picked = full[torch.arange(3)[:, None], positions]
    assert torch.allclose(mlm, picked, atol=1e-5)
    assert torch.isfinite(loss_fn((mlm, nsp), *labels))
    # Parameter counts are unchanged by the gather (test_bert_base_pretraining_parameters).


@pytest.mark.parametrize("clip", [True, False])
def test_pytorch_clips_bert_gradients_by_global_norm(monkeypatch, clip):
    """clip_grad_norm_ at clip_norm after backward (and the GradScaler's unscale), in every
    step, when model.clip_grad is on; never when off (DLPerf's "W/O clip"). The record's
    environment says which."""
    from frameworks.common.distenv import DistEnv
    from frameworks.pytorch import worker
    from tests.runspecs import run_spec
    calls = []
    real = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_",
                        lambda params, norm, *a, **k: calls.append(norm) or real(params, norm, *a, **k))
    cfg = dict(model_cfg("bert_base", "tiny"), clip_grad=clip)
    spec = run_spec(model=cfg, precision="fp32", amp_dtype=None, compile=False,
                    batch_size=2, seed=0, device="cpu", rendezvous_timeout_s=30)
    session = worker.model_session(spec, DistEnv(0, 1, 0, 1, "127.0.0.1", 1))
    losses = [session.loss_value(session.step()) for _ in range(2)]
    assert all(map(torch.isfinite, map(torch.tensor, losses)))
    assert calls == ([1.0, 1.0] if clip else [])
    env = session.environment()
    assert (env["clip_grad"], env["clip_norm"], env["max_predictions_per_seq"]) == \
        ((True, 1.0, 20) if clip else (False, None, 20))
