"""Feature-based evaluation, layer by layer: sentence retrieval (`retrieval`) and word alignment (`alignment`)
from the hidden states of any HF encoder, every layer from one forward pass (`layers`). The alignment methods
themselves (OT, argmax, itermax, sub-word → word links) are `metaxlm.alignment`, shared with pretraining."""
