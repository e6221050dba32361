"""ResNet-50 v1.5 and BERT-base pretraining as Keras 3 models on the TensorFlow backend.

They match frameworks/pytorch/models/resnet50.py, bert_base.py layer for layer: the same parameter counts
(tests/integration/test_frameworks.py), the same losses, the same optimizer
settings. Differences that are only the framework's idiom:

- Images are NHWC (channels last), TensorFlow's native CPU layout; PyTorch's are NCHW.
  Paddings are explicit (ZeroPadding2D + "valid") where Keras' "same" would pad a
  strided convolution asymmetrically, so every output shape is PyTorch's.
- BatchNormalization uses PyTorch's epsilon 1e-5 and momentum 0.1 (Keras: 0.9).
- Initializers are PyTorch's defaults for the ResNet's convolutions and classifier
  and normal(0.02) for BERT, as the reference's; biases start at zero.
- Attention is written out (softmax(QK^T/sqrt(d)) V, dropout on the probabilities),
  which is what PyTorch's scaled_dot_product_attention computes.
- Under the 'mixed_bfloat16' policy the layers compute in bfloat16 and keep float32
  variables; logits are cast to float32 before the loss, as PyTorch's are.

Only `numpy`, `tensorflow` and `keras` are imported (keras is TensorFlow's own Keras 3).
"""
import math

import numpy as np
import tensorflow as tf
import keras
from keras import layers as kl
from frameworks.common import choices, synthetic
from contract import modes

# --- ResNet-50 v1.5 -------------------------------------------------------------

_BN = dict(epsilon=1e-5, momentum=0.9)  # PyTorch's BatchNorm2d defaults, in Keras terms


def _torch_default_init():
    """PyTorch's default for Conv2d and Linear weights: kaiming_uniform(a=sqrt(5)),
    i.e. uniform(+-1/sqrt(fan_in)), so initial losses are comparable across frameworks."""
    return keras.initializers.VarianceScaling(1.0 / 3.0, "fan_in", "uniform")


def _conv(filters, kernel, stride=1, padding="valid", name=None):
    return kl.Conv2D(filters, kernel, strides=stride, padding=padding, use_bias=False,
                     kernel_initializer=_torch_default_init(), name=name)


def _bottleneck(x, cin, width, stride, name):
    cout = width * 4
    identity = x
    if stride != 1 or cin != cout:
        identity = _conv(cout, 1, stride, name=f"{name}_down_conv")(x)
        identity = kl.BatchNormalization(**_BN, name=f"{name}_down_bn")(identity)
    x = _conv(width, 1, name=f"{name}_conv1")(x)
    x = kl.ReLU()(kl.BatchNormalization(**_BN, name=f"{name}_bn1")(x))
    # v1.5: the stride sits on the 3x3 convolution, not the first 1x1.
    if stride == 1:
        x = _conv(width, 3, padding="same", name=f"{name}_conv2")(x)
    else:
        x = _conv(width, 3, stride, name=f"{name}_conv2")(kl.ZeroPadding2D(1)(x))
    x = kl.ReLU()(kl.BatchNormalization(**_BN, name=f"{name}_bn2")(x))
    x = _conv(cout, 1, name=f"{name}_conv3")(x)
    x = kl.BatchNormalization(**_BN, name=f"{name}_bn3")(x)
    return kl.ReLU()(kl.Add()([x, identity]))


def resnet(layers=(3, 4, 6, 3), width=64, image_size=224, num_classes=1000, **_):
    """The functional Keras model: NHWC images in, float logits out."""
    inputs = keras.Input((image_size, image_size, 3), name="images")
    x = _conv(width, 7, 2, name="stem_conv")(kl.ZeroPadding2D(3)(inputs))
    x = kl.ReLU()(kl.BatchNormalization(**_BN, name="stem_bn")(x))
    # Zero padding equals PyTorch's -inf padding here: the input is post-ReLU (>= 0).
    x = kl.MaxPooling2D(3, 2)(kl.ZeroPadding2D(1)(x))
    cin = width
    for stage, n in enumerate(layers):
        w = width * 2 ** stage
        for i in range(n):
            x = _bottleneck(x, cin, w, 2 if (i == 0 and stage > 0) else 1, f"s{stage}b{i}")
            cin = w * 4
    x = kl.GlobalAveragePooling2D()(x)
    logits = kl.Dense(num_classes, kernel_initializer=_torch_default_init(), name="fc")(x)
    return keras.Model(inputs, logits, name="resnet50_v1_5")


def resnet_loss(logits, labels):
    return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=tf.cast(logits, tf.float32)))


# --- BERT pretraining (MLM + NSP) -------------------------------------------------

