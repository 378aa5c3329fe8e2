"""attnmt: small, complete attention-based neural machine translation in PyTorch."""

__version__ = "0.1.0"

PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
"""Special token ids, the same in every SentencePiece model attnmt trains."""
