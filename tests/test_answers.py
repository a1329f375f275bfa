"""The contradiction reader (tests/answers.py) catches each contradiction the 2026-12-06 audit saw, and passes a
coherent answer."""

from tests.answers import contradictions

COHERENT = """binding limit: decode at 410 samples/s (2 cores / 4.9 ms); files bs=8 w=2 reaches 97% of it
INPUT-BOUND: no config tried feeds the step rate of 1,000 samples/s; the best, files bs=8 w=2
answer: DataLoader(dataset, batch_size=8, num_workers=2)
expect: about 400 samples/s fed mid-epoch, training waiting on data 60% of the time
attack: decode 7.50 ms a sample: a cheaper decode: store fewer pixels or a faster codec, or more cores
"""


def test_a_coherent_answer_has_no_contradiction():
    assert contradictions(COHERENT, cuda=False) == []


def test_input_bound_beside_the_model_binding_is_a_contradiction():
    text = COHERENT.replace("binding limit: decode at 410", "binding limit: the model (paced, 138 samples/s")
    assert contradictions(text) == ["INPUT-BOUND beside the model as the binding limit",
                                    "advice for decode (decode 7.50 ms a sample: a cheaper decod...) where model "
                                    "binds"]


def test_feeds_beside_a_wait_over_five_percent_is_a_contradiction():
    text = ("binding limit: the model (paced, 100 samples/s alone); the loader feeds it 96 samples/s mid-epoch\n"
            "recommended: files bs=8 w=2, confirmed end to end: fed 96 samples/s mid-epoch with the model waiting "
            "on data 11% of the time, 90 over whole runs (step alone 100 samples/s)\n"
            "expect: 96 samples/s fed mid-epoch, training waiting on data 11% of the time\n")
    assert contradictions(text) == ["'feeds' beside an expected wait on data of 11%",
                                    "'recommended ... fed' with the model idle 11% mid-epoch"]


def test_advice_for_a_limit_that_does_not_bind_or_hardware_that_is_absent_is_a_contradiction():
    text = COHERENT.replace("attack: decode 7.50 ms a sample: a cheaper decode: store fewer pixels or a faster "
                            "codec, or more cores", "attack: read 3.1 ms a sample: pack small files into shards")
    assert contradictions(text) == ["advice for storage (read 3.1 ms a sample: pack small files i...) where "
                                    "decode binds"]
    text = COHERENT.replace("a cheaper decode: store fewer pixels or a faster codec, or more cores",
                            "decode on the GPU (--backend dali --dali-decode mixed), or store fewer pixels")
    assert contradictions(text, cuda=False) == ["advice naming a GPU on a machine without one"]
    assert contradictions(text, cuda=True) == []
