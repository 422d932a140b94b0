"""An answer's sentences: spaCy's spans as character offsets, a record's own sentences located, tokens to sentences."""

from __future__ import annotations

from itertools import pairwise

import numpy as np
import pytest

from blackbox_wd.errors import BBWDError
from blackbox_wd.measure.sentences import Span, locate, split, token_sentence

TEXTS = [
    "Dr. Smith went to Washington D.C. in 1950. He was born in St. Louis, Mo., e.g. near the river.",
    "John Smith (born 1 May 1950) is a painter.\n\nHe lives in Paris.\nHe paints.",
    "Zoë Müller — née Łukasz — was born in Zürich. 東京に住んでいます。 She moved in 2001!  Really?",
    "  Leading and trailing whitespace.   Second one.  \n",
    "no punctuation at all",
]


@pytest.mark.parametrize("text", TEXTS)
def test_split_spans_are_offsets_into_the_text(text):
    spans = split(text)
    assert spans and all(text[s.start : s.end] == s.text for s in spans)
    assert all(s.text == s.text.strip() and s.text for s in spans)  # no whitespace around a sentence
    assert all(a.end <= b.start for a, b in pairwise(spans))  # in order, not overlapping
    covered = "".join(text[a.end : b.start] for a, b in pairwise(spans))
    assert not covered.strip()  # only whitespace between sentences


@pytest.mark.parametrize(
    ("text", "sentences"),
    list(
        zip(
            TEXTS,
            [
                ["Dr. Smith went to Washington D.C. in 1950.", "He was born in St. Louis, Mo., e.g. near the river."],
                ["John Smith (born 1 May 1950) is a painter.", "He lives in Paris.", "He paints."],
                [
                    "Zoë Müller — née Łukasz — was born in Zürich.",
                    "東京に住んでいます。",
                    "She moved in 2001!",
                    "Really?",
                ],
                ["Leading and trailing whitespace.", "Second one."],
                ["no punctuation at all"],
            ],
            strict=True,
        )
    ),
)
def test_split_keeps_abbreviations_and_breaks_at_sentence_ends(text, sentences):
    assert [s.text for s in split(text)] == sentences
    assert split("") == [] and split(" \n ") == []


def test_locate_finds_the_records_sentences_in_order():
    text = "He was born. He was born. He died."
    spans = locate(text, ["He was born.", "He was born.", "He died."])
    assert spans == [Span("He was born.", 0, 12), Span("He was born.", 13, 25), Span("He died.", 26, 34)]


def test_a_missing_sentence_is_named_by_its_index():
    with pytest.raises(BBWDError, match=r"field 'sentences'\[1\] is not in the answer \(after character 12\)"):
        locate("He was born. He died.", ["He was born.", "He lived.", "He died."])
    with pytest.raises(BBWDError, match=r"'sentences'\[1\]"):  # in order: the first cannot be found again
        locate("He died. He was born.", ["He was born.", "He died."])


def test_a_token_goes_to_the_sentence_holding_most_of_its_characters():
    spans = [Span("ab cd.", 0, 6), Span("ef.", 8, 11)]
    offsets = np.array([(0, 2), (2, 5), (5, 9), (6, 8), (8, 11), (4, 10), (11, 12)])
    # (5, 9): 1 character in each: the earlier. (6, 8): whitespace only: none. (4, 10): 2 vs 2: the earlier.
    assert token_sentence(offsets, spans).tolist() == [0, 0, 0, -1, 1, 0, -1]
    assert token_sentence(offsets, []).tolist() == [-1] * 7
    assert token_sentence(np.zeros((0, 2)), spans).tolist() == []


@pytest.fixture(scope="module")
def reader():
    """SmolLM2-135M's TextReader (tokenizer only, no weights)."""
    from blackbox_wd.teachers.hf import load_card

    return load_card("smollm2-135m").reader


@pytest.mark.parametrize("text", TEXTS + ["<|im_end|> is text here.", "Zürich — 東京."])
def test_text_offsets_of_the_plain_encoding_are_the_tokenizers(reader, text):
    ids = reader.text_ids(text)
    offsets = reader.text_offsets(text, ids)
    assert offsets.shape == (len(ids), 2)
    assert offsets.tolist() == [list(o) for o in reader.plain.encode(text, add_special_tokens=False).offsets]
    assert offsets[0, 0] == 0 and offsets[-1, 1] == len(text)


def test_text_offsets_of_own_ids_come_from_decoded_prefixes(reader):
    # a white-box answer's own ids need not be the text's encoding: "Smi" + "th" is not " Smith"
    text = "Dr. Smith lives in Zürich — 東京."
    ids = reader.text_ids("Dr. Smi") + reader.text_ids("th lives in Zürich — 東京.")
    assert ids != reader.text_ids(text)
    offsets = reader.text_offsets(text, ids)
    pieces = [text[s:e] for s, e in offsets]
    assert "".join(pieces) == text  # contiguous, covering the text
    assert pieces[:5] == ["Dr", ".", " Sm", "i", "th"]
    assert "東" in pieces and "京" in pieces  # a character's last byte-token gets it, the others nothing
    eos = reader.tokenizer.eos_token_id
    with_eos = reader.text_offsets("Paris.", reader.text_ids("Paris.") + [eos])
    assert with_eos.tolist()[-1] == [6, 6]  # a control token spells no character
