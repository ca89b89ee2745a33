"""What every other package stands on; it imports nothing else of the package."""

import time

LOADED_NS = time.time_ns()  # when the package began to load: a code file changed after it may not be what ran
