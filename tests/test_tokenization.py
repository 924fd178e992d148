"""attention_course.data.tokenization: the byte-level BPE tokenizer, and bits per byte as the chars and lm tasks count
it (their validation windows, without training)."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
import torch

from attention_course.data.corpora import course_text
from attention_course.data.tokenization import bits_per_byte, encode, token_bytes, train_bpe
from attention_course.trainer.command import parse_args
from attention_course.trainer.tasks import CharsTask, LmTask

TRAINING_TEXT = (
    "The queries meet the keys; the weights, a softmax of their scores, mix the values.\n"
    "Les requêtes rencontrent les clés — la moyenne pondérée des valeurs.\n"
    "    def attention(q, k, v):\n        return softmax(q @ k.T / √d) @ v  # O(n²)\n"
) * 20
TRICKY = [
    "",
    " leading space, and trailing  ",
    "naïve café, crème brûlée — “quoted” … ±√x ≤ y²",
    "日本語のテキスト, 한국어, Ελληνικά, русский",  # scripts the tokenizer never saw
    "emoji 🙂👍🏽 and a flag 🇫🇷",
    "tabs\tand\r\nwindows newlines\n\n\n   indented",
    "\x00\x07 control characters \u200b zero width \ufeff",
]


def gpt2_byte_of_character() -> dict[str, int]:
    """GPT-2's table (its ``bytes_to_unicode``, reversed), written here apart from the module: the byte that each
    character of a byte-level token stands for. Printable bytes are their own character; the others, in byte
    order, are the characters from 256 on."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    character = {byte: byte for byte in printable}
    for n, byte in enumerate(b for b in range(256) if b not in character):
        character[byte] = 256 + n
    return {chr(c): byte for byte, c in character.items()}


def bytes_of(tokenizer, ids: list[int]) -> bytes:
    byte_of = gpt2_byte_of_character()
    return b"".join(bytes(byte_of[c] for c in tokenizer.id_to_token(i)) for i in ids)


@pytest.fixture(scope="module")
def tokenizer():
    return train_bpe(TRAINING_TEXT, 300)


@pytest.mark.parametrize("text", TRICKY + [TRAINING_TEXT])
def test_decoding_the_ids_gives_the_text_back_exactly(tokenizer, text):
    ids = encode(tokenizer, text)
    assert ids.dtype == torch.long and ids.dim() == 1
    assert tokenizer.decode(ids.tolist()) == text


def test_the_bytes_of_the_ids_are_the_texts_utf8_bytes(tokenizer):
    assert sorted(gpt2_byte_of_character().values()) == list(range(256))
    sizes = token_bytes(tokenizer)
    assert sizes.shape == (tokenizer.get_vocab_size(),) and sizes.min() >= 1
    for text in TRICKY:
        ids = encode(tokenizer, text).tolist()
        assert bytes_of(tokenizer, ids) == text.encode()
        assert int(sizes[ids].sum()) == len(text.encode())  # not len(text): most of these are not ASCII


