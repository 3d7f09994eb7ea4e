"""One model built or loaded at a time in a process.

transformers 5 builds and loads models under process-wide patches (``torch.nn.init``'s functions
turned off while weights load, ``torch.linspace``, parameters on the meta device): a model built in
one thread while another thread loads one can end up with meta or uninitialised weights. Kedro's
``ThreadRunner`` runs the evaluation and the fine-tuning nodes side by side, and failed with
"Cannot copy out of meta tensor" (reproduced with three threads calling ``from_pretrained``). Every
place in the project that builds or loads a model does it under :data:`MODEL_LOCK`.
"""

from __future__ import annotations

import threading

MODEL_LOCK = threading.RLock()
