# Nova's functional framework needs its monkey patching before anything
# imports oslo; pytest imports this package before its test modules.
from nova import monkey_patch

monkey_patch.patch()
