"""`jit_scan`: the training set on the device once, one compiled `lax.scan` per epoch."""
