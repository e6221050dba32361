"""The reference model definitions: parameter counts and the v1.5 stride."""
import torch

from frameworks.pytorch import models
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
    net = models.ResNet()
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
    m = models.BertForPretraining(**model_cfg("bert_base", "tiny"))
    names = [n for n, _ in m.named_parameters()]
    assert not any("decoder" in n for n in names) and "word.weight" in names


def test_every_framework_gets_the_same_batch():
    """The adapters share frameworks/common/synthetic.py: NHWC is a transpose of NCHW."""
    from frameworks.common import synthetic
    cfg = model_cfg("resnet50", "tiny")
    (nchw,), (y1,) = synthetic.arrays(cfg, 2, 5)
    (nhwc,), (y2,) = synthetic.arrays(cfg, 2, 5, channels_last=True, int_dtype="int32")
    assert (nhwc == nchw.transpose(0, 2, 3, 1)).all() and (y1 == y2).all()
    (tokens, types, mask), (mlm, nsp) = synthetic.arrays(model_cfg("bert_base", "tiny"), 3, 1)
    assert tokens.shape == (3, 128) and types[:, 64:].all() and not types[:, :64].any()
    assert ((mlm == -100) | ((mlm >= 0) & (mlm < 1000))).all() and (mlm[:, 1] != -100).all()