def _init():
    return keras.initializers.RandomNormal(stddev=0.02)


def _dense(units, name):
    return kl.Dense(units, kernel_initializer=_init(), bias_initializer="zeros", name=name)


def _gelu(x):
    return tf.nn.gelu(x, approximate=False)  # erf GELU, as PyTorch's F.gelu


class EncoderLayer(kl.Layer):
    """Post-LayerNorm transformer encoder layer with a fused QKV projection."""

    def __init__(self, hidden, heads, intermediate, dropout, **kw):
        super().__init__(**kw)
        self.hidden, self.heads = hidden, heads
        self.qkv = _dense(3 * hidden, "qkv")
        self.out = _dense(hidden, "out")
        self.ln1 = kl.LayerNormalization(epsilon=1e-12, name="ln1")
        self.ff1 = _dense(intermediate, "ff1")
        self.ff2 = _dense(hidden, "ff2")
        self.ln2 = kl.LayerNormalization(epsilon=1e-12, name="ln2")
        self.attn_drop = kl.Dropout(dropout)
        self.drop1 = kl.Dropout(dropout)
        self.drop2 = kl.Dropout(dropout)

    def call(self, x, key_bias, training=False):
        b, s = tf.shape(x)[0], tf.shape(x)[1]
        d = self.hidden // self.heads
        qkv = tf.transpose(tf.reshape(self.qkv(x), [b, s, 3, self.heads, d]), [2, 0, 3, 1, 4])
        q, k, v = qkv[0], qkv[1], qkv[2]
        scores = tf.matmul(q, k, transpose_b=True) * tf.cast(1.0 / math.sqrt(d), q.dtype)
        probs = tf.nn.softmax(scores + tf.cast(key_bias, scores.dtype), axis=-1)
        a = tf.matmul(self.attn_drop(probs, training=training), v)
        a = tf.reshape(tf.transpose(a, [0, 2, 1, 3]), [b, s, self.hidden])
        x = self.ln1(x + self.drop1(self.out(a), training=training))
        y = self.ff2(_gelu(self.ff1(x)))
        return self.ln2(x + self.drop2(y, training=training))


class BertForPretraining(keras.Model):
    def __init__(self, vocab_size=30522, hidden=768, layers=12, heads=12, intermediate=3072,
                 max_position=512, type_vocab=2, dropout=0.1, **_):
        super().__init__(name="bert_for_pretraining")
        self.word = kl.Embedding(vocab_size, hidden, embeddings_initializer=_init(), name="word")
        self.position = kl.Embedding(max_position, hidden, embeddings_initializer=_init(),
                                    name="position")
        self.token_type = kl.Embedding(type_vocab, hidden, embeddings_initializer=_init(),
                                      name="token_type")
        self.emb_ln = kl.LayerNormalization(epsilon=1e-12, name="emb_ln")
        self.emb_drop = kl.Dropout(dropout)
        self.encoder = [EncoderLayer(hidden, heads, intermediate, dropout, name=f"layer_{i}")
                        for i in range(layers)]
        self.pooler = _dense(hidden, "pooler")
        self.mlm_dense = _dense(hidden, "mlm_dense")
        self.mlm_ln = kl.LayerNormalization(epsilon=1e-12, name="mlm_ln")
        # The decoder's weight is tied to `word` (the embedding matrix is reused below).
        self.mlm_bias = self.add_weight(shape=(vocab_size,), initializer="zeros", name="mlm_bias")
        self.nsp = _dense(2, "nsp")

    def call(self, inputs, training=False):
        tokens, token_types, attention_mask, masked_positions = inputs
        s = tf.shape(tokens)[1]
        x = (self.word(tokens) + self.position(tf.range(s)[None]) + self.token_type(token_types))
        x = self.emb_drop(self.emb_ln(x), training=training)
        # Additive key mask broadcast over heads and queries: 0 = attend, -1e9 = masked.
        key_bias = (1.0 - tf.cast(attention_mask, tf.float32))[:, None, None, :] * -1e9
        for layer in self.encoder:
            x = layer(x, key_bias, training=training)
        pooled = tf.tanh(self.pooler(x[:, 0]))
        # The MLM head runs on the masked positions only (B, P, H), as the references'.
        x = tf.gather(x, masked_positions, axis=1, batch_dims=1)
        h = self.mlm_ln(_gelu(self.mlm_dense(x)))
        word = tf.cast(self.word.embeddings, h.dtype)
        mlm_logits = tf.matmul(h, word, transpose_b=True) + tf.cast(self.mlm_bias, h.dtype)
        return mlm_logits, self.nsp(pooled)


