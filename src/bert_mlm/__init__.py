"""bert-mlm
"""

from bert_mlm.cpus import wait_passively

wait_passively()  # before anything loads torch: its OpenMP reads the setting then

__version__ = "0.1"