def test_the_same_text_and_size_give_the_same_tokenizer_in_any_process(tokenizer):
    assert train_bpe(TRAINING_TEXT, 300).to_str() == tokenizer.to_str()
    # Another process has another hash seed: a set or dict of the text's pieces would come in another order.
    program = (
        "import sys; from attention_course.data.tokenization import train_bpe; "
        "print(train_bpe(sys.stdin.read(), 300).to_str())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "1" if os.environ.get("PYTHONHASHSEED") != "1" else "2"}
    other = subprocess.run(
        [sys.executable, "-c", program], input=TRAINING_TEXT, capture_output=True, text=True, env=env, timeout=120
    )
    assert other.returncode == 0, other.stderr
    assert other.stdout == tokenizer.to_str() + "\n"


def test_the_vocabulary_has_the_size_asked_or_what_a_small_text_allows(tokenizer):
    assert tokenizer.get_vocab_size() == 300
    assert train_bpe(course_text()[:50_000], 512).get_vocab_size() == 512
    # "ab ab ab" has two words to merge: a, b -> ab and Ġ, ab -> Ġab; nothing more can be merged
    small = train_bpe("ab ab ab", 1024)
    assert small.get_vocab_size() == 258 and {"ab", "Ġab"} <= set(small.get_vocab())
    with pytest.raises(ValueError, match="more than 256"):
        train_bpe(TRAINING_TEXT, 256)


def test_bits_per_byte_by_hand():
    # 5 tokens of 2 bytes each, each predicted with probability 1/4: 2 bits a token, 1 bit a byte
    assert bits_per_byte(math.log(4), tokens=5, utf8_bytes=10) == pytest.approx(1.0)
    # a uniform guess over the 256 byte values costs 8 bits a byte, whatever the tokens
    assert bits_per_byte(math.log(256), tokens=7, utf8_bytes=7) == pytest.approx(8.0)
    assert bits_per_byte(3 * math.log(256), tokens=4, utf8_bytes=12) == pytest.approx(8.0)


def test_a_vocabulary_too_small_for_the_bytes_is_refused(capsys):
    for size in ("100", "256", "0", "-5"):
        with pytest.raises(SystemExit):
            parse_args(["--task", "lm", "--vocab-size", size])
        assert "--vocab-size must be at least 257 (a token for each of the 256 byte values" in capsys.readouterr().err
    assert parse_args(["--task", "lm", "--vocab-size", "257"]).vocab_size == 257
    assert parse_args(["--task", "lm"]).vocab_size == 1024


def task_on(kind, text: str, tmp_path, *options):
    path = tmp_path / "text.txt"
    path.write_text(text)
    tiny = ["--d-model", "16", "--heads", "2", "--layers", "1", "--d-ff", "32", "--eval-examples", "60"]
    args = parse_args(["--task", kind.name, "--text", str(path), "--block-size", "16", *tiny, *options])
    torch.manual_seed(0)
    task = kind(args)
    model = task.model(fused=True).eval()
    return task, task.evaluate(model, torch.device("cpu"))


def window_bytes(task, byte_count) -> tuple[int, int]:
    """The tokens that the validation loss scores, and the bytes of text they hold, counted here."""
    targets = task.validation_windows()["y"]
    return targets.numel(), sum(byte_count(row.tolist()) for row in targets)


def test_for_ascii_text_bits_per_byte_are_bits_per_character(tmp_path):
    task, result = task_on(CharsTask, "the cat sat on the mat, and the dog sat on the log.\n" * 40, tmp_path)
    assert result["val_bytes_per_token"] == 1.0
    assert result["val_bits_per_byte"] == pytest.approx(result["val_bits_per_char"], rel=1e-12)
    assert result["val_bits_per_char"] == pytest.approx(result["val_loss"] / math.log(2))
    assert result["vocab_size"] == len(task.chars) and len(result["sample"]) == 200


def train_then_validate(train: str, validation: str) -> str:
    """A text whose last 10%, where the tasks cut it, is ``validation``: ``train`` repeated before it."""
    return (train * (9 * len(validation) // len(train) + 1))[: 9 * len(validation)] + validation


# The validation text goes from two-byte letters to ASCII: the windows scored hold another mix of them than the
# whole validation text (its ends are in fewer windows), so that only their own bytes give their bits per byte.
MIXED = train_then_validate("plain words, and ñ é ü. ", "ééé ñññ çà " * 6 + "plain ascii words only. " * 12)


def test_the_chars_task_counts_the_bytes_of_the_windows_it_scores(tmp_path):
    task, result = task_on(CharsTask, MIXED, tmp_path)
    tokens, covered = window_bytes(task, lambda ids: len(task.decode(ids).encode()))
    assert result["val_bits_per_byte"] == pytest.approx(result["val_loss"] * tokens / (math.log(2) * covered))
    assert result["val_bytes_per_token"] == pytest.approx(covered / tokens)
    assert result["val_bits_per_byte"] < result["val_bits_per_char"]  # more bytes than characters
    whole = len(task.decode(task.val_data.tolist()).encode()) / len(task.val_data)
    assert abs(whole - covered / tokens) > 0.01  # the whole validation text would give another figure


def test_the_lm_task_counts_the_bytes_of_the_windows_it_scores(tmp_path):
    task, result = task_on(LmTask, MIXED, tmp_path, "--vocab-size", "300")
    tokens, covered = window_bytes(task, lambda ids: len(bytes_of(task.tokenizer, ids)))
    assert result["val_bits_per_byte"] == pytest.approx(result["val_loss"] * tokens / (math.log(2) * covered))
    assert result["val_bytes_per_token"] == pytest.approx(covered / tokens) and covered / tokens > 1.5
    whole = len(MIXED[int(0.9 * len(MIXED)) :].encode()) / len(task.val_data)
    assert abs(whole - covered / tokens) > 0.01
    assert result["vocab_size"] == task.tokenizer.get_vocab_size() <= 300
    assert isinstance(result["sample"], str) and result["sample"]


def test_the_lm_tokenizer_never_saw_the_validation_text(tmp_path):
    # the validation text is a word that the training text never has: a tokenizer trained on it would merge it
    text = train_then_validate("the training text, with its words. ", "zyzzyva " * 20)
    task, _ = task_on(LmTask, text, tmp_path, "--vocab-size", "400")
    assert task.tokenizer.to_str() == train_bpe(text[: int(0.9 * len(text))], 400).to_str()
    assert not any("zyz" in token for token in task.tokenizer.get_vocab())
    assert task.decode(task.val_data.tolist()) == "zyzzyva " * 20