def bert_loss(outputs, mlm_labels, nsp_labels):
    """MLM cross-entropy over the gathered predictions (label -100: padding) plus NSP."""
    mlm_logits, nsp_logits = outputs
    valid = tf.not_equal(mlm_labels, -100)
    ce = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.where(valid, mlm_labels, tf.zeros_like(mlm_labels)),
        logits=tf.cast(mlm_logits, tf.float32))
    weights = tf.cast(valid, tf.float32)
    mlm = tf.reduce_sum(ce * weights) / tf.maximum(tf.reduce_sum(weights), 1.0)
    nsp = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=nsp_labels, logits=tf.cast(nsp_logits, tf.float32)))
    return mlm + nsp


# --- synthetic batches ----------------------------------------------------------

def synthetic_batch(model_cfg, batch_size, seed):
    """Fixed random inputs as numpy arrays, NHWC (the worker places them on its device once)."""
    return synthetic.arrays(model_cfg, batch_size, seed, channels_last=True, int_dtype="int32")


def bert(**model_cfg):
    """BertForPretraining with its variables made (a forward pass on one sample)."""
    model = BertForPretraining(**model_cfg)
    inputs, _ = synthetic_batch(model_cfg, 1, 0)
    model(tuple(tf.constant(a) for a in inputs), training=False)
    return model


MODELS = {"resnet50": (resnet, resnet_loss), "bert_base": (bert, bert_loss)}


def build_model(model_cfg):
    """(model, loss_fn); the model is built (its variables exist) on return."""
    model, loss = choices.pick(MODELS, model_cfg["name"], "model")
    return model(**model_cfg), loss


def clipped(optimizer_cls):
    """`optimizer_cls` that clips the gradients by their global norm after they are summed
    over the replicas (the reference's order: TF Model Garden's BERT all-reduces, then
    `tf.clip_by_global_norm`, then applies). Keras 3's own `global_clipnorm` clips each
    replica's gradient before that sum, which is not the global norm with several ranks;
    `_all_reduce_sum_gradients` is where Keras' TensorFlow optimizer sums them."""
    class Clipped(optimizer_cls):
        def __init__(self, *args, clip_norm, **kwargs):
            super().__init__(*args, **kwargs)
            self.clip_norm = float(clip_norm)

        def _all_reduce_sum_gradients(self, grads_and_vars):
            pairs = [(g, v) for g, v in super()._all_reduce_sum_gradients(grads_and_vars)]
            grads, _ = tf.clip_by_global_norm([g for g, _ in pairs], self.clip_norm)
            return list(zip(grads, [v for _, v in pairs]))

    Clipped.__name__ = f"Clipped{optimizer_cls.__name__}"
    return Clipped


def build_optimizer(model_cfg):
    """(optimizer, coupled_weight_decay). With gradient clipping on (BERT's recipe) the
    optimizer is `clipped`.

    SGD: PyTorch's weight_decay is an L2 term added to the gradient before momentum;
    Keras' `weight_decay` is decoupled, so the worker adds `coupled_weight_decay * w`
    to each gradient itself. Keras SGD's momentum (m = mu*m - lr*g; w += m) equals
    PyTorch's at a constant learning rate. AdamW: Keras' decoupled decay is PyTorch's
    (w -= lr*wd*w); epsilon is set to PyTorch's 1e-8 (Keras' default is 1e-7)."""
    opt = model_cfg["optimizer"]
    return choices.pick(OPTIMIZERS, opt["name"], "optimizer")(opt, modes.clip_norm(model_cfg))


def _make(optimizer_cls, clip_norm, **kwargs):
    if clip_norm is None:
        return optimizer_cls(**kwargs)
    return clipped(optimizer_cls)(clip_norm=clip_norm, **kwargs)


OPTIMIZERS = {
    "sgd": lambda o, clip: (_make(keras.optimizers.SGD, clip, learning_rate=o["lr"],
                                  momentum=o["momentum"]), float(o["weight_decay"])),
    "adamw": lambda o, clip: (_make(keras.optimizers.AdamW, clip, learning_rate=o["lr"],
                                    weight_decay=o["weight_decay"], beta_1=0.9, beta_2=0.999,
                                    epsilon=1e-8), 0.0),
}


def count_parameters(model) -> int:
    """Trainable weights, each variable once (the tied decoder adds only its bias)."""
    seen = {}
    for v in model.trainable_weights:
        seen[id(v)] = int(np.prod(v.shape))
    return sum(seen.values())


def parameter_count(model_cfg: dict) -> int:
    """The count that must equal frameworks.pytorch.models.parameter_count (within 0.5%)."""
    return count_parameters(build_model(model_cfg)[0])
