"""bert-mlm
"""

__version__ = "0.1"
